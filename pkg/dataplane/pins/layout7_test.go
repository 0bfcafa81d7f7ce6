package pins

import "testing"

// Layout 7's flow value gains ts_off and pad2 in layout 8, both 0 (a
// pair of layout 7 rewrites no timestamps); every other field keeps its
// value and place.
func TestLayout7Step(t *testing.T) {
	o := FlowValue7{SaddrBe: 1, DaddrBe: 2, SportBe: 3, DportBe: 4, CsumIp: 5, CsumL4: 6, Generation: 8,
		Flags: 9, Nexthop: 7, LastSeen: 10, TrackSeq: 11, TrackWin: 12, BackendId: 13, Wscale: 14, Pad: 0, SynUs: 15}
	out, err := flowFrom7(nil, ToBytes(&o))
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromBytes[xlbFlowValue](out)
	if err != nil {
		t.Fatal(err)
	}
	want := xlbFlowValue{SaddrBe: 1, DaddrBe: 2, SportBe: 3, DportBe: 4, CsumIp: 5, CsumL4: 6, Generation: 8,
		Flags: 9, Nexthop: 7, LastSeen: 10, TrackSeq: 11, TrackWin: 12, BackendId: 13, Wscale: 14, SynUs: 15}
	if got != want {
		t.Errorf("layout 8 value %+v, want %+v", got, want)
	}
	if AsFlowValue7(want) != o {
		t.Errorf("asFlowValue7(%+v) = %+v, want %+v", want, AsFlowValue7(want), o)
	}
	if _, err := flowFrom7(nil, make([]byte, FlowValueSize)); err == nil {
		t.Error("a layout 8 value was converted as a layout 7 one")
	}
	if FlowValue7Size != 48 || FlowValueSize != 56 {
		t.Errorf("flow values of %d and %d bytes, want 48 (layout 7) and 56 (layout 8)", FlowValue7Size, FlowValueSize)
	}
}
