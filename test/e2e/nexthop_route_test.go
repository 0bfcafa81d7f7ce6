package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// Route changes under established pairs (issue 27 finding 1): XLB reaches
// a client through a gateway, the route changes and that gateway goes
// down. The daemon's next-hop watcher sees the route change, marks the
// gateway's next hop stale, and the pair's next packet looks its next hop
// up again: a download in progress completes byte for byte, without a
// reset, and xlb_nexthop_refreshes_total counts the refresh. Before, a
// pair kept the slot of its first gateway until TCP gave up.
//
// The lab is two-arm with three clients: client1 holds the far client's
// address 203.0.113.100/32 besides its own, client2 and client3 are the
// two gateways (routers on the front LAN that forward 203.0.113.100 to
// client1). The client's own packets reach XLB on link.
//   - moved: XLB routes 203.0.113.100 via client2, then via client3, which
//     XLB's kernel has not resolved before (the daemon makes the gateways
//     of the routes managed neighbours, so it is resolved at once).
//   - ecmp: XLB routes it through both (a multipath route); the gateway
//     the download takes dies and the route keeps only the other one, as
//     a routing daemon does.
//   - ecmp-dies: the gateway dies and nothing changes the route: the
//     kernel's probes of the managed neighbour fail (short neighbour
//     timers here), the daemon sees it FAILED, and with
//     fib_multipath_use_neigh the FIB gives the other gateway.
func TestNextHopFollowsRouteChange(t *testing.T) {
	t.Run("moved", func(t *testing.T) { testNextHopRouteChange(t, false, true) })
	t.Run("ecmp", func(t *testing.T) { testNextHopRouteChange(t, true, true) })
	t.Run("ecmp-dies", func(t *testing.T) { testNextHopRouteChange(t, true, false) })
}

