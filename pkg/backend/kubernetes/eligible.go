package kubernetes

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/xlbproject/xlb/pkg/backend"
)

// PortRule says which port of a slice the backends are reached on
// (provider.kubernetes.port_name and the port mappings' remote_port).
type PortRule struct {
	// Name is port_name: "" when not set.
	Name string
	// Fixed: every port mapping sets remote_port, so the data path never
	// needs a backend's own port.
	Fixed bool
	// Proto is the service's proto: "tcp" ("" means it) or "udp"
	// (issue 31). Only the slice's ports of that protocol count: a UDP
	// service of kube-dns takes "dns" (53/UDP), not "dns-tcp" (53/TCP).
	Proto string
}

// protocol is the EndpointSlice protocol the rule's ports must have.
func (r PortRule) protocol() corev1.Protocol {
	if r.Proto == "udp" {
		return corev1.ProtocolUDP
	}
	return corev1.ProtocolTCP
}

// Eligible returns the backends eligible for new connections among the
// EndpointSlices of one Service, ordered by address (issue 14, DESIGN
// §6b, the API's EndpointConditions rules), and the slices that supply
// none for want of a port (issue 28: one line each, for the log):
//
//   - only slices of addressType IPv4, and only with a port to reach the
//     backends on (a port of the rule's protocol, TCP or UDP, protocol nil
//     meaning TCP, with a number), which becomes each backend's Port: with
//     rule.Name set, the port of that name, and a slice without one
//     supplies no backend; without it, the unnamed port, else the slice's
//     only port of that protocol (a one-port Service whose port is named
//     "http"), else, when rule is Fixed, none (Port 0:
//     remote_port says where the backends are reached), else the slice
//     supplies no backend.
//   - an endpoint is eligible when ready (nil: true), serving (nil:
//     ready's value) and not terminating (nil: false).
//   - an endpoint's address is its first one (the API defines no meaning
//     for the others); it must be a usable IPv4 unicast address.
//   - its name is its targetRef's name (the pod), or the address; its
//     weight is 1 (a weighted service's annotation may change it:
//     Weights).
//   - several slices make one set (their union); an address listed more
//     than once is eligible if any of its entries is, and takes the name
//     and port of the first eligible entry in slice-name order.
func Eligible(all []*discoveryv1.EndpointSlice, rule PortRule) ([]backend.Backend, []Unusable) {
	ordered := slices.Clone(all)
	slices.SortFunc(ordered, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	seen := map[netip.Addr]bool{}
	var out []backend.Backend
	var unusable []Unusable
	for _, s := range ordered {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port, ok := slicePort(s, rule)
		if !ok {
			unusable = append(unusable, Unusable{Slice: s.Name, Ports: describePorts(s), Rule: rule})
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
			out = append(out, backend.Backend{Name: name, IP: ip, Port: port, Weight: 1})
		}
	}
	slices.SortFunc(out, func(a, b backend.Backend) int { return a.IP.Compare(b.IP) })
	return out, unusable
}

// Unusable is an IPv4 slice that supplies no backend because no port of
// it fits the PortRule.
type Unusable struct {
	Slice string
	// Ports describes the slice's ports: `"http" 8080/TCP, "metrics"
	// 9090/TCP`, or "no ports".
	Ports string
	Rule  PortRule
}

// Problem says why the slice supplies no backend and what to set, without
// the slice's name (the same for every slice of a Service).
func (u Unusable) Problem() string {
	proto := u.Rule.protocol()
	if u.Rule.Name != "" {
		return fmt.Sprintf("no %s port named %q with a number among its ports (%s): set provider.kubernetes.port_name to one of them", proto, u.Rule.Name, u.Ports)
	}
	return fmt.Sprintf("provider.kubernetes.port_name is not set and its ports (%s) hold neither an unnamed %s port nor exactly one %s port: set port_name to one of them, or remote_port in every port mapping", u.Ports, proto, proto)
}

// slicePort finds the port the slice's backends are reached on under
// rule (Eligible); with rule Fixed and no such port, 0.
func slicePort(s *discoveryv1.EndpointSlice, rule PortRule) (uint16, bool) {
	want := rule.protocol()
	var ports []discoveryv1.EndpointPort
	for _, p := range s.Ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto == want && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			ports = append(ports, p)
		}
	}
	name := func(p discoveryv1.EndpointPort) string {
		if p.Name == nil {
			return ""
		}
		return *p.Name
	}
	if i := slices.IndexFunc(ports, func(p discoveryv1.EndpointPort) bool { return name(p) == rule.Name }); i >= 0 {
		return uint16(*ports[i].Port), true
	}
	switch {
	case rule.Name != "":
		return 0, false // the port the operator named, or none
	case len(ports) == 1:
		return uint16(*ports[0].Port), true
	}
	return 0, rule.Fixed
}

// describePorts lists a slice's ports for a log line.
func describePorts(s *discoveryv1.EndpointSlice) string {
	if len(s.Ports) == 0 {
		return "no ports"
	}
	var parts []string
	for _, p := range s.Ports {
		name, proto, number := `""`, string(corev1.ProtocolTCP), "no number"
		if p.Name != nil && *p.Name != "" {
			name = fmt.Sprintf("%q", *p.Name)
		}
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		if p.Port != nil {
			number = fmt.Sprint(*p.Port)
		}
		parts = append(parts, fmt.Sprintf("%s %s/%s", name, number, proto))
	}
	return strings.Join(parts, ", ")
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
