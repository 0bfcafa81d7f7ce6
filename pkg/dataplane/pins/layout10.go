package pins

import (
	"encoding/binary"
	"fmt"

	"github.com/xlbproject/xlb/pkg/limits"
)

// The step from layout 10 (issue 30: weighted round robin and Maglev; the
// last build of it: commit 989c0b8) to layout 11 (issue 31: UDP). Every
// pair and service of layout 10 is TCP. Map by map:
//
//   - xlb_services: struct service gained udp_unreplied_max and pad2
//     (88 -> 96 bytes): each record gets 8 zero bytes (serviceFrom10).
//   - xlb_reaped: XLB_REAPED_REASONS went from 8 to 16 cells per member
//     id: cell r of member m moves from m*8+r to m*16+r (reapedFrom10), so
//     each member's removals keep their meaning; the UDP reasons start
//     at 0.
//   - xlb_snat_cursors: XLB_SNAT_CURSORS cells (TCP's, then UDP's): the
//     backend ids' cursors are copied by index into the TCP half; the UDP
//     half starts at 0 (or random: Options.RandomSNATCursors).
//   - xlb_counters: enum xlb_counter gained four UDP counters after every
//     counter layout 10 had: copied by index, the new ones at 0.
//   - xlb_udp_unreplied and xlb_svc_counters are new: they start empty
//     (no UDP pair exists).
//   - xlb_flows: unchanged (XLB_F_UDP and XLB_F_UDP_REPLIED are unused in
//     layout 10); xlb_snat_ports is derived and rebuilt from it.
//   - everything else is unchanged.
var layout10Step = Step{From: 10, Maps: map[string]Converter{
	xlbMapXlbServices: {Value: serviceFrom10},
	xlbMapXlbReaped:   {Key: reapedFrom10},
}}

// Service10Size is layouts 9 and 10's struct service (88 bytes).
const Service10Size = 88

// ReapedReasons10 is layouts 2 to 10's reaped counters per member id.
const ReapedReasons10 = 8

// serviceFrom10 appends layout 11's udp_unreplied_max and pad2 (0: a TCP
// service) to a layout 10 service record.
func serviceFrom10(_, old []byte) ([]byte, error) {
	if len(old) != Service10Size {
		return nil, fmt.Errorf("layout 10 service record of %d bytes, want %d", len(old), Service10Size)
	}
	return append(append([]byte(nil), old...), make([]byte, 8)...), nil
}

// reapedFrom10 moves a reaped cell of layout 10 (ReapedReasons10 per
// member id) to layout 11's place of the same reason (limits.ReapedReasons
// per member id).
func reapedFrom10(old []byte) ([]byte, error) {
	if len(old) != 4 {
		return nil, fmt.Errorf("reaped key of %d bytes, want 4", len(old))
	}
	k := binary.NativeEndian.Uint32(old)
	return binary.NativeEndian.AppendUint32(nil, k/ReapedReasons10*uint32(limits.ReapedReasons)+k%ReapedReasons10), nil
}
