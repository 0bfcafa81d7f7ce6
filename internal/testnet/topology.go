package testnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Config describes a Topology.
type Config struct {
	// Prefix starts every namespace and link name (see ValidatePrefix);
	// RandomPrefix makes one.
	Prefix string
	// IPv6 leaves IPv6 enabled in the namespaces. By default it is
	// disabled (DisableIPv6).
	IPv6 bool
}

// Topology is a set of named network namespaces (Hosts) whose names all
// start with one prefix, and the links between them. Hosts and links are
// added one by one (AddHost, AddBridge, Attach, Pair); Close removes all
// of it, also after a failed or partial build. AddHost, Hosts, OnClose
// and Close are safe for concurrent use; the link builders are not (they
// append to a Host's Ifaces).
type Topology struct {
	Prefix string
	ipv6   bool

	mu    sync.Mutex
	hosts []*Host
	undo  []func() error

	closeOnce sync.Once
	closeErr  error
}

// New returns an empty topology. It fails only for an invalid prefix.
func New(c Config) (*Topology, error) {
	if err := ValidatePrefix(c.Prefix); err != nil {
		return nil, err
	}
	return &Topology{Prefix: c.Prefix, ipv6: c.IPv6}, nil
}

// Step is one named stage of a build (see Build).
type Step struct {
	Name string
	Run  func() error
}

// Build runs steps in order and returns the first error, prefixed with the
// topology's prefix and the step's name, after closing t (Close's error is
// joined). done, if not nil, runs after each step that succeeded, with
// the step's name and duration; an error from it fails the build the same
// way (tests inject construction failures with it).
func (t *Topology) Build(steps []Step, done func(step string, took time.Duration) error) error {
	for _, s := range steps {
		start := time.Now()
		err := s.Run()
		if err == nil && done != nil {
			err = done(s.Name, time.Since(start))
		}
		if err != nil {
			return errors.Join(fmt.Errorf("%s: %s: %w", t.Prefix, s.Name, err), t.Close())
		}
	}
	return nil
}

// LinkName is PREFIX-tag, the name of a bridge or of a bridge-side veth
// end. It must fit Linux's 15 characters (checked where a link is made).
func (t *Topology) LinkName(tag string) string { return t.Prefix + "-" + tag }

// AddHost creates the namespace PREFIX-role with lo up (and IPv6 off
// unless Config.IPv6). A namespace of that name that exists already is an
// error and is left alone.
func (t *Topology) AddHost(role string) (*Host, error) {
	ns := t.Prefix + "-" + role
	h := &Host{Name: role, NS: ns, Path: filepath.Join(NetnsDir, ns), handle: netns.None()}
	var setup func() error
	if !t.ipv6 {
		setup = DisableIPv6
	}
	handle, err := createNamed(ns, setup)
	if err != nil {
		return nil, err
	}
	h.handle = handle
	t.mu.Lock()
	t.hosts = append(t.hosts, h)
	t.mu.Unlock()
	if h.nl, err = netlink.NewHandleAt(handle); err != nil {
		return nil, fmt.Errorf("testnet: netlink handle in %s: %w", ns, err)
	}
	lo, err := h.nl.LinkByName("lo")
	if err == nil {
		err = h.nl.LinkSetUp(lo)
	}
	if err != nil {
		return nil, fmt.Errorf("testnet: lo up in %s: %w", ns, err)
	}
	return h, nil
}

// AddBridge creates the bridge PREFIX-tag in h, with MAC mac (nil: the
// kernel picks one) and without multicast snooping, brings it up and
// records it as h.Bridge.
func (t *Topology) AddBridge(h *Host, tag string, mac net.HardwareAddr) error {
	name := t.LinkName(tag)
	br := &netlink.Bridge{
		LinkAttrs:         netlink.LinkAttrs{Name: name, HardwareAddr: mac},
		MulticastSnooping: new(false),
	}
	if err := h.nl.LinkAdd(br); err != nil {
		return fmt.Errorf("testnet: bridge %s in %s: %w", name, h.NS, err)
	}
	if err := h.nl.LinkSetUp(br); err != nil {
		return fmt.Errorf("testnet: bridge %s up: %w", name, err)
	}
	h.Bridge = name
	return nil
}

