package pins

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// The neighbour an entry's MACs name: its destination when the table
// gives it that MAC, else the one address with it, else none (an
// L2-sender slot).
func TestLayout2NeighbourChoice(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	shared, single, unknown := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}, [6]byte{2, 0, 0, 0, 0, 3}
	h := &hopsFrom2{neigh: map[uint32]map[[6]byte][]uint32{}, host: Host{Neighbours: func(int) ([]Neighbour, error) {
		return []Neighbour{{a, shared}, {b, shared}, {c, single}, {netip.IPv4Unspecified(), unknown}}, nil
	}}}
	for _, tc := range []struct {
		mac  [6]byte
		dst  netip.Addr
		want netip.Addr
	}{
		{shared, b, b},            // the destination itself
		{shared, c, netip.Addr{}}, // several others: the L2 sender
		{single, a, c},            // the only one: the gateway
		{unknown, a, netip.Addr{}},
	} {
		got, err := h.neighbour(1, tc.mac, be32(tc.dst))
		if err != nil {
			t.Fatal(err)
		}
		want := uint32(0)
		if tc.want.IsValid() {
			want = be32(tc.want)
		}
		if got != want {
			t.Errorf("MAC %x toward %s: %s, want %s", tc.mac, tc.dst, addrOf(got), tc.want)
		}
	}
}

// addrOf is the inverse of be32.
func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
