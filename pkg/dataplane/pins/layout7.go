package pins

import (
	"fmt"
	"structs"
	"unsafe"
)

// The step from layout 7 (issue 27: writes through a stale entry
// pointer; the last build of it: commit b09446e) to layout 8 (issue 36:
// timestamps rewritten toward backends). Map by map:
//
//   - xlb_flows: struct flow_value grows from 48 to 56 bytes: ts_off (the
//     pair's timestamp offset, bpf/tsopt.h) and pad2 after syn_us. A pair
//     of layout 7 never rewrote its timestamps: ts_off 0, and neither
//     XLB_F_TS_SYN nor XLB_F_TS, so its segments keep passing unchanged
//     (flowFrom7); the key is unchanged.
//   - xlb_counters: enum xlb_counter gained XLB_C_SNAT_TIMEWAIT_REUSES
//     after every counter layout 7 had: the copy as it is, the new one
//     starting at 0.
//   - xlb_backend_ts is new: every backend starts unknown (no SYN-ACK
//     seen), until its next SYN-ACK to a SYN with timestamps.
//   - everything else is unchanged.
var layout7Step = Step{From: 7, Maps: map[string]Converter{
	xlbMapXlbFlows: {Value: flowFrom7},
}}

// FlowValue7 is layout 7's struct flow_value: this layout's without
// ts_off and pad2.
type FlowValue7 struct {
	_          structs.HostLayout
	SaddrBe    uint32
	DaddrBe    uint32
	SportBe    uint16
	DportBe    uint16
	CsumIp     uint16
	CsumL4     uint16
	Generation uint32
	Flags      uint32
	Nexthop    uint32
	LastSeen   uint32
	TrackSeq   uint32
	TrackWin   uint32
	BackendId  uint16
	Wscale     uint8
	Pad        uint8
	SynUs      uint32
}

// FlowValue7Size is the bytes of flowValue7.
const FlowValue7Size = int(unsafe.Sizeof(FlowValue7{}))

// current is o in this layout: no timestamp offset.
func (o FlowValue7) current() xlbFlowValue {
	return xlbFlowValue{SaddrBe: o.SaddrBe, DaddrBe: o.DaddrBe, SportBe: o.SportBe, DportBe: o.DportBe,
		CsumIp: o.CsumIp, CsumL4: o.CsumL4, Generation: o.Generation, Flags: o.Flags, Nexthop: o.Nexthop,
		LastSeen: o.LastSeen, TrackSeq: o.TrackSeq, TrackWin: o.TrackWin, BackendId: o.BackendId,
		Wscale: o.Wscale, Pad: o.Pad, SynUs: o.SynUs}
}

// AsFlowValue7 is v as layout 7 held it: without ts_off and pad2.
func AsFlowValue7(v FlowValue) FlowValue7 {
	return FlowValue7{SaddrBe: v.SaddrBe, DaddrBe: v.DaddrBe, SportBe: v.SportBe, DportBe: v.DportBe,
		CsumIp: v.CsumIp, CsumL4: v.CsumL4, Generation: v.Generation, Flags: v.Flags, Nexthop: v.Nexthop,
		LastSeen: v.LastSeen, TrackSeq: v.TrackSeq, TrackWin: v.TrackWin, BackendId: v.BackendId,
		Wscale: v.Wscale, Pad: v.Pad, SynUs: v.SynUs}
}

// flowFrom7 widens a layout 7 flow value into layout 8's (layout7Step).
func flowFrom7(_, old []byte) ([]byte, error) {
	o, err := FromBytes[FlowValue7](old)
	if err != nil {
		return nil, fmt.Errorf("layout 7 flow value: %w", err)
	}
	v := o.current()
	return ToBytes(&v), nil
}
