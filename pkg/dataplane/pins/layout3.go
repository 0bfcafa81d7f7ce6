package pins

import (
	"fmt"
	"unsafe"

	"github.com/xlbproject/xlb/pkg/limits"
)

// The step from layout 3 (issue 13; the last build of it: commit c29c03f)
// to layout 4 (issue 14: handshake latency, backend ports from
// discovery). Map by map:
//
//   - xlb_flows: struct flow_value gained syn_us (44 bytes to 48, the
//     size the kernel's hash map gave the value anyway). Layout 3 did not
//     time SYNs: every entry gets 0, "not timed", so the handshake of a
//     pair migrated before its SYN-ACK is never counted.
//   - xlb_backend_sets: struct backend_ref narrowed id to 16 bits (ids
//     are below XLB_MAX_BACKENDS, as flow_value.backend_id always held
//     them) and gained port_be in the other half. Layout 3 had no backend
//     ports: every ref gets 0, which no mapping uses (a layout 3 config
//     has no mapping without a remote port).
//   - xlb_handshake is new; it starts empty.
//   - everything else is unchanged: struct xlb_config keeps its bytes
//     (remote_port_be 0, which layout 3 never wrote, now means "the
//     backend's own port").
var layout3Step = Step{From: 3, Maps: map[string]Converter{
	xlbMapXlbFlows:       {Value: flowFrom3},
	xlbMapXlbBackendSets: {Value: backendSetFrom3},
}}

// FlowValue3Size is the bytes of layout 3's struct flow_value: layout 4's
// without its last field, syn_us, which the kernel's rounding of the
// value to 8 bytes had left room for.
const FlowValue3Size = int(unsafe.Offsetof(FlowValue6{}.SynUs))

// BackendRef3 is layout 3's (and layout 2's) struct backend_ref.
type BackendRef3 struct {
	IpBe, Id uint32
}

// BackendSet3 is layout 3's (and layout 2's) struct backend_set.
type BackendSet3 struct {
	Count, Pad uint32
	Entries    [limits.MaxBackends]BackendRef3
}

func flowFrom3(_, old []byte) ([]byte, error) {
	if len(old) != FlowValue3Size {
		return nil, fmt.Errorf("layout 3 flow value: %d bytes, want %d", len(old), FlowValue3Size)
	}
	return append(old, make([]byte, FlowValue6Size-FlowValue3Size)...), nil // syn_us 0: not timed
}

func backendSetFrom3(_, old []byte) ([]byte, error) {
	o, err := FromBytes[BackendSet3](old)
	if err != nil {
		return nil, fmt.Errorf("layout 3 routable set: %w", err)
	}
	n := BackendSet8{Count: o.Count, Pad: o.Pad}
	for i, r := range o.Entries {
		if i < int(o.Count) && r.Id >= limits.MaxBackends {
			return nil, fmt.Errorf("layout 3 routable set: entry %d has backend id %d, beyond %d", i, r.Id, limits.MaxBackends-1)
		}
		n.Entries[i] = BackendRef8{IpBe: r.IpBe, Id: uint16(r.Id)}
	}
	return ToBytes(&n), nil
}
