package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var errNoEntry = unix.ENOENT

// Route is how a backend is reached: the egress interface and the next hop
// (the backend itself on a connected subnet, else the gateway).
type Route struct {
	Ifindex   int
	Interface string
	NextHop   netip.Addr
}

// ErrNeighbourPending means the route is fine but the next hop's link-layer
// address is not resolved yet; the kernel is resolving it.
var ErrNeighbourPending = errors.New("neighbour not resolved yet")

// Resolver looks up a backend's route and keeps its next hop's neighbour
// entry resolved as a kernel-managed neighbour (NTF_EXT_MANAGED: the kernel
// re-resolves it on its own), so the data path's bpf_fib_lookup finds the
// neighbour when the first SYN arrives (DESIGN §5 "Next hop").
type Resolver struct {
	h        *netlink.Handle
	src      netip.Addr     // SNAT address: the source of backend-facing packets
	attached map[int]string // ifindex -> name of interfaces XLB is attached to

	// OnManaged, when set, is told about every entry the resolver is about
	// to make managed, before it does (pkg/instance journals them so that a
	// successor removes them after a crash).
	OnManaged func(ifname string, ip netip.Addr) error

	mu      sync.Mutex
	managed map[neighKey]bool // entries this resolver made managed

	manageMu sync.Mutex // one manage at a time: OnManaged's journal is not safe for concurrent use
}

type neighKey struct {
	ifindex int
	ip      netip.Addr
}

// NewResolver resolves in the namespace of h (nil: the caller's). Only
// routes leaving through one of the attached interfaces are usable: the
// data path can only transmit there.
func NewResolver(h *netlink.Handle, src netip.Addr, attached map[int]string) *Resolver {
	if h == nil {
		h = &netlink.Handle{}
	}
	return &Resolver{h: h, src: src, attached: attached, managed: map[neighKey]bool{}}
}

// Resolve returns the backend's route when its neighbour is valid. Errors:
// no route, a route through an interface XLB is not attached to, a
// non-unicast route, or ErrNeighbourPending (retry shortly).
func (r *Resolver) Resolve(ip netip.Addr) (Route, error) {
	routes, err := r.h.RouteGetWithOptions(net.IP(ip.AsSlice()), &netlink.RouteGetOptions{SrcAddr: net.IP(r.src.AsSlice())})
	if err != nil {
		return Route{}, fmt.Errorf("no route: %w", err)
	}
	if len(routes) == 0 {
		return Route{}, errors.New("no route")
	}
	rt := routes[0]
	if rt.Type != 0 && rt.Type != 1 { // RTN_UNSPEC, RTN_UNICAST
		return Route{}, fmt.Errorf("route type %d is not unicast", rt.Type)
	}
	name, ok := r.attached[rt.LinkIndex]
	if !ok {
		link, _ := r.h.LinkByIndex(rt.LinkIndex)
		n := fmt.Sprint(rt.LinkIndex)
		if link != nil {
			n = link.Attrs().Name
		}
		return Route{}, fmt.Errorf("routed via %s, which XLB is not attached to", n)
	}
	hop := ip
	if gw, ok := netip.AddrFromSlice(rt.Gw.To4()); ok && gw.IsValid() && !gw.IsUnspecified() {
		hop = gw
	}
	route := Route{Ifindex: rt.LinkIndex, Interface: name, NextHop: hop}
	valid, err := r.neighbourValid(route)
	if err != nil {
		return route, err
	}
	if !valid {
		return route, ErrNeighbourPending
	}
	return route, nil
}

