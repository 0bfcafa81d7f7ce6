package pins

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// The step from layout 5 (issue 17; the last build of it: commit 8c85783)
// to layout 6 (issue 27: correct under change). Map by map:
//
//   - xlb_counters: enum xlb_counter gained XLB_C_FRAGS_FORWARDED,
//     XLB_C_FRAGS_PASSED, XLB_C_IP_OPTIONS_FORWARDED and XLB_C_RST_INEXACT
//     after every counter layout 5 had, so the array grew by four entries;
//     each counter keeps its index and the new ones start at 0 (the copy
//     as it is).
//   - xlb_cfg: struct xlb_config gained snat_reuse_ticks (the SNAT reuse
//     guard in ticks), nretired and retired (the SNAT spaces an earlier
//     config handed out) after every field layout 5 had: the value is
//     layout 5's followed by zeros, which Configure fills in before the
//     new program runs (configFrom5).
//   - xlb_flows: the key and the value keep their bytes, but syn_us of an
//     established forward entry now holds the client's segment end
//     (track.h track_send: exact RSTs, and whether the backend's FIN
//     acknowledged the client's) where layout 5 left the SYN's time: such
//     entries get 0, "not known yet", which the data path learns from the
//     client's next segment (flowFrom5). Embryonic forward entries keep
//     the SYN's time (the handshake histogram); reverse entries had 0.
//   - xlb_nexthops: struct nexthop keeps its bytes; the high bit of
//     ifindex (XLB_NEXTHOP_STALE) now marks a slot whose next hop a route
//     or neighbour change made stale, which layout 5 never set: its slots
//     copy as they are.
//   - xlb_frags, xlb_snat_sync_batch and xlb_nexthop_batch are new and
//     never pinned.
//   - everything else is unchanged.
var layout5Step = Step{From: 5, Maps: map[string]Converter{
	xlbMapXlbCfg:   {Value: configFrom5},
	xlbMapXlbFlows: {Value: flowFrom5},
}}

// Config5Size is the bytes of layouts 3 to 5's struct xlb_config: layout
// 6's (Config8) up to snat_reuse_ticks, its first new field.
const Config5Size = int(unsafe.Offsetof(Config8{}.SnatReuseTicks))

// configFrom5 is layout 5's config with layout 6's new fields zeroed.
func configFrom5(_, old []byte) ([]byte, error) {
	if len(old) != Config5Size {
		return nil, fmt.Errorf("layout 5 config: %d bytes, want %d", len(old), Config5Size)
	}
	out := make([]byte, Config8Size)
	copy(out, old)
	return out, nil
}

// Offsets in layouts 5 and 6's flow keys and values.
var (
	flowKeyDirOffset     = int(unsafe.Offsetof(xlbFlowKey{}.Dir))
	flowValueFlagsOffset = int(unsafe.Offsetof(FlowValue6{}.Flags))
	flowValueSynUsOffset = int(unsafe.Offsetof(FlowValue6{}.SynUs))
)

// flowFrom5 clears syn_us of an established forward entry (layout5Step).
func flowFrom5(key, old []byte) ([]byte, error) {
	if len(key) != int(unsafe.Sizeof(xlbFlowKey{})) || len(old) != FlowValue6Size {
		return nil, fmt.Errorf("layout 5 flow entry: %d/%d-byte key/value, want %d/%d", len(key), len(old), unsafe.Sizeof(xlbFlowKey{}), FlowValue6Size)
	}
	flags := binary.NativeEndian.Uint32(old[flowValueFlagsOffset:])
	if key[flowKeyDirOffset] == uint8(xlbXlbDirXLB_DIR_CLIENT) && flags&uint32(xlbXlbFlowFlagsXLB_F_ESTABLISHED) != 0 {
		binary.NativeEndian.PutUint32(old[flowValueSynUsOffset:], 0)
	}
	return old, nil
}
