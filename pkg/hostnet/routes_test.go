package hostnet

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
)

// route builds a unicast route of the main table to dst (a prefix; "" is
// the default route) on ifindex, through gateways gws (none: on link; more
// than one: a multipath route).
func route(dst string, ifindex int, gws ...string) netlink.Route {
	r := netlink.Route{Table: unix.RT_TABLE_MAIN, Type: unix.RTN_UNICAST, LinkIndex: ifindex}
	if dst != "" {
		p := netip.MustParsePrefix(dst)
		r.Dst = &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
	}
	switch len(gws) {
	case 0:
	case 1:
		r.Gw = net.ParseIP(gws[0])
	default:
		r.LinkIndex = 0
		for _, g := range gws {
			r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{LinkIndex: ifindex, Gw: net.ParseIP(g)})
		}
	}
	return r
}

// movedHops names the next hops whose destinations a route change moved:
// gone or replaced gateways, the hops that a new, more specific route
// takes destinations from, and nothing else.
func TestMovedHops(t *testing.T) {
	const eth = 4
	connected := route("192.0.2.0/24", eth)
	unreachable := route("203.0.113.0/24", eth, "192.0.2.1")
	unreachable.Type, unreachable.LinkIndex, unreachable.Gw = unix.RTN_UNREACHABLE, 0, nil
	type hop struct {
		ip    string
		stale bool
	}
	for _, c := range []struct {
		name        string
		before, now []netlink.Route
		hops        []hop
	}{
		{"nothing changed", []netlink.Route{connected, route("", eth, "192.0.2.1")}, []netlink.Route{connected, route("", eth, "192.0.2.1")},
			[]hop{{"192.0.2.1", false}, {"192.0.2.9", false}}},
		{"a multipath leg goes", []netlink.Route{connected, route("", eth, "192.0.2.1", "192.0.2.2")}, []netlink.Route{connected, route("", eth, "192.0.2.2")},
			[]hop{{"192.0.2.1", true}, {"192.0.2.2", false}, {"192.0.2.9", false}}},
		{"the gateway is replaced", []netlink.Route{connected, route("", eth, "192.0.2.1")}, []netlink.Route{connected, route("", eth, "192.0.2.2")},
			[]hop{{"192.0.2.1", true}, {"192.0.2.2", false}}},
		{"a multipath leg is added", []netlink.Route{connected, route("", eth, "192.0.2.1")}, []netlink.Route{connected, route("", eth, "192.0.2.1", "192.0.2.2")},
			[]hop{{"192.0.2.1", false}, {"192.0.2.2", false}}},
		{"a more specific route", []netlink.Route{connected, route("", eth, "192.0.2.1")},
			[]netlink.Route{connected, route("", eth, "192.0.2.1"), route("203.0.113.0/24", eth, "192.0.2.2")},
			[]hop{{"192.0.2.1", true}, {"192.0.2.2", false}, {"192.0.2.9", false}}},
		{"a host route takes a destination off link", []netlink.Route{connected, route("", eth, "192.0.2.1")},
			[]netlink.Route{connected, route("", eth, "192.0.2.1"), route("192.0.2.9/32", eth, "192.0.2.2")},
			[]hop{{"192.0.2.9", true}, {"192.0.2.8", false}, {"192.0.2.1", true}, {"192.0.2.2", false}}},
		{"a route goes", []netlink.Route{connected, route("", eth, "192.0.2.1"), route("203.0.113.0/24", eth, "192.0.2.2")},
			[]netlink.Route{connected, route("", eth, "192.0.2.1")},
			[]hop{{"192.0.2.1", false}, {"192.0.2.2", true}}},
		{"a route becomes unreachable", []netlink.Route{connected, route("203.0.113.0/24", eth, "192.0.2.1")}, []netlink.Route{connected, unreachable},
			[]hop{{"192.0.2.1", true}, {"192.0.2.9", false}}},
		{"the first of two appended routes goes",
			[]netlink.Route{connected, route("203.0.113.0/24", eth, "192.0.2.1"), route("203.0.113.0/24", eth, "192.0.2.2")},
			[]netlink.Route{connected, route("203.0.113.0/24", eth, "192.0.2.2")},
			[]hop{{"192.0.2.1", true}, {"192.0.2.2", false}}},
		{"the connected route goes", []netlink.Route{connected, route("", eth, "192.0.2.1")}, []netlink.Route{route("", eth, "192.0.2.1")},
			[]hop{{"192.0.2.9", true}, {"198.51.100.9", false}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			moved := movedHops(newRouteTable(c.before), newRouteTable(c.now))
			for _, h := range c.hops {
				if got := moved.match(eth, netip.MustParseAddr(h.ip)); got != h.stale {
					t.Errorf("next hop %s: stale %v, want %v (moved: %s)", h.ip, got, h.stale, moved)
				}
				if moved.match(eth+1, netip.MustParseAddr(h.ip)) {
					t.Errorf("next hop %s on another interface is stale (moved: %s)", h.ip, moved)
				}
			}
		})
	}
}

