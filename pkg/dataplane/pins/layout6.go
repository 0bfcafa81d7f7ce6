package pins

import (
	"fmt"
	"structs"
	"unsafe"
)

// The step from layout 6 (issue 27's first part; the last build of it:
// commit f2593f4) to layout 7 (issue 27: writes through a stale entry
// pointer). Map by map:
//
//   - xlb_flows: struct flow_value keeps its size and fields, but
//     generation and flags move before nexthop, so that the two form one
//     aligned 64-bit word the data path sets flags with (flow.h flow_set:
//     a compare-and-swap that fails when the entry is another pair's
//     now). Each value is reordered (flowFrom6); the key is unchanged.
//   - xlb_counters: enum xlb_counter gained XLB_C_PAIR_GONE_IN_FLIGHT
//     after every counter layout 6 had: the copy as it is, the new one
//     starting at 0.
//   - everything else is unchanged.
var layout6Step = Step{From: 6, Maps: map[string]Converter{
	xlbMapXlbFlows: {Value: flowFrom6},
}}

// FlowValue6 is layouts 4 to 6's struct flow_value (layout 3's is the
// same without syn_us: flowValue3Size): nexthop before generation and
// flags.
type FlowValue6 struct {
	_          structs.HostLayout
	SaddrBe    uint32
	DaddrBe    uint32
	SportBe    uint16
	DportBe    uint16
	CsumIp     uint16
	CsumL4     uint16
	Nexthop    uint32
	Generation uint32
	Flags      uint32
	LastSeen   uint32
	TrackSeq   uint32
	TrackWin   uint32
	BackendId  uint16
	Wscale     uint8
	Pad        uint8
	SynUs      uint32
}

// FlowValue6Size is the bytes of flowValue6; the same as layout 7's
// (flowValue7Size).
const FlowValue6Size = int(unsafe.Sizeof(FlowValue6{}))

// next is o in layout 7's order.
func (o FlowValue6) next() FlowValue7 {
	return FlowValue7{SaddrBe: o.SaddrBe, DaddrBe: o.DaddrBe, SportBe: o.SportBe, DportBe: o.DportBe,
		CsumIp: o.CsumIp, CsumL4: o.CsumL4, Generation: o.Generation, Flags: o.Flags, Nexthop: o.Nexthop,
		LastSeen: o.LastSeen, TrackSeq: o.TrackSeq, TrackWin: o.TrackWin, BackendId: o.BackendId,
		Wscale: o.Wscale, Pad: o.Pad, SynUs: o.SynUs}
}

// AsFlowValue6 is v (layout 7's) in layouts 4 to 6's order.
func AsFlowValue6(v FlowValue7) FlowValue6 {
	return FlowValue6{SaddrBe: v.SaddrBe, DaddrBe: v.DaddrBe, SportBe: v.SportBe, DportBe: v.DportBe,
		CsumIp: v.CsumIp, CsumL4: v.CsumL4, Nexthop: v.Nexthop, Generation: v.Generation, Flags: v.Flags,
		LastSeen: v.LastSeen, TrackSeq: v.TrackSeq, TrackWin: v.TrackWin, BackendId: v.BackendId,
		Wscale: v.Wscale, Pad: v.Pad, SynUs: v.SynUs}
}

// flowFrom6 reorders a layout 6 flow value into layout 7's (layout6Step).
func flowFrom6(_, old []byte) ([]byte, error) {
	o, err := FromBytes[FlowValue6](old)
	if err != nil {
		return nil, fmt.Errorf("layout 6 flow value: %w", err)
	}
	v := o.next()
	return ToBytes(&v), nil
}
