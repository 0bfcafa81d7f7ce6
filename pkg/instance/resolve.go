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
	Listen netip.Addr
	// SNAT are the backend-facing source addresses in config order: the
	// one `auto` found, or every address snat.ip lists.
	SNAT       []netip.Addr
	Interfaces []string
}

// Resolve turns `listen: auto`, `snat.ip: auto` and an empty `interfaces`
// into concrete values (DESIGN §1) and checks that the listen address and
// every SNAT address belong to this host: the host answers ARP for the
// listen address, and backends must send their replies to this instance
// (issue 13: each explicit snat.ip address must be this host's). Errors
// name the config field (listen, snat.ip, snat.ip[i], interfaces).
func Resolve(c *config.Config) (Resolved, error) {
	var r Resolved
	if c.Listen.Auto {
		ip, ifname, err := hostnet.DefaultRouteIPv4()
		if err != nil {
			return r, err
		}
		r.Listen = ip
		if len(c.Interfaces) == 0 {
			r.Interfaces = []string{ifname}
		}
	} else {
		r.Listen = c.Listen.IP
	}
	if !hostnet.IsLocal(r.Listen) {
		return r, fmt.Errorf("listen: %s is not an address of this host; add it to an interface (XLB answers ARP through the host stack)", r.Listen)
	}
	if len(c.Interfaces) > 0 {
		r.Interfaces = append([]string(nil), c.Interfaces...)
	} else if r.Interfaces == nil {
		ifname, err := hostnet.InterfaceOf(r.Listen)
		if err != nil {
			return r, fmt.Errorf("interfaces: %w", err)
		}
		r.Interfaces = []string{ifname}
	}
	for i, ifname := range r.Interfaces {
		if _, err := net.InterfaceByName(ifname); err != nil {
			return r, fmt.Errorf("interfaces[%d]: no interface named %q in this network namespace", i, ifname)
		}
	}
	snat, err := resolveSNAT(c, r.Listen)
	if err != nil {
		return r, err
	}
	r.SNAT = snat
	if slices.Contains(r.SNAT, r.Listen) {
		for _, p := range c.Ports {
			if p.LocalPort >= c.SNAT.PortLo && p.LocalPort <= c.SNAT.PortHi {
				return r, errors.New("ports: a local_port lies inside snat.port_range and the SNAT address is the listen address")
			}
		}
	}
	return r, nil
}

// resolveSNAT turns snat.ip into addresses and checks each is this
// host's: `auto` is the source address toward the first static backend
// (the listen address without one), a list is taken as it is.
func resolveSNAT(c *config.Config, listen netip.Addr) ([]netip.Addr, error) {
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
	if c.Provider.Static != nil && len(c.Provider.Static.Backends) > 0 {
		probe = c.Provider.Static.Backends[0].IP
	}
	if !probe.IsValid() {
		return []netip.Addr{listen}, nil
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