// Attach joins h to the bridge of lan: a veth pair with the endpoint
// ifname (address addr, MAC EndpointMAC) in h and the port PREFIX-tag (MAC
// PeerMAC) on lan's bridge. The interface is appended to h.Ifaces and
// returned.
func (t *Topology) Attach(h *Host, ifname string, addr netip.Prefix, lan *Host, tag string) (Iface, error) {
	if lan.Bridge == "" {
		return Iface{}, fmt.Errorf("testnet: %s has no bridge", lan.NS)
	}
	ip := addr.Addr()
	port := VethEnd{Netlink: lan.nl, Name: t.LinkName(tag), MAC: PeerMAC(ip), Master: lan.Bridge}
	end := VethEnd{Netlink: h.nl, Netns: h.handle, Name: ifname, MAC: EndpointMAC(ip), Addr: addr}
	idx, err := AddVeth(port, end)
	if err != nil {
		return Iface{}, fmt.Errorf("%s/%s <-> %s/%s: %w", lan.NS, port.Name, h.NS, ifname, err)
	}
	i := Iface{
		Name: ifname, Index: idx.B, MAC: end.MAC, Addr: addr,
		LAN: lan, Peer: port.Name, PeerIndex: idx.A, PeerMAC: port.MAC,
	}
	h.Ifaces = append(h.Ifaces, i)
	return i, nil
}

// Pair joins a and b directly: a veth pair with aIf (address aAddr) in a
// and bIf (address bAddr) in b, each with the EndpointMAC of its address.
// Both interfaces are appended to their hosts' Ifaces.
func (t *Topology) Pair(a *Host, aIf string, aAddr netip.Prefix, b *Host, bIf string, bAddr netip.Prefix) error {
	ea := VethEnd{Netlink: a.nl, Name: aIf, MAC: EndpointMAC(aAddr.Addr()), Addr: aAddr}
	eb := VethEnd{Netlink: b.nl, Netns: b.handle, Name: bIf, MAC: EndpointMAC(bAddr.Addr()), Addr: bAddr}
	idx, err := AddVeth(ea, eb)
	if err != nil {
		return fmt.Errorf("%s/%s <-> %s/%s: %w", a.NS, aIf, b.NS, bIf, err)
	}
	a.Ifaces = append(a.Ifaces, Iface{Name: aIf, Index: idx.A, MAC: ea.MAC, Addr: aAddr, LAN: b, Peer: bIf, PeerIndex: idx.B, PeerMAC: eb.MAC})
	b.Ifaces = append(b.Ifaces, Iface{Name: bIf, Index: idx.B, MAC: eb.MAC, Addr: bAddr, LAN: a, Peer: aIf, PeerIndex: idx.A, PeerMAC: ea.MAC})
	return nil
}

// AddDefaultRoute adds h's IPv4 default route: via gw out of ifname, or
// on-link out of ifname when gw is the zero Addr.
func (h *Host) AddDefaultRoute(ifname string, gw netip.Addr) error {
	link, err := h.nl.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("testnet: %s in %s: %w", ifname, h.NS, err)
	}
	rt := &netlink.Route{
		LinkIndex: link.Attrs().Index,
		Dst:       &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
	}
	if gw.IsValid() {
		rt.Gw = gw.AsSlice()
	} else {
		rt.Scope = netlink.SCOPE_LINK
	}
	if err := h.nl.RouteAdd(rt); err != nil {
		return fmt.Errorf("testnet: default route in %s: %w", h.NS, err)
	}
	return nil
}

// AddAddress adds addr to h's interface ifname as a further address (the
// kernel answers ARP for it like for the first one); it goes with the
// namespace.
func (h *Host) AddAddress(ifname string, addr netip.Prefix) error {
	link, err := h.nl.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("testnet: %s in %s: %w", ifname, h.NS, err)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), 32)}}
	if err := h.nl.AddrAdd(link, a); err != nil {
		return fmt.Errorf("testnet: address %s on %s in %s: %w", addr, ifname, h.NS, err)
	}
	return nil
}

// Hosts returns every namespace of the topology in creation order.
func (t *Topology) Hosts() []*Host {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.hosts)
}

// OnClose registers f to run first thing in Close (after f's registered
// later), e.g. to stop a container or process that lives in a namespace.
func (t *Topology) OnClose(f func() error) {
	t.mu.Lock()
	t.undo = append(t.undo, f)
	t.mu.Unlock()
}

// Close runs the OnClose functions (last registered first), stops every
// server started on a host and removes every namespace (their links go
// with them), last created first. It is idempotent and safe on a partial
// topology; all errors are joined. Processes started with Host.Command
// keep their namespace alive (nameless) until they exit: stop them first.
func (t *Topology) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		undo, hosts := t.undo, t.hosts
		t.undo = nil
		t.mu.Unlock()
		var errs []error
		for _, f := range slices.Backward(undo) {
			errs = append(errs, f())
		}
		for _, h := range hosts {
			errs = append(errs, h.closeServers())
		}
		for _, h := range slices.Backward(hosts) {
			h.release()
			errs = append(errs, deleteNamed(h.NS))
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}
