package lab

import (
	"fmt"
	"strconv"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// build creates what newPlan describes, step by step, with testnet; on
// error testnet has removed everything already created.
func (l *Lab) build() error {
	p := newPlan(l.Options)
	hosts := map[string]*Host{}
	steps := []testnet.Step{
		{Name: "namespaces", Run: func() error { return l.buildNamespaces(p, hosts) }},
		{Name: "bridges", Run: func() error { return l.buildBridges(p, hosts) }},
		{Name: "links", Run: func() error { return l.buildLinks(p, hosts) }},
		{Name: "xdp", Run: func() error { return l.buildXDP(p, hosts) }},
		{Name: "offload", Run: func() error { return l.buildOffload(p, hosts) }},
		{Name: "routes", Run: func() error { return l.buildRoutes(p, hosts) }},
		{Name: "servers", Run: l.buildServers},
	}
	err := l.net.Build(steps, func(step string, _ time.Duration) error {
		if l.Options.failAt == step {
			return fmt.Errorf("injected failure")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("lab (%s): %w", l.Topology, err)
	}
	return nil
}

func (l *Lab) buildNamespaces(p plan, hosts map[string]*Host) error {
	for _, role := range p.roles() {
		h, err := l.net.AddHost(role)
		if err != nil {
			return err
		}
		hosts[role] = h
	}
	for _, lan := range p.lans {
		l.LANs = append(l.LANs, hosts[lan.role])
	}
	for _, c := range p.clients {
		l.Clients = append(l.Clients, hosts[c])
	}
	l.XLB = hosts[p.xlb]
	for _, b := range p.backends {
		l.Backends = append(l.Backends, &Backend{Host: hosts[b]})
	}
	return nil
}

func (l *Lab) buildBridges(p plan, hosts map[string]*Host) error {
	for _, lan := range p.lans {
		if err := l.net.AddBridge(hosts[lan.role], lan.tag, lan.mac); err != nil {
			return err
		}
	}
	return nil
}

// buildLinks creates each veth pair with one end on a bridge and the
// other directly in the endpoint's namespace, so no link of the lab ever
// exists in the root namespace.
func (l *Lab) buildLinks(p plan, hosts map[string]*Host) error {
	for _, n := range p.nics {
		if _, err := l.net.Attach(hosts[n.host], n.ifname, n.addr, hosts[n.lan], n.tag); err != nil {
			return err
		}
	}
	return nil
}

// buildXDP attaches the XDP_PASS program to every bridge-side veth end:
// native XDP_TX on a veth is delivered only when the peer has a native
// XDP program, and native redirects need it (or GRO) on the target's peer.
func (l *Lab) buildXDP(p plan, hosts map[string]*Host) error {
	ports := map[string][]string{}
	for _, n := range p.nics {
		ports[n.lan] = append(ports[n.lan], l.net.LinkName(n.tag))
	}
	for _, lan := range p.lans {
		if err := hosts[lan.role].AttachXDPPass(ports[lan.role]...); err != nil {
			return err
		}
	}
	return nil
}

// buildOffload turns TX checksum offload off on every endpoint interface
// (clients, backends and XLB), so no frame leaves with a partial checksum
// that an XDP rewrite would turn into a wrong one.
func (l *Lab) buildOffload(p plan, hosts map[string]*Host) error {
	for _, n := range p.nics {
		if err := hosts[n.host].SetTxChecksum(false, n.ifname); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) buildRoutes(p plan, hosts map[string]*Host) error {
	for _, r := range p.routes {
		if err := hosts[r.host].AddDefaultRoute(r.ifname, r.gw); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) buildServers() error {
	o := l.Options
	for _, b := range l.Backends {
		var err error
		if o.EchoPort != -1 {
			if b.Echo, err = b.Serve(":"+strconv.Itoa(o.EchoPort), testnet.Echo); err != nil {
				return err
			}
			if b.UDPEcho, err = b.ServeUDP(":"+strconv.Itoa(o.EchoPort), testnet.UDPEcho); err != nil {
				return err
			}
		}
		if o.SinkPort != -1 {
			if b.Sink, err = b.Serve(":"+strconv.Itoa(o.SinkPort), testnet.Sink); err != nil {
				return err
			}
			if b.UDPSink, err = b.ServeUDP(":"+strconv.Itoa(o.SinkPort), testnet.UDPSink); err != nil {
				return err
			}
		}
	}
	return nil
}