// The watcher marks stale the gateway a route moved away from (once the
// route events settled) and the slots of a neighbour that turned FAILED.
func TestWatchNextHopsRoutesAndFailedNeighbours(t *testing.T) {
	n := newNextHopNet(t)
	dst := &net.IPNet{IP: net.IP{203, 0, 113, 0}, Mask: net.CIDRMask(24, 32)}
	if err := n.h.RouteAdd(&netlink.Route{LinkIndex: n.watched, Dst: dst, Gw: net.IP{192, 0, 2, 2}}); err != nil {
		t.Fatal(err)
	}
	rec := &recordingWriter{}
	n.watch(t, rec, NextHopResync)
	waitCalls(t, rec, nextHopCall{ifindex: n.watched, mac: n.mac.String()}, 1) // the first read is done

	old, moved := netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	if err := n.h.RouteReplace(&netlink.Route{LinkIndex: n.watched, Dst: dst, Gw: net.IP{192, 0, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); !rec.staleMatches(n.watched, old); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the old gateway %s was not marked stale within 20 s of the route change", old)
		}
	}
	if rec.staleMatches(n.watched, moved) {
		t.Errorf("the new gateway %s was marked stale", moved)
	}

	// A neighbour nobody answers for: ARP gives up (FAILED) after a few
	// short retries.
	if err := testnet.In(n.ns, func() error {
		for k, v := range map[string]string{"net.ipv4.neigh.w0.retrans_time_ms": "100", "net.ipv4.neigh.w0.mcast_solicit": "2"} {
			if err := testnet.Sysctl(k, v); err != nil {
				return err
			}
		}
		c, err := net.DialTimeout("tcp", "192.0.2.99:9", time.Second)
		if err == nil {
			c.Close()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, rec, nextHopCall{n.watched, netip.MustParseAddr("192.0.2.99"), "stale"}, 1)
}

// A burst of route changes makes one pass over the next hops: the events
// arm the settle timer once, and when it fires the routes are read once,
// with every change of the burst in them.
func TestWatchNextHopsCoalescesRouteEvents(t *testing.T) {
	n := newNextHopNet(t)
	const routes = 20
	via := func(gw byte) error {
		for i := range routes {
			r := &netlink.Route{LinkIndex: n.watched, Gw: net.IP{192, 0, 2, gw},
				Dst: &net.IPNet{IP: net.IP{203, 0, 113, byte(i + 1)}, Mask: net.CIDRMask(32, 32)}}
			if err := n.h.RouteReplace(r); err != nil {
				return err
			}
		}
		return nil
	}
	if err := via(2); err != nil {
		t.Fatal(err)
	}
	armed, fire := make(chan struct{}, 1), make(chan time.Time, 1)
	var calls int // the watcher's goroutine only
	after := func(d time.Duration) <-chan time.Time {
		if d != routeSettle {
			t.Errorf("a timer of %v, want routeSettle", d)
		}
		if calls++; calls > 1 {
			return nil // never fires: the burst is already read
		}
		armed <- struct{}{}
		return fire
	}
	rec := &recordingWriter{}
	n.watchWith(t, rec, time.Hour, after, nil)
	waitCalls(t, rec, nextHopCall{ifindex: n.watched, mac: n.mac.String()}, 1) // the first read is done

	if err := via(3); err != nil {
		t.Fatal(err)
	}
	select {
	case <-armed:
	case <-time.After(20 * time.Second):
		t.Fatal("no route event armed the settle timer within 20 s")
	}
	fire <- time.Now()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rec.mu.Lock()
		got := len(rec.stale)
		rec.mu.Unlock()
		if got > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no next hops marked stale within 20 s of the timer")
		}
	}
	rec.mu.Lock()
	got := len(rec.stale)
	rec.mu.Unlock()
	if got != 1 {
		t.Fatalf("%d passes over the next hops for a burst of %d route changes, want 1", got, routes)
	}
	if !rec.staleMatches(n.watched, netip.MustParseAddr("192.0.2.2")) || rec.staleMatches(n.watched, netip.MustParseAddr("192.0.2.3")) {
		t.Fatal("the pass marks another next hop than the gateway the routes left")
	}
}

// The gateways of the routes on the watched interface are kept resolved,
// each once: those read at the start and a new one a route change brings.
// A gateway on another interface is not.
func TestWatchNextHopsKeepsGateways(t *testing.T) {
	n := newNextHopNet(t)
	route := func(ifindex int, dst, gw string) *netlink.Route {
		p := netip.MustParsePrefix(dst)
		return &netlink.Route{LinkIndex: ifindex, Gw: net.ParseIP(gw), Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}
	}
	for _, r := range []*netlink.Route{route(n.watched, "203.0.113.0/25", "192.0.2.2"), route(n.unwatched, "203.0.113.128/25", "198.51.100.2")} {
		if err := n.h.RouteAdd(r); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	kept := map[neighKey]int{}
	keep := func(ifindex int, ip netip.Addr) error {
		mu.Lock()
		defer mu.Unlock()
		kept[neighKey{ifindex, ip}]++
		return nil
	}
	count := func(ifindex int, ip string) int {
		mu.Lock()
		defer mu.Unlock()
		return kept[neighKey{ifindex, netip.MustParseAddr(ip)}]
	}
	rec := &recordingWriter{}
	n.watchWith(t, rec, 100*time.Millisecond, time.After, keep) // resyncs read the routes again and again
	waitCalls(t, rec, nextHopCall{ifindex: n.watched, mac: n.mac.String()}, 3)
	if err := n.h.RouteReplace(route(n.watched, "203.0.113.0/25", "192.0.2.3")); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); count(n.watched, "192.0.2.3") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the new gateway 192.0.2.3 was not kept resolved within 20 s of the route change")
		}
	}
	waitCalls(t, rec, nextHopCall{ifindex: n.watched, mac: n.mac.String()}, 6)
	if c := count(n.watched, "192.0.2.2"); c != 1 {
		t.Errorf("192.0.2.2 kept %d times, want once", c)
	}
	if c := count(n.watched, "192.0.2.3"); c != 1 {
		t.Errorf("192.0.2.3 kept %d times, want once", c)
	}
	if c := count(n.unwatched, "198.51.100.2"); c != 0 {
		t.Errorf("the gateway on the unwatched interface kept %d times", c)
	}
}
