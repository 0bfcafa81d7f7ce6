package lab

import (
	"fmt"
	"net"
	"strconv"

	"github.com/vishvananda/netlink"
)

// build creates what l.plan() describes, step by step. Every namespace is
// recorded in l.hosts as soon as it exists so Close can remove it; links
// live only inside lab namespaces and disappear with them.
func (l *Lab) build() error {
	p := l.plan()
	steps := []struct {
		name string
		run  func(plan) error
	}{
		{"namespaces", l.buildNamespaces},
		{"bridges", l.buildBridges},
		{"links", l.buildLinks},
		{"xdp", l.buildXDP},
		{"offload", l.buildOffload},
		{"routes", l.buildRoutes},
		{"servers", l.buildServers},
	}
	for _, s := range steps {
		if err := s.run(p); err != nil {
			return fmt.Errorf("lab %s (%s): %s: %w", l.Prefix, l.Topology, s.name, err)
		}
		if l.Options.failAt == s.name {
			return fmt.Errorf("lab %s: injected failure after %s", l.Prefix, s.name)
		}
	}
	return nil
}

func (l *Lab) buildNamespaces(p plan) error {
	all := append(append(append(append([]*Host(nil), p.lans...), p.clients...), p.xlb), p.backends...)
	var setup func() error
	if !l.Options.IPv6 {
		setup = disableIPv6
	}
	for _, h := range all {
		handle, err := createNamespace(h.NS, setup)
		if err != nil {
			return err
		}
		h.handle = handle
		l.hosts = append(l.hosts, h)
		if h.nl, err = netlink.NewHandleAt(handle); err != nil {
			return fmt.Errorf("netlink handle in %s: %w", h.NS, err)
		}
		lo, err := h.nl.LinkByName("lo")
		if err == nil {
			err = h.nl.LinkSetUp(lo)
		}
		if err != nil {
			return fmt.Errorf("lo up in %s: %w", h.NS, err)
		}
	}
	l.LANs, l.Clients, l.XLB = p.lans, p.clients, p.xlb
	for _, h := range p.backends {
		l.Backends = append(l.Backends, &Backend{Host: h})
	}
	return nil
}

func (l *Lab) buildBridges(p plan) error {
	for i, lan := range p.lans {
		lan.Bridge = l.linkName(p.bridgeTag[lan])
		br := &netlink.Bridge{
			LinkAttrs: netlink.LinkAttrs{
				Name:         lan.Bridge,
				HardwareAddr: net.HardwareAddr{0x02, 0x02, 0, 0, 0, byte(i + 1)},
			},
			MulticastSnooping: new(false),
		}
		if err := lan.nl.LinkAdd(br); err != nil {
			return fmt.Errorf("bridge %s in %s: %w", lan.Bridge, lan.NS, err)
		}
		if err := lan.nl.LinkSetUp(br); err != nil {
			return fmt.Errorf("bridge %s up: %w", lan.Bridge, err)
		}
	}
	return nil
}

