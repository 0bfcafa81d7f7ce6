package fleet

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
)

// routeWait bounds the waits for the router's route to reach a state.
const routeWait = 60 * time.Second

// waitPaths waits until the router's kernel route to the VIP and bird's
// routes both go via exactly the hosts want, and returns when that was
// first seen.
func (f *fleet) waitPaths(t *testing.T, what string, want ...*Host) time.Time {
	t.Helper()
	addrs := hostAddrs(want...)
	var kernel, bird []netip.Addr
	var out string
	var err error
	for deadline := time.Now().Add(routeWait); ; time.Sleep(20 * time.Millisecond) {
		kernel, err = f.l.KernelPaths()
		slices.SortFunc(kernel, netip.Addr.Compare)
		if err == nil && slices.Equal(kernel, addrs) {
			if bird, out = f.l.BirdPaths(); slices.Equal(bird, addrs) {
				return time.Now()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the router's route to %s goes via %v (kernel, %v) and %v (bird) after %v; want %v\n%s",
				what, VIP, kernel, err, bird, routeWait, addrs, out)
		}
	}
}

// waitAnnouncing waits until host h's status shows its session with the
// router established and the VIP announced.
func waitAnnouncing(t *testing.T, h *Host) {
	t.Helper()
	want := []string{vipPrefix.String()}
	var last string
	for deadline := time.Now().Add(routeWait); ; time.Sleep(200 * time.Millisecond) {
		d, err := h.Status()
		switch {
		case err != nil:
			last = err.Error()
		case d.BGP == nil:
			last = "no bgp in the status"
		case len(d.BGP.Peers) == 1 && d.BGP.Peers[0].State == "established" && slices.Equal(d.BGP.Announced, want):
			return
		default:
			last = fmt.Sprintf("peers %+v, announced %v", d.BGP.Peers, d.BGP.Announced)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not announcing %v to the router after %v: %s", h.Inventory, want, routeWait, last)
		}
	}
}

// announce: every host's speaker has its session with the router up and
// announces the VIP (status bgp), with a router id of its own (the
// default, auto: its address toward the router, issue 28; RFC 6286 wants
// them unique in the AS); bird holds one route per host and the
// kernel one multipath route with the three hosts as next hops; the
// metrics port answers on each host's own address, not on the VIP; then,
// with the client running, new connections land on every host.
func (f *fleet) announce(t *testing.T) {
	start := time.Now()
	for _, h := range f.l.Hosts {
		waitAnnouncing(t, h)
	}
	f.waitPaths(t, "all hosts announce", f.l.Hosts...)
	ids := map[string]string{}
	for _, h := range f.l.Hosts {
		s := f.l.Bird.Session(h.Inventory)
		if s.State != birdtest.Established || s.HoldSecs != HoldSecs {
			t.Errorf("bird's session with %s: %s, hold time %d s; want established, %d s:\n%s", h.Inventory, s.State, s.HoldSecs, HoldSecs, s.Out)
		}
		if s.NeighborID != h.Addr.String() {
			t.Errorf("bird's session with %s: router id %q, want the host's own address %s (auto):\n%s", h.Inventory, s.NeighborID, h.Addr, s.Out)
		}
		if other, dup := ids[s.NeighborID]; dup {
			t.Errorf("%s and %s share the router id %s", other, h.Inventory, s.NeighborID)
		}
		ids[s.NeighborID] = h.Inventory
	}
	kernel, _ := f.l.KernelPaths()
	_, out := f.l.BirdPaths()
	t.Logf("router: kernel route %s via %v (3 paths); bird (birdc show route %s all):\n%s", VIP, kernel, vipPrefix, out)
	f.serviceAddressClosed(t)

	f.startTraffic(t)
	st0 := f.work.Stats()
	time.Sleep(5 * time.Second)
	st1 := f.work.Stats()
	for _, h := range f.l.Hosts {
		if n := st1.NewByHost[h.Addr] - st0.NewByHost[h.Addr]; n == 0 {
			t.Errorf("%s: no new connection in 5 s (all: %d)", h.Inventory, st1.NewOK-st0.NewOK)
		}
	}
	delta := map[netip.Addr]int{}
	for a, n := range st1.NewByHost {
		delta[a] = n - st0.NewByHost[a]
	}
	t.Logf("new connections in 5 s per host: %s; long-lived per host: %s", hostCounts(f.l, delta), hostCounts(f.l, st1.LongOpen))
	f.phase("every host announces; traffic spreads", start)
}
