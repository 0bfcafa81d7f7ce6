package bgp

import (
	"net/netip"
	"reflect"
	"testing"
)

// TestRoutes is the announce rule's table (issue 15): ready × drained ×
// shutting down × peer up/down → the routes the peer holds. Only a ready,
// undrained instance that is not shutting down announces, and only to an
// established peer.
func TestRoutes(t *testing.T) {
	prefixes := []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("203.0.113.0/28")}
	peer := netip.MustParseAddr("198.51.100.1")
	const (
		up, down = true, false
	)
	tests := []struct {
		ready, drained, shuttingDown, peerUp bool
		want                                 []netip.Prefix
	}{
		{true, false, false, up, prefixes},
		{true, false, false, down, nil},
		{true, false, true, up, nil},
		{true, false, true, down, nil},
		{true, true, false, up, nil},
		{true, true, false, down, nil},
		{true, true, true, up, nil},
		{true, true, true, down, nil},
		{false, false, false, up, nil},
		{false, false, false, down, nil},
		{false, false, true, up, nil},
		{false, false, true, down, nil},
		{false, true, false, up, nil},
		{false, true, false, down, nil},
		{false, true, true, up, nil},
		{false, true, true, down, nil},
	}
	for _, tt := range tests {
		got := Routes(Want(tt.ready, tt.drained, tt.shuttingDown), prefixes, []PeerState{{peer, tt.peerUp}})
		if want := map[netip.Addr][]netip.Prefix{peer: tt.want}; !reflect.DeepEqual(got, want) {
			t.Errorf("ready=%v drained=%v shutting_down=%v peer_up=%v: routes %v, want %v",
				tt.ready, tt.drained, tt.shuttingDown, tt.peerUp, got, want)
		}
	}
}

// Each peer gets its own answer, and its own copy of the prefixes.
func TestRoutesPerPeer(t *testing.T) {
	prefixes := []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32")}
	a, b := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")
	got := Routes(true, prefixes, []PeerState{{a, true}, {b, false}})
	want := map[netip.Addr][]netip.Prefix{a: prefixes, b: nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Routes = %v, want %v", got, want)
	}
	got[a][0] = netip.MustParsePrefix("203.0.113.0/24")
	if prefixes[0] != netip.MustParsePrefix("192.0.2.10/32") {
		t.Errorf("Routes shares its result with the caller's prefixes")
	}
	if got := Routes(true, prefixes, nil); len(got) != 0 {
		t.Errorf("Routes(no peers) = %v, want empty", got)
	}
}
