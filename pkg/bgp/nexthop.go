package bgp

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/hostnet"
)

// HostAddress returns this host's own IPv4 address toward peer, the
// default of Options.NextHop: the kernel's source address for the route
// to peer (`ip route get PEER`, hostnet.SourceFor), unless that address
// lies in one of announced, as when the shared VIP is the first address
// of the interface toward the router. Then it is another global IPv4
// address of that interface outside announced, one whose subnet holds
// peer first. It fails when there is no route to peer or the interface
// has no such address: a session from the VIP would be answered through
// the VIP's own route, to any host of the fleet. It acts in the calling
// thread's network namespace.
func HostAddress(peer netip.Addr, announced []netip.Prefix) (netip.Addr, error) {
	src, ifname, err := hostnet.SourceFor(peer)
	if err != nil {
		return netip.Addr{}, err
	}
	inAnnounced := func(a netip.Addr) bool {
		return slices.ContainsFunc(announced, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	if !inAnnounced(src) {
		return src, nil
	}
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("interface %s toward %s: %w", ifname, peer, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %s: %w", ifname, err)
	}
	var other netip.Addr
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		if !ok || a.Scope != unix.RT_SCOPE_UNIVERSE || inAnnounced(ip) {
			continue
		}
		if onLink(a.IPNet, peer) {
			return ip, nil
		}
		if !other.IsValid() {
			other = ip
		}
	}
	if other.IsValid() {
		return other, nil
	}
	return netip.Addr{}, fmt.Errorf("the source address toward %s is %s, which is announced, and %s has no IPv4 address of its own outside the announced prefixes", peer, src, ifname)
}

// onLink says whether n (an interface address with its mask) holds a.
func onLink(n *net.IPNet, a netip.Addr) bool {
	return n != nil && n.Contains(a.AsSlice())
}
