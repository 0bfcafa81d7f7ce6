package dataplane_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Remembered FIB answers (bpf/nexthop.h memo_next_hop; issue 17): a SYN
// takes the slot a SYN on its CPU resolved less than FIBMemoTicks ago,
// only while that slot still holds the same next hop, and a route change
// reaches the pairs created after those ticks. One backend, so that every
// SYN goes to it.

// A slot freed since the last lookup is no answer: the next SYN resolves
// its next hops again and names slots that hold them.
func TestNextHopMemoEndsWithItsSlot(t *testing.T) {
	backend := dt.OneArmBackends[0]
	e := dt.NewEnv(t, dt.Options{Backends: []netip.Addr{backend}})
	first := dial(t, e, 33000, synOptions(-1))
	freed, err := e.DP.FreeNextHops(make([]uint64, dataplane.NextHopWords), e.Now(t).Low32()+1)
	if err != nil || freed < 2 {
		t.Fatalf("FreeNextHops freed %d slots (err %v), want both of the first pair's", freed, err)
	}
	// dial checks the frame and that no packet looked its next hop up again
	second := dial(t, e, 33001, synOptions(-1))
	wantNextHop(t, e, second.p.Fwd.Nexthop, e.BackendIface(), backend, dt.MAC(backend))
	wantNextHop(t, e, second.p.Rev.Nexthop, e.Front, dt.ClientIP, dt.MAC(dt.ClientIP))
	if first.p.Backend() != second.p.Backend() {
		t.Fatalf("pairs to %v and %v, want the one backend", first.p.Backend(), second.p.Backend())
	}
}

// The backend moves behind a router (a host route via the second client):
// a SYN more than FIBMemoTicks after the last lookup goes through the
// router, and the pair before keeps its slot.
func TestNextHopMemoFollowsRoutes(t *testing.T) {
	backend := dt.OneArmBackends[0]
	e := dt.NewEnv(t, dt.Options{Backends: []netip.Addr{backend}})
	first := dial(t, e, 33000, synOptions(-1))
	err := e.Do(func() error {
		return netlink.RouteAdd(&netlink.Route{LinkIndex: e.Front.Index, Gw: dt.Client2IP.AsSlice(),
			Dst: &net.IPNet{IP: backend.AsSlice(), Mask: net.CIDRMask(32, 32)}})
	})
	if err != nil {
		t.Fatalf("route %s via %s: %v", backend, dt.Client2IP, err)
	}
	wait, err := e.DP.Duration(dataplane.FIBMemoTicks + 1)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(wait)

	c := dt.Client(33001)
	e.MustRun(t, synFrom(e, c, 80).Frame(), e.Front, dt.XDPTX)
	p := e.MustPair(t, c, 80)
	wantNextHop(t, e, p.Fwd.Nexthop, e.Front, dt.Client2IP, dt.MAC(dt.Client2IP))
	wantNextHop(t, e, first.p.Fwd.Nexthop, e.BackendIface(), backend, dt.MAC(backend))
	if p.Backend().Addr() != backend {
		t.Fatalf("pair to %v, want %s", p.Backend(), backend)
	}
}
