package dataplane_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Stale next hops (issue 27 finding 1: established pairs never followed a
// route change): the daemon marks stale the slots of a next hop whose
// route changed or whose neighbour failed (MarkNextHopsStale,
// MarkNeighbourStale; pkg/hostnet's watcher). No new pair takes a stale
// slot, each established pair naming one looks its next hop up again at
// its next packet (Counters.NextHopRefreshes) and names the slot the FIB
// gives now, and the maintenance walk frees the stale slot once no entry
// names it. One backend, so that every SYN goes to it.

// The backend moves behind a router (a host route via the second client):
// once the backend's slot is stale, the established pair's next packet
// leaves toward the router, and so does a new pair's SYN at once (no
// remembered FIB answer names a stale slot). The stale slot is freed once
// no entry names it.
func TestNextHopStaleFollowsRoute(t *testing.T) {
	backend := dt.OneArmBackends[0]
	e := dt.NewEnv(t, dt.Options{Backends: []netip.Addr{backend}})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	data := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload)
	k.forward("client data before the route change", data, counted{})
	old := k.p.Fwd.Nexthop

	err := e.Do(func() error {
		return netlink.RouteAdd(&netlink.Route{LinkIndex: e.Front.Index, Gw: dt.Client2IP.AsSlice(),
			Dst: &net.IPNet{IP: backend.AsSlice(), Mask: net.CIDRMask(32, 32)}})
	})
	if err != nil {
		t.Fatalf("route %s via %s: %v", backend, dt.Client2IP, err)
	}
	mustUpdate(t, "mark the backend's next hop stale", 1)(e.DP.MarkNextHopsStale(func(_ int, ip netip.Addr) bool { return ip == backend }))
	if h, err := e.DP.NextHop(old); err != nil || !h.Stale || h.Ifindex != e.Front.Index || h.IP != backend {
		t.Fatalf("slot %d after MarkNextHopsStale: %v (err %v), want the backend's, stale", old, h, err)
	}

	want := k.e.ToBackend(data, k.p.Backend(), k.p.SNATPort())
	want.DstMAC = dt.MAC(dt.Client2IP)
	step(t, e, "client data after the route change", data.Frame(), e.Front, dt.XDPTX, want.Frame(), counted{NextHopRefreshes: 1})
	step(t, e, "client data again", data.Frame(), e.Front, dt.XDPTX, want.Frame(), counted{})
	p := k.now()
	if p.Fwd.Nexthop == old {
		t.Fatalf("the pair still names the stale slot %d", old)
	}
	wantNextHop(t, e, p.Fwd.Nexthop, e.Front, dt.Client2IP, dt.MAC(dt.Client2IP))
	if p.Rev.Nexthop != k.p.Rev.Nexthop {
		t.Fatalf("the reverse entry moved from slot %d to %d; only the backend's next hop was stale", k.p.Rev.Nexthop, p.Rev.Nexthop)
	}

	// A new pair right away: the memo of the first SYN named the stale slot.
	c := dt.Client(33001)
	e.MustRun(t, synFrom(e, c, 80).Frame(), e.Front, dt.XDPTX)
	wantNextHop(t, e, e.MustPair(t, c, 80).Fwd.Nexthop, e.Front, dt.Client2IP, dt.MAC(dt.Client2IP))

	// The walk: no entry names the stale slot any more.
	freed, err := e.DP.FreeNextHops(referencedSlots(t, e), e.Now(t).Low32()+1)
	if err != nil || freed != 1 {
		t.Fatalf("FreeNextHops freed %d slots (err %v), want the stale one", freed, err)
	}
	if h, err := e.DP.NextHop(old); err != nil || !h.Free() {
		t.Fatalf("stale slot %d after FreeNextHops: %v (err %v), want free", old, h, err)
	}
	step(t, e, "client data after the walk", data.Frame(), e.Front, dt.XDPTX, want.Frame(), counted{})
}