// testNextHopRouteChange runs the download through one gateway (ecmp:
// through a multipath route over both), takes the gateway it uses down
// and, when reroute, replaces the route with one via the other gateway.
func testNextHopRouteChange(t *testing.T, ecmp, reroute bool) {
	const (
		size   = 48 << 20 // the download
		before = 8 << 20  // read before the route changes
	)
	far := netip.MustParseAddr("203.0.113.100")
	l := lab.New(t, lab.Options{Topology: lab.TwoArm, Clients: 3, Backends: 1, EchoPort: -1, SinkPort: -1})
	if _, err := l.Backends[0].Serve(":8080", func(c *testnet.Conn) error { return writePattern(c, size) }); err != nil {
		t.Fatal(err)
	}
	client, gws := l.Clients[0], []*lab.Host{l.Clients[1], l.Clients[2]}
	if err := client.AddAddress("eth0", netip.PrefixFrom(far, 32)); err != nil {
		t.Fatal(err)
	}
	for _, gw := range gws {
		if err := gw.Do(func() error {
			for _, k := range []string{"net.ipv4.ip_forward", "net.ipv4.conf.all.send_redirects", "net.ipv4.conf.eth0.send_redirects"} {
				v := "0"
				if k == "net.ipv4.ip_forward" {
					v = "1"
				}
				if err := testnet.Sysctl(k, v); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := gw.Netlink().RouteAdd(hostRoute(far, gw.Ifindex(), client.IP())); err != nil {
			t.Fatalf("route %s via %s in %s: %v", far, client.IP(), gw.NS, err)
		}
	}
	route := hostRoute(far, l.XLB.Ifindex(), gws[0].IP())
	if ecmp {
		route = hostRoute(far, l.XLB.Ifindex(), gws[0].IP(), gws[1].IP())
	}
	if err := l.XLB.Netlink().RouteAdd(route); err != nil {
		t.Fatal(err)
	}
	// ecmp-dies: a multipath route that skips a failed neighbour, and short
	// neighbour timers on XLB's eth0, set before the gateways are resolved
	// (an entry keeps the reachable time it was confirmed with).
	if !reroute {
		if err := l.XLB.Do(func() error {
			for k, v := range map[string]string{
				"net.ipv4.fib_multipath_use_neigh":           "1",
				"net.ipv4.neigh.eth0.base_reachable_time_ms": "1000",
				"net.ipv4.neigh.eth0.delay_first_probe_time": "1",
				"net.ipv4.neigh.eth0.retrans_time_ms":        "200",
				"net.ipv4.neigh.eth0.ucast_solicit":          "2",
			} {
				if err := testnet.Sysctl(k, v); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The first SYN's FIB lookup needs the gateway resolved (else the pair
	// answers the SYN's L2 sender, client1 itself). The second gateway of
	// "moved" is left to the daemon.
	resolveFrom(t, l.XLB, gws[0].IP())
	if ecmp {
		resolveFrom(t, l.XLB, gws[1].IP())
	}
	p := startXLB(t, l, labConfig(l, ""))

	var c net.Conn
	if err := client.Do(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: far.AsSlice()}}
		var err error
		c, err = d.DialContext(ctx, "tcp", listenAddr)
		return err
	}); err != nil {
		t.Fatalf("dial %s from %s: %v", listenAddr, far, err)
	}
	defer c.Close()
	got, err := readPattern(c, 0, before)
	if err != nil {
		t.Fatalf("the download before the route change: %v after %d bytes", err, got)
	}
	refreshes := counter(t, l, "xlb_nexthop_refreshes_total", nil)

	// The gateway the download takes: the one that forwarded it.
	dead, other := gws[0], gws[1]
	if rx := func(h *lab.Host) uint64 {
		link, err := h.Netlink().LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		return link.Attrs().Statistics.RxBytes
	}; rx(other) > rx(dead) {
		dead, other = other, dead
	}
	t.Logf("the download goes through %s (%s); it goes down (reroute %v: the route keeps %s)", dead.NS, dead.IP(), reroute, other.IP())
	if reroute {
		if err := l.XLB.Netlink().RouteReplace(hostRoute(far, l.XLB.Ifindex(), other.IP())); err != nil {
			t.Fatal(err)
		}
	}
	link, err := dead.Netlink().LinkByName("eth0")
	if err == nil {
		err = dead.Netlink().LinkSetDown(link)
	}
	if err != nil {
		t.Fatalf("%s eth0 down: %v", dead.NS, err)
	}
	changed := time.Now()
	n, err := readPattern(c, before, size-before)
	if err != nil {
		t.Fatalf("the download after the route change: %v after %d of %d bytes", err, before+n, size)
	}
	t.Logf("%d bytes, %d after the route change, in %v", size, size-before, time.Since(changed).Round(time.Millisecond))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if k, err := c.Read(make([]byte, 1)); k != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after %d bytes: read %d bytes, %v; want the backend's FIN", size, k, err)
	}
	if v, ok := waitCounter(t, l, "xlb_nexthop_refreshes_total", nil, 30*time.Second, func(v float64) bool { return v > refreshes }); !ok {
		t.Fatalf("xlb_nexthop_refreshes_total %v, was %v before the route change: want it counted", v, refreshes)
	}
	if s := l.Backends[0].Stats(); s.Resets != 0 {
		t.Fatalf("the backend saw %d resets", s.Resets)
	}
	stopXLB(t, l, p)
}

// hostRoute is the route to ip/32 out of ifindex via gws (more than one:
// a multipath route).
func hostRoute(ip netip.Addr, ifindex int, gws ...netip.Addr) *netlink.Route {
	r := &netlink.Route{Dst: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	if len(gws) == 1 {
		r.LinkIndex, r.Gw = ifindex, gws[0].AsSlice()
		return r
	}
	for _, gw := range gws {
		r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{LinkIndex: ifindex, Gw: gw.AsSlice()})
	}
	return r
}

// resolveFrom makes h's kernel resolve each of ips on its link (a
// connection attempt to the discard port: ARP, then a refusal).
func resolveFrom(t *testing.T, h *lab.Host, ips ...netip.Addr) {
	t.Helper()
	for _, ip := range ips {
		if err := h.Do(func() error {
			c, err := net.DialTimeout("tcp", netip.AddrPortFrom(ip, 9).String(), 5*time.Second)
			if err == nil {
				c.Close()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// patternByte is byte i of a download: no short period, so a segment
// delivered twice or at the wrong offset shows.
func patternByte(i int64) byte { return byte((uint64(i) * 2654435761) >> 13) }

// writePattern writes the first n bytes of the pattern.
func writePattern(w io.Writer, n int64) error {
	buf := make([]byte, 64<<10)
	for off := int64(0); off < n; {
		k := min(int64(len(buf)), n-off)
		for i := range k {
			buf[i] = patternByte(off + i)
		}
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		off += k
	}
	return nil
}

// readPattern reads n bytes of the pattern from offset from and checks
// each; every read must make progress within 30 s (a blackholed path
// does not). It returns how many bytes matched.
func readPattern(c net.Conn, from, n int64) (int64, error) {
	buf := make([]byte, 64<<10)
	var got int64
	for got < n {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		k, err := c.Read(buf[:min(int64(len(buf)), n-got)])
		for i := range int64(k) {
			if want := patternByte(from + got + i); buf[i] != want {
				return got + i, fmt.Errorf("byte %d is %#x, want %#x", from+got+i, buf[i], want)
			}
		}
		got += int64(k)
		if err != nil {
			return got, err
		}
	}
	return got, nil
}
