package dataplane_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
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

// With several SNAT addresses the backend's next hop is looked up from
// the address the pair gets: here a source rule sends what leaves from
// the second SNAT address to the backend through a router (the second
// client), while the first address reaches it on link. The first pair
// takes the first address's only port, the second pair the second
// address's, and each names its own next hop. The lookup used to take the
// first SNAT address as the source for every pair.
func TestNextHopFromThePairsSNATAddress(t *testing.T) {
	backend := dt.OneArmBackends[0]
	extra := testnet.XLBExtraIP(0)
	e := dt.NewEnv(t, dt.Options{Backends: []netip.Addr{backend}, SNATPortLo: 40000, SNATPortHi: 40000, ExtraSNAT: []netip.Addr{extra}})
	const table = 100
	err := e.Do(func() error {
		rule := netlink.NewRule()
		rule.Src = &net.IPNet{IP: extra.AsSlice(), Mask: net.CIDRMask(32, 32)}
		rule.Table = table
		if err := netlink.RuleAdd(rule); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: e.Front.Index, Gw: dt.Client2IP.AsSlice(), Table: table,
			Dst: &net.IPNet{IP: backend.AsSlice(), Mask: net.CIDRMask(32, 32)}})
	})
	if err != nil {
		t.Fatalf("source route from %s via %s: %v", extra, dt.Client2IP, err)
	}

	var pairs []dt.Pair
	for _, port := range []uint16{33000, 33001} {
		c := dt.Client(port)
		e.MustRun(t, synFrom(e, c, 80).Frame(), e.Front, dt.XDPTX)
		pairs = append(pairs, e.MustPair(t, c, 80))
	}
	if pairs[0].Fwd.NewSrc().Addr() != e.SNAT || pairs[1].Fwd.NewSrc().Addr() != extra {
		t.Fatalf("pairs from %v and %v, want %s then %s", pairs[0].Fwd.NewSrc(), pairs[1].Fwd.NewSrc(), e.SNAT, extra)
	}
	wantNextHop(t, e, pairs[0].Fwd.Nexthop, e.BackendIface(), backend, dt.MAC(backend))
	wantNextHop(t, e, pairs[1].Fwd.Nexthop, e.Front, dt.Client2IP, dt.MAC(dt.Client2IP))
}
