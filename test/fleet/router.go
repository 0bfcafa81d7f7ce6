package fleet

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
)

// The BGP side of the lab: the router runs bird (AS RouterASN) and every
// XLB host's embedded speaker peers with it from AS XLBASN.
const (
	RouterASN = 64513
	XLBASN    = 64512
	// HoldSecs is the hold time both sides propose (keepalives every
	// second): a host whose session goes silent leaves the route within
	// HoldSecs.
	HoldSecs = 3
	// GracefulRestartSecs is the restart time the XLB hosts advertise:
	// how long the router keeps a host's route as stale after its session
	// closed (a crash: SIGKILL closes the socket; a hot upgrade's planned
	// stop). It covers a crash-restart with margin — systemd restarts xlb
	// after RestartSec=2s, the start takes a few seconds, the speaker
	// reconnects within its 5 s connect retry — while the XDP program,
	// left attached, keeps forwarding; and it bounds how long a daemon
	// that never comes back keeps its path.
	GracefulRestartSecs = 30
	// RouterErrorWaitSecs is bird's error wait time: how long a session
	// that failed (an expired hold timer) stays down before bird accepts
	// the host again (bird's default is 60 s and more).
	RouterErrorWaitSecs = 2
)

// buildRouter makes the router forward with an L4 multipath hash
// (net.ipv4.fib_multipath_hash_policy=1) and skip next hops whose
// neighbour entry failed (fib_multipath_use_neigh=1), and starts bird in
// it: passive sessions with every XLB host, the VIP they announce
// installed as one multipath route (birdtest.Config.Kernel).
func (l *Lab) buildRouter() error {
	err := l.Router.Do(func() error {
		for _, s := range [][2]string{
			{"net.ipv4.ip_forward", "1"},
			{"net.ipv4.fib_multipath_hash_policy", "1"},
			{"net.ipv4.fib_multipath_use_neigh", "1"},
		} {
			if err := testnet.Sysctl(s[0], s[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c := birdtest.Config{Address: RouterBack, ASN: RouterASN, HoldSecs: HoldSecs, Kernel: true, ErrorWaitSecs: RouterErrorWaitSecs}
	for _, h := range l.Hosts {
		c.Peers = append(c.Peers, birdtest.Peer{Name: h.Inventory, Address: h.Addr, ASN: XLBASN})
	}
	b, err := birdtest.StartProcess(l.Router, c)
	if err != nil {
		return err
	}
	l.Bird = b
	l.net.OnClose(b.Close)
	return nil
}

// vipPrefix is the route the hosts announce.
var vipPrefix = netip.PrefixFrom(VIP, 32)

// KernelPaths returns the next hops of the router's kernel route to the
// VIP in the kernel's order (the order of the hash-threshold ranges),
// none when there is no route.
func (l *Lab) KernelPaths() ([]netip.Addr, error) {
	filter := &netlink.Route{
		Dst:   &net.IPNet{IP: VIP.AsSlice(), Mask: net.CIDRMask(32, 32)},
		Table: 254,
	}
	rs, err := l.Router.Netlink().RouteListFiltered(netlink.FAMILY_V4, filter, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("router: route %s: %w", vipPrefix, err)
	}
	var out []netip.Addr
	for _, r := range rs {
		if len(r.MultiPath) == 0 && r.Gw != nil {
			a, _ := netip.AddrFromSlice(r.Gw.To4())
			out = append(out, a)
		}
		for _, nh := range r.MultiPath {
			a, _ := netip.AddrFromSlice(nh.Gw.To4())
			out = append(out, a)
		}
	}
	return out, nil
}

// BirdPaths returns the next hops of bird's routes to the VIP, sorted
// (one per host announcing it; none without a route), and birdc's answer.
func (l *Lab) BirdPaths() ([]netip.Addr, string) {
	r := l.Bird.Route(vipPrefix)
	var out []netip.Addr
	for _, s := range r.NextHops {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, r.Out
}

// hostAddrs returns the addresses of hosts, sorted.
func hostAddrs(hosts ...*Host) []netip.Addr {
	var out []netip.Addr
	for _, h := range hosts {
		out = append(out, h.Addr)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
