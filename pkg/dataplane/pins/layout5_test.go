package pins

import (
	"testing"
)

// Layout 5's established forward entries held the SYN's time in syn_us,
// which layout 6 reads as the client's segment end: the step clears it
// there and nowhere else, and pads the config with zeros.
func TestLayout5Step(t *testing.T) {
	established := uint32(xlbXlbFlowFlagsXLB_F_ESTABLISHED | xlbXlbFlowFlagsXLB_F_SYNACK)
	for _, c := range []struct {
		name  string
		dir   uint8
		flags uint32
		want  uint32
	}{
		{"established forward entry", uint8(xlbXlbDirXLB_DIR_CLIENT), established, 0},
		{"embryonic forward entry keeps the SYN's time", uint8(xlbXlbDirXLB_DIR_CLIENT), uint32(xlbXlbFlowFlagsXLB_F_SYNACK), 777},
		{"reverse entry", uint8(xlbXlbDirXLB_DIR_BACKEND), established, 777},
	} {
		k := xlbFlowKey{SaddrBe: 1, DaddrBe: 2, SportBe: 3, DportBe: 4, Proto: 6, Dir: c.dir}
		v := FlowValue6{Generation: 9, Flags: c.flags, LastSeen: 5, SynUs: 777}
		out, err := flowFrom5(ToBytes(&k), ToBytes(&v))
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromBytes[FlowValue6](out)
		if err != nil {
			t.Fatal(err)
		}
		want := v
		want.SynUs = c.want
		if got != want {
			t.Errorf("%s: %+v, want %+v", c.name, got, want)
		}
	}
	if _, err := flowFrom5(make([]byte, 3), make([]byte, FlowValue6Size)); err == nil {
		t.Error("a short key was converted")
	}

	old := make([]byte, Config5Size)
	for i := range old {
		old[i] = byte(i + 1)
	}
	out, err := configFrom5(nil, old)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != Config8Size || string(out[:Config5Size]) != string(old) {
		t.Fatalf("config: %d bytes, want layout 5's %d followed by zeros", len(out), Config5Size)
	}
	for i, b := range out[Config5Size:] {
		if b != 0 {
			t.Fatalf("config byte %d after layout 5's is %d, want 0", Config5Size+i, b)
		}
	}
	if _, err := configFrom5(nil, old[:10]); err == nil {
		t.Error("a short config was converted")
	}
}
