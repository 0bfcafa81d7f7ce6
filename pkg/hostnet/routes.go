package hostnet

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// routeSettle is how long the next-hop watcher lets route events gather
// before it reads the routes again and marks stale the next hops they
// moved: one read and one pass over the next-hop slots per burst (a
// routing daemon replacing many routes), not one per event.
const routeSettle = 100 * time.Millisecond

// routeHop is one next hop of a route: a gateway on an interface, or the
// interface itself (gw invalid: the destination is on link).
type routeHop struct {
	ifindex int
	gw      netip.Addr
}

// routeID is what makes a route a route of its own in the kernel's FIB:
// the table, the destination prefix, the TOS and the metric.
type routeID struct {
	table, tos, priority int
	dst                  netip.Prefix
}

// routeEntry is one IPv4 route as the watcher compares it: its type, its
// flags and its next hops (with their flags: the kernel marks a hop dead
// or link-down on a multipath route), sorted.
type routeEntry struct {
	typ, flags int
	hops       []routeHop
	hopFlags   []int
}

func (r routeEntry) equal(o routeEntry) bool {
	return r.typ == o.typ && r.flags == o.flags && slices.Equal(r.hops, o.hops) && slices.Equal(r.hopFlags, o.hopFlags)
}

// routeTable is every IPv4 route of every table, as the watcher last read
// them. IPv4 keeps routes of the same routeID side by side (`ip route
// append`); the kernel uses the first, and all of them are kept here.
type routeTable map[routeID][]routeEntry

// newRouteTable keeps the routes that decide where a packet leaves:
// unicast routes, and the routes that refuse a destination (blackhole,
// unreachable, prohibit). Local, broadcast and multicast routes are not
// next hops.
func newRouteTable(rs []netlink.Route) routeTable {
	t := routeTable{}
	for _, r := range rs {
		switch r.Type {
		case unix.RTN_UNICAST, unix.RTN_BLACKHOLE, unix.RTN_UNREACHABLE, unix.RTN_PROHIBIT:
		default:
			continue
		}
		dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if r.Dst != nil {
			ip, ok := netip.AddrFromSlice(r.Dst.IP)
			ones, bits := r.Dst.Mask.Size()
			if !ok || bits != 32 {
				continue
			}
			dst = netip.PrefixFrom(ip.Unmap(), ones).Masked()
		}
		id := routeID{table: r.Table, tos: r.Tos, priority: r.Priority, dst: dst}
		e := routeEntry{typ: r.Type, flags: r.Flags}
		type hopFlag struct {
			h routeHop
			f int
		}
		var hs []hopFlag
		add := func(ifindex int, gw []byte, flags int) {
			h := routeHop{ifindex: ifindex}
			if a, ok := netip.AddrFromSlice(gw); ok && !a.Unmap().IsUnspecified() {
				h.gw = a.Unmap()
			}
			hs = append(hs, hopFlag{h, flags})
		}
		if len(r.MultiPath) > 0 {
			for _, p := range r.MultiPath {
				add(p.LinkIndex, p.Gw, p.Flags)
			}
		} else if r.LinkIndex > 0 {
			add(r.LinkIndex, r.Gw, 0)
		}
		slices.SortFunc(hs, func(a, b hopFlag) int {
			if a.h.ifindex != b.h.ifindex {
				return a.h.ifindex - b.h.ifindex
			}
			return a.h.gw.Compare(b.h.gw)
		})
		for _, h := range hs {
			e.hops = append(e.hops, h.h)
			e.hopFlags = append(e.hopFlags, h.f)
		}
		t[id] = append(t[id], e)
	}
	return t
}

// staleHops is the next hops a route change moved pairs away from:
// gateways (interface, address), and destinations on link (interface, a
// prefix the destination is in).
type staleHops struct {
	gws    map[routeHop]bool
	onLink []onLinkHop
}

type onLinkHop struct {
	ifindex int
	dst     netip.Prefix
}

// add records hop h of a route, for destinations in dst.
func (s *staleHops) add(h routeHop, dst netip.Prefix) {
	if h.gw.IsValid() {
		if s.gws == nil {
			s.gws = map[routeHop]bool{}
		}
		s.gws[h] = true
		return
	}
	if h.ifindex > 0 {
		s.onLink = append(s.onLink, onLinkHop{h.ifindex, dst})
	}
}

func (s *staleHops) empty() bool { return len(s.gws) == 0 && len(s.onLink) == 0 }

// match reports whether the next hop (ifindex, ip) of a next-hop slot is
// one of s.
func (s *staleHops) match(ifindex int, ip netip.Addr) bool {
	if s.gws[routeHop{ifindex, ip}] {
		return true
	}
	for _, o := range s.onLink {
		if o.ifindex == ifindex && o.dst.Contains(ip) {
			return true
		}
	}
	return false
}

func (s *staleHops) String() string {
	var out []string
	for h := range s.gws {
		out = append(out, fmt.Sprintf("%s on ifindex %d", h.gw, h.ifindex))
	}
	for _, o := range s.onLink {
		out = append(out, fmt.Sprintf("%s on link %d", o.dst, o.ifindex))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// movedHops compares the routes before and now and returns the next hops
// some destinations no longer take:
//   - a route that went: its hops;
//   - a route whose hops changed: the hops it no longer has (the ones it
//     keeps still carry their destinations), or all of them when it became
//     another type (unreachable, blackhole);
//   - a new route (a more specific prefix, a better metric): the hops of
//     every route before that covered its prefix, for the destinations in
//     it. The route itself takes no pairs away from anyone else.
//
// Hops on link count for the destinations in the route's prefix only. A
// hop that merely stopped being the best for some destination still
// forwards; it is the gone and the replaced ones that blackhole.
func movedHops(before, now routeTable) *staleHops {
	s := &staleHops{}
	for id, olds := range before {
		news := now[id]
		for _, o := range olds {
			if slices.ContainsFunc(news, o.equal) {
				continue
			}
			for i, h := range o.hops {
				if !keepsHop(news, o.typ, h, o.hopFlags[i]) {
					s.add(h, id.dst)
				}
			}
		}
	}
	for id := range now {
		if _, ok := before[id]; ok {
			continue
		}
		for oid, olds := range before {
			if oid.dst.Bits() <= id.dst.Bits() && oid.dst.Contains(id.dst.Addr()) {
				for _, o := range olds {
					for _, h := range o.hops {
						s.add(h, id.dst)
					}
				}
			}
		}
	}
	return s
}

// keepsHop reports whether one of routes, of type typ, still has hop h
// with the same flags.
func keepsHop(routes []routeEntry, typ int, h routeHop, flags int) bool {
	for _, n := range routes {
		if n.typ != typ {
			continue
		}
		if j := slices.Index(n.hops, h); j >= 0 && n.hopFlags[j] == flags {
			return true
		}
	}
	return false
}