// Two-arm: the backend moves behind a router on the client side. The
// established pair's next packet leaves through the front interface, with
// that interface's MAC as the source (XDP_TX instead of a redirect to the
// back interface).
func TestNextHopStaleMovesInterface(t *testing.T) {
	backend := dt.TwoArmBackends[0]
	e := dt.NewEnv(t, dt.Options{TwoArm: true, Backends: []netip.Addr{backend}})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	err := e.Do(func() error {
		return netlink.RouteAdd(&netlink.Route{LinkIndex: e.Front.Index, Gw: dt.Client2IP.AsSlice(),
			Dst: &net.IPNet{IP: backend.AsSlice(), Mask: net.CIDRMask(32, 32)}})
	})
	if err != nil {
		t.Fatalf("route %s via %s: %v", backend, dt.Client2IP, err)
	}
	mustUpdate(t, "mark the backend's next hop stale", 1)(e.DP.MarkNextHopsStale(func(_ int, ip netip.Addr) bool { return ip == backend }))
	data := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload)
	want := k.e.ToBackend(data, k.p.Backend(), k.p.SNATPort())
	want.SrcMAC, want.DstMAC = e.Front.MAC, dt.MAC(dt.Client2IP)
	step(t, e, "client data after the route change", data.Frame(), e.Front, dt.XDPTX, want.Frame(), counted{NextHopRefreshes: 1})
	wantNextHop(t, e, k.now().Fwd.Nexthop, e.Front, dt.Client2IP, dt.MAC(dt.Client2IP))
}

// A failed neighbour (MarkNeighbourStale) makes only its own slots stale;
// a pair naming one looks its next hop up again and takes another slot of
// the same next hop while the FIB still gives it.
func TestNextHopStaleNeighbour(t *testing.T) {
	backend := dt.OneArmBackends[0]
	e := dt.NewEnv(t, dt.Options{Backends: []netip.Addr{backend}})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	mustUpdate(t, "mark the backend neighbour stale", 1)(e.DP.MarkNeighbourStale(e.BackendIface().Index, backend))
	mustUpdate(t, "mark it stale again", 0)(e.DP.MarkNeighbourStale(e.BackendIface().Index, backend))
	if h, err := e.DP.NextHop(k.p.Rev.Nexthop); err != nil || h.Stale {
		t.Fatalf("the client's slot %d: %v (err %v), want live", k.p.Rev.Nexthop, h, err)
	}
	data := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload)
	k.forward("client data on a stale slot", data, counted{NextHopRefreshes: 1})
	k.forward("client data again", data, counted{})
	p := k.now()
	if p.Fwd.Nexthop == k.p.Fwd.Nexthop {
		t.Fatalf("the pair still names the stale slot %d", p.Fwd.Nexthop)
	}
	wantNextHop(t, e, p.Fwd.Nexthop, e.BackendIface(), backend, dt.MAC(backend))
	reply := k.backend(dt.ACK, isnB+1, isnC+1+uint32(len(payload)), 2000, nil)
	k.forward("backend reply: its slot is live", reply, counted{})
}

// A stale slot whose pairs find no answer in the FIB (here an unreachable
// route to the backend) is still the best guess: packets keep leaving
// through it, and the first packet after the FIB answers again moves.
func TestNextHopStaleWithoutAnswer(t *testing.T) {
	backend := dt.OneArmBackends[0]
	e := dt.NewEnv(t, dt.Options{Backends: []netip.Addr{backend}})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	unreachable := &netlink.Route{Type: unix.RTN_UNREACHABLE, Dst: &net.IPNet{IP: backend.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	if err := e.Do(func() error { return netlink.RouteAdd(unreachable) }); err != nil {
		t.Fatalf("unreachable route to %s: %v", backend, err)
	}
	mustUpdate(t, "mark the backend neighbour stale", 1)(e.DP.MarkNeighbourStale(e.BackendIface().Index, backend))
	data := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload)
	k.forward("client data, no route: through the stale slot", data, counted{})
	if p := k.now(); p.Fwd.Nexthop != k.p.Fwd.Nexthop {
		t.Fatalf("the pair moved from slot %d to %d without a route", k.p.Fwd.Nexthop, p.Fwd.Nexthop)
	}
	if err := e.Do(func() error { return netlink.RouteDel(unreachable) }); err != nil {
		t.Fatal(err)
	}
	k.forward("client data, the route is back", data, counted{NextHopRefreshes: 1})
	wantNextHop(t, e, k.now().Fwd.Nexthop, e.BackendIface(), backend, dt.MAC(backend))
}

// Stale slots that idle pairs still name can fill every slot a next hop
// probes (a neighbour that failed and came back, again and again): a new
// pair then takes the first stale one back instead of finding no slot.
func TestNextHopStaleSlotTakenBack(t *testing.T) {
	backend := dt.OneArmBackends[0]
	e := dt.NewEnv(t, dt.Options{Backends: []netip.Addr{backend}, SNATPortHi: 40099})
	slots := dataplane.NextHopSlots(e.BackendIface().Index, backend)
	taken := map[uint32]bool{}
	for i := range dataplane.NextHopProbes {
		k := dial(t, e, uint16(33000+i), synOptions(-1))
		if taken[k.p.Fwd.Nexthop] {
			t.Fatalf("pair %d names slot %d, stale since an earlier pair", i, k.p.Fwd.Nexthop)
		}
		taken[k.p.Fwd.Nexthop] = true
		mustUpdate(t, "mark the backend neighbour stale", 1)(e.DP.MarkNeighbourStale(e.BackendIface().Index, backend))
	}
	for _, id := range slots {
		if h, err := e.DP.NextHop(id); err != nil || !h.Stale || h.IP != backend {
			t.Fatalf("slot %d after %d rounds: %v (err %v), want the backend's, stale", id, dataplane.NextHopProbes, h, err)
		}
	}
	k := dial(t, e, 34000, synOptions(-1))
	if k.p.Fwd.Nexthop != slots[0] {
		t.Fatalf("the new pair names slot %d, want the first stale one, %d", k.p.Fwd.Nexthop, slots[0])
	}
	wantNextHop(t, e, k.p.Fwd.Nexthop, e.BackendIface(), backend, dt.MAC(backend))
	if h, _ := e.DP.NextHop(k.p.Fwd.Nexthop); h.Stale {
		t.Fatalf("slot %d is still stale: %v", k.p.Fwd.Nexthop, h)
	}
}

// L2-sender slots are never marked stale: the FIB has no answer for them,
// so their pairs could not find a next hop again.
func TestNextHopStaleSkipsL2Sender(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	far := netip.AddrPortFrom(testnet.OuterClientIP, 33000) // no route to it in the fixture namespace
	k := connect(t, e, far, synOptions(-1), counted{PairsCreated: 1})
	mustUpdate(t, "mark every next hop stale", 1)(e.DP.MarkNextHopsStale(func(int, netip.Addr) bool { return true }))
	if h, err := e.DP.NextHop(k.p.Rev.Nexthop); err != nil || h.Stale || h.IP.IsValid() {
		t.Fatalf("the L2-sender slot %d: %v (err %v), want live", k.p.Rev.Nexthop, h, err)
	}
	sa := k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil)
	k.forward("SYN-ACK toward the L2 sender", sa, counted{})
}

