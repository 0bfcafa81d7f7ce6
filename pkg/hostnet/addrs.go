// Package hostnet is XLB's view of the host's network: the addresses
// `auto` resolves to (addrs.go), the sysctls XLB changes, the journal
// that restores them even after a crash and the guard that puts them back
// when something resets them while XLB runs (sysctl.go, ports.go,
// journal.go, sysctlguard.go), the one-instance-per-namespace lock
// (lock.go), and backend routes and kernel-managed neighbours
// (resolver.go). Everything acts on the calling thread's network
// namespace, or on the namespace of a netlink handle.
package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// PrimaryIPv4 returns the first global-scope IPv4 address of a link (what
// `ip -4 addr show dev LINK` lists first), skipping secondary addresses.
func PrimaryIPv4(link netlink.Link) (netip.Addr, error) {
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, a := range addrs {
		if a.Flags&unix.IFA_F_SECONDARY != 0 || a.Scope != unix.RT_SCOPE_UNIVERSE {
			continue
		}
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %s has no global IPv4 address", link.Attrs().Name)
}

// DefaultRouteIPv4 resolves `listen: auto` (DESIGN §1): the primary IPv4
// address of the interface that carries the IPv4 default route.
func DefaultRouteIPv4() (netip.Addr, string, error) {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		link, err := netlink.LinkByIndex(r.LinkIndex)
		if err != nil {
			return netip.Addr{}, "", fmt.Errorf("default route interface %d: %w", r.LinkIndex, err)
		}
		ip, err := PrimaryIPv4(link)
		if err != nil {
			return netip.Addr{}, "", err
		}
		return ip, link.Attrs().Name, nil
	}
	return netip.Addr{}, "", errors.New("listen: auto needs an IPv4 default route, and there is none")
}

// InterfaceOf returns the name of the interface that holds ip.
func InterfaceOf(ip netip.Addr) (string, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return "", fmt.Errorf("list interfaces: %w", err)
	}
	for _, l := range links {
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if got, ok := netip.AddrFromSlice(a.IP.To4()); ok && got == ip {
				return l.Attrs().Name, nil
			}
		}
	}
	return "", fmt.Errorf("no interface holds %s", ip)
}

// IsLocal reports whether ip is assigned to an interface of this host.
func IsLocal(ip netip.Addr) bool {
	_, err := InterfaceOf(ip)
	return err == nil
}

// SourceFor returns the source address the kernel would use toward dst
// (`ip route get DST`), which is how `snat.ip: auto` is resolved: this host's
// own address on the interface that routes to the backends.
func SourceFor(dst netip.Addr) (netip.Addr, string, error) {
	routes, err := netlink.RouteGet(net.IP(dst.AsSlice()))
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("route to %s: %w", dst, err)
	}
	if len(routes) == 0 {
		return netip.Addr{}, "", fmt.Errorf("no route to %s", dst)
	}
	r := routes[0]
	link, err := netlink.LinkByIndex(r.LinkIndex)
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("route to %s: interface %d: %w", dst, r.LinkIndex, err)
	}
	if src, ok := netip.AddrFromSlice(r.Src.To4()); ok && src.IsValid() && !src.IsUnspecified() {
		return src, link.Attrs().Name, nil
	}
	ip, err := PrimaryIPv4(link)
	return ip, link.Attrs().Name, err
}
