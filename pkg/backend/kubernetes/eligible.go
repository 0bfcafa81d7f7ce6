package kubernetes

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/xlbproject/xlb/pkg/backend"
)

// Eligible returns the backends eligible for new connections among the
// EndpointSlices of one Service, ordered by address (issue 14, DESIGN
// §6b, the API's EndpointConditions rules):
//
//   - only slices of addressType IPv4 that have a port named portName with
//     protocol TCP (nil means TCP) and a number; that number is the
//     backend's Port. A slice without such a port supplies no backend.
//   - an endpoint is eligible when ready (nil: true), serving (nil:
//     ready's value) and not terminating (nil: false).
//   - an endpoint's address is its first one (the API defines no meaning
//     for the others); it must be a usable IPv4 unicast address.
//   - its name is its targetRef's name (the pod), or the address.
//   - several slices make one set (their union); an address listed more
//     than once is eligible if any of its entries is, and takes the name
//     and port of the first eligible entry in slice-name order.
func Eligible(all []*discoveryv1.EndpointSlice, portName string) []backend.Backend {
	ordered := slices.Clone(all)
	slices.SortFunc(ordered, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	seen := map[netip.Addr]bool{}
	var out []backend.Backend
	for _, s := range ordered {
		port, ok := slicePort(s, portName)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			ip, ok := endpointAddr(ep)
			if !ok || seen[ip] || !ready(ep.Conditions) {
				continue
			}
			seen[ip] = true
			name := ip.String()
			if ep.TargetRef != nil && ep.TargetRef.Name != "" {
				name = ep.TargetRef.Name
			}
			out = append(out, backend.Backend{Name: name, IP: ip, Port: port})
		}
	}
	slices.SortFunc(out, func(a, b backend.Backend) int { return a.IP.Compare(b.IP) })
	return out
}

// slicePort finds the slice's TCP port named portName ("" is the unnamed
// port) in an IPv4 slice.
func slicePort(s *discoveryv1.EndpointSlice, portName string) (uint16, bool) {
	if s.AddressType != discoveryv1.AddressTypeIPv4 {
		return 0, false
	}
	for _, p := range s.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		tcp := p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP
		if name == portName && tcp && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}

// endpointAddr parses the endpoint's first address: an IPv4 address the
// data path can send to (not unspecified, loopback, multicast or
// broadcast), as config requires of a static backend.
func endpointAddr(ep discoveryv1.Endpoint) (netip.Addr, bool) {
	if len(ep.Addresses) == 0 {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(ep.Addresses[0])
	usable := err == nil && ip.Is4() && !ip.IsUnspecified() && !ip.IsLoopback() && !ip.IsMulticast() &&
		ip != netip.AddrFrom4([4]byte{255, 255, 255, 255})
	return ip, usable
}

// ready applies the API's rules for null conditions: ready nil is true,
// serving nil takes ready's value, terminating nil is false.
func ready(c discoveryv1.EndpointConditions) bool {
	r := c.Ready == nil || *c.Ready
	s := r
	if c.Serving != nil {
		s = *c.Serving
	}
	t := c.Terminating != nil && *c.Terminating
	return r && s && !t
}