// Issue 27 finding 7: the next-hop GC decided a slot was unused, then a
// SYN named it, then the GC zeroed it under the new pair (which later
// sent through whatever next hop claimed the slot next). The free is now
// re-checked in the kernel: a SYN between the decision and the free keeps
// the slot.
func TestNextHopFreeKeepsASlotASYNNamed(t *testing.T) {
	backend := dt.OneArmBackends[0]
	e := dt.NewEnv(t, dt.Options{Backends: []netip.Addr{backend}})
	first := dial(t, e, 33000, synOptions(-1))
	e.DeleteFlow(t, first.p.FwdKey)
	e.DeleteFlow(t, first.p.RevKey)
	t0 := e.Now(t)
	e.WaitTick(t, t0) // the second SYN stamps the slots later than the decision's bound

	var second *tcpConn
	e.DP.FixtureBeforeNextHopFree(func() { second = dial(t, e, 33001, synOptions(-1)) })
	defer e.DP.FixtureBeforeNextHopFree(nil)
	freed, err := e.DP.FreeNextHops(make([]uint64, dataplane.NextHopWords), t0.Low32()+1)
	if err != nil || freed != 0 {
		t.Fatalf("FreeNextHops freed %d slots (err %v), want none: the second SYN named both", freed, err)
	}
	if second == nil {
		t.Fatal("the hook did not run")
	}
	if second.p.Fwd.Nexthop != first.p.Fwd.Nexthop || second.p.Rev.Nexthop != first.p.Rev.Nexthop {
		t.Fatalf("the second pair names slots %d/%d, the first named %d/%d: want the same (the SYN's remembered FIB answer)",
			second.p.Fwd.Nexthop, second.p.Rev.Nexthop, first.p.Fwd.Nexthop, first.p.Rev.Nexthop)
	}
	wantNextHop(t, e, second.p.Fwd.Nexthop, e.BackendIface(), backend, dt.MAC(backend))
	wantNextHop(t, e, second.p.Rev.Nexthop, e.Front, dt.ClientIP, dt.MAC(dt.ClientIP))
	second.handshake(synAckOptions(-1), 1000)
	second.forward("client data", second.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload), counted{})
}

// referencedSlots is the bitset FreeNextHops takes: the slots the flow
// entries name now.
func referencedSlots(t *testing.T, e *dt.Env) []uint64 {
	t.Helper()
	bits := make([]uint64, dataplane.NextHopWords)
	for _, v := range e.Flows(t) {
		bits[v.Nexthop/64] |= 1 << (v.Nexthop % 64)
	}
	return bits
}
