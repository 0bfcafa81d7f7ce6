package instance

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// Resolved holds the config values that depend on the host: what `auto`
// and the defaults turned into on this machine.
type Resolved struct {
	// Listen is the first service's address (the only one of a
	// top-level file).
	Listen netip.Addr
	// Services are every service's address, in config order.
	Services []ResolvedService
	// SNAT are the backend-facing source addresses in config order: the
	// one `auto` found, or every address snat.ip lists.
	SNAT       []netip.Addr
	Interfaces []string
}

// ResolvedService is one service's listen address on this host.
type ResolvedService struct {
	Name   string
	Listen netip.Addr
	// Auto: the address is `listen: auto`'s, the primary IPv4 address of
	// the default route's interface.
	Auto bool
	// Interface holds Listen: "lo" for a loopback address (a fleet VIP),
	// "" when no interface of this host has it and the network routes it
	// here (issue 29: neither needs to be the ingress interface).
	Interface string
}

// Routed reports whether the address is not on an ingress interface
// (on lo, or on no interface): the host stack does not answer ARP for it
// there, so the network must route it to this host.
func (s ResolvedService) Routed() bool { return s.Interface == "" || s.Interface == "lo" }

// Where describes the address's place on this host, as `xlb check` and
// the start's log show it.
func (s ResolvedService) Where() string {
	switch {
	case s.Auto:
		return "auto: default route, " + s.Interface
	case s.Interface == "":
		return "not an address of this host: must be routed here"
	case s.Interface == "lo":
		return "lo: must be routed here"
	}
	return s.Interface
}

// Resolve turns `listen: auto`, `snat.ip: auto` and an empty `interfaces`
// into concrete values (DESIGN §1, §9) and checks that every SNAT address
// belongs to this host: backends must send their replies to this
// instance (issue 13: each explicit snat.ip address must be this host's).
// A listen address need not be on an interface (issue 29: an address on
// lo, or routed to this host, is fine; Where says which). Interfaces
// default to those holding the services' addresses, else the default
// route's. Errors name the config field (listen, services[i].listen,
// snat.ip, snat.ip[i], interfaces, ports).
func Resolve(c *config.Config) (Resolved, error) {
	var r Resolved
	svcs := c.ServiceList()
	var owners []string // interfaces holding a listen address, in config order
	for i, s := range svcs {
		rs := ResolvedService{Name: s.Name, Auto: s.Listen.Auto}
		if s.Listen.Auto {
			if slices.ContainsFunc(r.Services, func(o ResolvedService) bool { return o.Auto }) {
				return r, fmt.Errorf("%s: at most one service may use listen: auto", serviceField(c, i, "listen"))
			}
			ip, ifname, err := hostnet.DefaultRouteIPv4()
			if err != nil {
				if c.Form == config.FormServices {
					err = fmt.Errorf("%s: %w", serviceField(c, i, "listen"), err)
				}
				return r, err // hostnet's names listen
			}
			rs.Listen, rs.Interface = ip, ifname
		} else {
			rs.Listen = s.Listen.IP
			if ifname, err := hostnet.InterfaceOf(rs.Listen); err == nil {
				rs.Interface = ifname
			}
		}
		if rs.Interface != "" && rs.Interface != "lo" && !slices.Contains(owners, rs.Interface) {
			owners = append(owners, rs.Interface)
		}
		r.Services = append(r.Services, rs)
	}
	if len(r.Services) == 0 {
		return r, errors.New("services: none")
	}
	for _, a := range r.Services {
		if slices.ContainsFunc(r.Services, func(b ResolvedService) bool { return b.Name != a.Name && b.Listen == a.Listen && (a.Auto || b.Auto) }) {
			return r, fmt.Errorf("listen: auto resolved to %s, which another service lists: give the auto service an explicit address", a.Listen)
		}
	}
	r.Listen = r.Services[0].Listen
	switch {
	case len(c.Interfaces) > 0:
		r.Interfaces = slices.Clone(c.Interfaces)
	case len(owners) > 0:
		r.Interfaces = owners
	default:
		// Every address is on lo or routed here: the packets come in
		// through the default route's interface.
		_, ifname, err := hostnet.DefaultRouteIPv4()
		if err != nil {
			return r, fmt.Errorf("interfaces: not set, and no listen address is on an interface other than lo: name the interfaces packets arrive on (%v)", err)
		}
		r.Interfaces = []string{ifname}
	}
	for i, ifname := range r.Interfaces {
		if _, err := net.InterfaceByName(ifname); err != nil {
			return r, fmt.Errorf("interfaces[%d]: no interface named %q in this network namespace", i, ifname)
		}
	}
	snat, err := resolveSNAT(c, r.Services)
	if err != nil {
		return r, err
	}
	r.SNAT = snat
	for i, s := range svcs {
		if !slices.Contains(r.SNAT, r.Services[i].Listen) {
			continue
		}
		for _, p := range s.Ports {
			if p.LocalPort >= c.SNAT.PortLo && p.LocalPort <= c.SNAT.PortHi {
				return r, fmt.Errorf("%s: a local_port lies inside snat.port_range and the SNAT address is the listen address", serviceField(c, i, "ports"))
			}
		}
	}
	return r, nil
}

// serviceField names field of service i as the file spells it: at the
// top level in the top-level form, services[i].field in the services
// form.
func serviceField(c *config.Config, i int, field string) string {
	if c.Form == config.FormServices {
		return fmt.Sprintf("services[%d].%s", i, field)
	}
	return field
}

// resolveSNAT turns snat.ip into addresses and checks each is this
// host's: `auto` is the source address toward the first static backend
// (the first listen address on an ingress interface without one), a list
// is taken as it is.
func resolveSNAT(c *config.Config, svcs []ResolvedService) ([]netip.Addr, error) {
	if !c.SNAT.Auto {
		for i, a := range c.SNAT.IPs {
			if !hostnet.IsLocal(a) {
				field := "snat.ip"
				if len(c.SNAT.IPs) > 1 {
					field = fmt.Sprintf("snat.ip[%d]", i)
				}
				return nil, fmt.Errorf("%s: %s is not an address of this host; backends must be able to reply to it (add it to an interface, or remove it from snat.ip)", field, a)
			}
		}
		return slices.Clone(c.SNAT.IPs), nil
	}
	var probe netip.Addr
	for _, s := range c.ServiceList() {
		if s.Provider.Static != nil && len(s.Provider.Static.Backends) > 0 {
			probe = s.Provider.Static.Backends[0].IP
			break
		}
	}
	if !probe.IsValid() {
		for _, s := range svcs {
			if !s.Routed() {
				return []netip.Addr{s.Listen}, nil
			}
		}
		src, _, err := hostnet.DefaultRouteIPv4()
		if err != nil {
			return nil, fmt.Errorf("snat.ip: auto: %w", err)
		}
		return []netip.Addr{src}, nil
	}
	src, _, err := hostnet.SourceFor(probe)
	if err != nil {
		return nil, fmt.Errorf("snat.ip: auto: %w", err)
	}
	if !hostnet.IsLocal(src) {
		return nil, fmt.Errorf("snat.ip: auto: %s is not an address of this host; backends must be able to reply to it", src)
	}
	return []netip.Addr{src}, nil
}
