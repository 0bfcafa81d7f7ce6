package pins

import "testing"

// Layout 6's flow value moves generation and flags before nexthop in
// layout 7; every field keeps its value.
func TestLayout6Step(t *testing.T) {
	o := FlowValue6{SaddrBe: 1, DaddrBe: 2, SportBe: 3, DportBe: 4, CsumIp: 5, CsumL4: 6, Nexthop: 7,
		Generation: 8, Flags: 9, LastSeen: 10, TrackSeq: 11, TrackWin: 12, BackendId: 13, Wscale: 14, SynUs: 15}
	out, err := flowFrom6(nil, ToBytes(&o))
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromBytes[FlowValue7](out)
	if err != nil {
		t.Fatal(err)
	}
	want := FlowValue7{SaddrBe: 1, DaddrBe: 2, SportBe: 3, DportBe: 4, CsumIp: 5, CsumL4: 6, Generation: 8,
		Flags: 9, Nexthop: 7, LastSeen: 10, TrackSeq: 11, TrackWin: 12, BackendId: 13, Wscale: 14, SynUs: 15}
	if got != want {
		t.Errorf("layout 7 value %+v, want %+v", got, want)
	}
	if AsFlowValue6(want) != o {
		t.Errorf("asFlowValue6(%+v) = %+v, want %+v", want, AsFlowValue6(want), o)
	}
	if _, err := flowFrom6(nil, make([]byte, 44)); err == nil {
		t.Error("a short value was converted")
	}
}