// neighbourValid reports whether the next hop's entry is usable by the
// FIB lookup (any NUD_VALID state), making it kernel-managed if needed. A
// failed resolution is an error naming the next hop; an entry in progress
// is ErrNeighbourPending.
func (r *Resolver) neighbourValid(rt Route) (bool, error) {
	neighs, err := r.h.NeighList(rt.Ifindex, netlink.FAMILY_V4)
	if err != nil {
		return false, fmt.Errorf("list neighbours on %s: %w", rt.Interface, err)
	}
	const valid = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT | netlink.NUD_NOARP
	for _, n := range neighs {
		if got, ok := netip.AddrFromSlice(n.IP.To4()); !ok || got != rt.NextHop {
			continue
		}
		if n.State&netlink.NUD_PERMANENT == 0 && n.FlagsExt&netlink.NTF_EXT_MANAGED == 0 {
			// a plain entry: make it managed; keep using it meanwhile
			if err := r.manage(rt); err != nil {
				return n.State&valid != 0, nil
			}
		}
		if n.State&valid != 0 {
			return true, nil
		}
		if n.State&netlink.NUD_FAILED != 0 {
			return false, fmt.Errorf("next hop %s on %s does not answer ARP (neighbour FAILED; the kernel keeps retrying)", rt.NextHop, rt.Interface)
		}
		return false, nil
	}
	if err := r.manage(rt); err != nil {
		return false, err
	}
	return false, nil
}

// KeepResolved makes the neighbour entry of ip on interface ifindex
// kernel-managed, as Resolve does for a backend's next hop, unless it is
// managed or permanent already: the kernel then resolves it at once and
// keeps probing it, so the data path's FIB lookups find it and a neighbour
// that stops answering turns FAILED (pkg/hostnet WatchNextHops gives it the
// gateways of the routes). An interface XLB is not attached to is left
// alone. Cleanup removes the entry with the others.
func (r *Resolver) KeepResolved(ifindex int, ip netip.Addr) error {
	name, ok := r.attached[ifindex]
	if !ok || !ip.Is4() || ip.IsUnspecified() {
		return nil
	}
	neighs, err := r.h.NeighList(ifindex, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list neighbours on %s: %w", name, err)
	}
	for _, n := range neighs {
		if got, ok := netip.AddrFromSlice(n.IP.To4()); ok && got == ip &&
			(n.State&netlink.NUD_PERMANENT != 0 || n.FlagsExt&netlink.NTF_EXT_MANAGED != 0) {
			return nil
		}
	}
	return r.manage(Route{Ifindex: ifindex, Interface: name, NextHop: ip})
}

// manage creates or converts the next hop's entry into a managed one.
func (r *Resolver) manage(rt Route) error {
	r.manageMu.Lock()
	defer r.manageMu.Unlock()
	if r.OnManaged != nil {
		if err := r.OnManaged(rt.Interface, rt.NextHop); err != nil {
			return fmt.Errorf("record neighbour %s on %s: %w", rt.NextHop, rt.Interface, err)
		}
	}
	n := &netlink.Neigh{LinkIndex: rt.Ifindex, Family: netlink.FAMILY_V4, IP: net.IP(rt.NextHop.AsSlice()),
		State: netlink.NUD_NONE, FlagsExt: netlink.NTF_EXT_MANAGED}
	if err := r.h.NeighSet(n); err != nil {
		return fmt.Errorf("make neighbour %s on %s managed: %w", rt.NextHop, rt.Interface, err)
	}
	r.mu.Lock()
	r.managed[neighKey{rt.Ifindex, rt.NextHop}] = true
	r.mu.Unlock()
	return nil
}

// Adopt makes Cleanup remove an entry a previous instance created and
// could not remove (it crashed). Unknown interfaces are ignored.
func (r *Resolver) Adopt(ifname string, ip netip.Addr) {
	link, err := r.h.LinkByName(ifname)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.managed[neighKey{link.Attrs().Index, ip}] = true
	r.mu.Unlock()
}

// Cleanup deletes the managed neighbour entries this resolver created or
// adopted.
func (r *Resolver) Cleanup() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for k := range r.managed {
		n := &netlink.Neigh{LinkIndex: k.ifindex, Family: netlink.FAMILY_V4, IP: net.IP(k.ip.AsSlice())}
		if err := r.h.NeighDel(n); err != nil && !errors.Is(err, errNoEntry) {
			errs = append(errs, fmt.Errorf("delete neighbour %s: %w", k.ip, err))
		}
		delete(r.managed, k)
	}
	return errors.Join(errs...)
}