// buildLinks creates each veth pair in the bridge namespace with its inner
// end directly in the endpoint's namespace, so no link of the lab ever
// exists in the root namespace.
func (l *Lab) buildLinks(p plan) error {
	for _, n := range p.nics {
		br, err := n.lan.nl.LinkByName(n.lan.Bridge)
		if err != nil {
			return fmt.Errorf("bridge %s: %w", n.lan.Bridge, err)
		}
		ip := n.addr.Addr()
		iface := Iface{
			Name: n.ifname, MAC: EndpointMAC(ip), Addr: n.addr,
			LAN: n.lan, Peer: l.linkName(n.tag), PeerMAC: PeerMAC(ip),
		}
		veth := &netlink.Veth{
			LinkAttrs: netlink.LinkAttrs{
				Name:         iface.Peer,
				HardwareAddr: iface.PeerMAC,
				MasterIndex:  br.Attrs().Index,
			},
			PeerName:         iface.Name,
			PeerHardwareAddr: iface.MAC,
			PeerNamespace:    netlink.NsFd(n.host.handle),
		}
		if err := n.lan.nl.LinkAdd(veth); err != nil {
			return fmt.Errorf("veth %s/%s <-> %s/%s: %w", n.lan.NS, iface.Peer, n.host.NS, iface.Name, err)
		}
		peer, err := n.lan.nl.LinkByName(iface.Peer)
		if err == nil {
			iface.PeerIndex = peer.Attrs().Index
			err = n.lan.nl.LinkSetUp(peer)
		}
		if err != nil {
			return fmt.Errorf("%s in %s: %w", iface.Peer, n.lan.NS, err)
		}
		in, err := n.host.nl.LinkByName(iface.Name)
		if err == nil {
			iface.Index = in.Attrs().Index
			err = n.host.nl.AddrAdd(in, &netlink.Addr{IPNet: &net.IPNet{
				IP: ip.AsSlice(), Mask: net.CIDRMask(n.addr.Bits(), 32),
			}})
		}
		if err == nil {
			err = n.host.nl.LinkSetUp(in)
		}
		if err != nil {
			return fmt.Errorf("%s in %s: %w", iface.Name, n.host.NS, err)
		}
		n.host.Ifaces = append(n.host.Ifaces, iface)
	}
	return nil
}

// buildXDP attaches the XDP_PASS program to every bridge-side veth end:
// native XDP_TX on a veth is delivered only when the peer has a native
// XDP program, and native redirects need it (or GRO) on the target's peer.
func (l *Lab) buildXDP(p plan) error {
	prog, err := LoadXDPPass()
	if err != nil {
		return err
	}
	defer prog.Close()
	peers := map[*Host][]string{}
	for _, n := range p.nics {
		peers[n.lan] = append(peers[n.lan], l.linkName(n.tag))
	}
	for _, lan := range p.lans {
		if err := lan.Do(func() error { return AttachXDPPass(prog, peers[lan]...) }); err != nil {
			return fmt.Errorf("%s: %w", lan.NS, err)
		}
	}
	return nil
}

// buildOffload turns TX checksum offload off on every endpoint interface
// (clients, backends and XLB), so no frame leaves with a partial checksum
// that an XDP rewrite would turn into a wrong one.
func (l *Lab) buildOffload(p plan) error {
	ifaces := map[*Host][]string{}
	var order []*Host
	for _, n := range p.nics {
		if ifaces[n.host] == nil {
			order = append(order, n.host)
		}
		ifaces[n.host] = append(ifaces[n.host], n.ifname)
	}
	for _, h := range order {
		err := h.Do(func() error {
			for _, name := range ifaces[h] {
				if err := setTxChecksum(name, false); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", h.NS, err)
		}
	}
	return nil
}

func (l *Lab) buildRoutes(p plan) error {
	for _, r := range p.routes {
		link, err := r.host.nl.LinkByName(r.ifname)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", r.ifname, r.host.NS, err)
		}
		rt := &netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
		}
		if r.gw.IsValid() {
			rt.Gw = r.gw.AsSlice()
		} else {
			rt.Scope = netlink.SCOPE_LINK
		}
		if err := r.host.nl.RouteAdd(rt); err != nil {
			return fmt.Errorf("default route in %s: %w", r.host.NS, err)
		}
	}
	return nil
}

func (l *Lab) buildServers(plan) error {
	o := l.Options
	for _, b := range l.Backends {
		var err error
		if o.EchoPort != -1 {
			if b.Echo, err = b.Serve(":"+strconv.Itoa(o.EchoPort), Echo); err != nil {
				return err
			}
		}
		if o.SinkPort != -1 {
			if b.Sink, err = b.Serve(":"+strconv.Itoa(o.SinkPort), Sink); err != nil {
				return err
			}
		}
	}
	return nil
}
