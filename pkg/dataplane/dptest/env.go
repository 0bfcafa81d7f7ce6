package dptest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/instance"
)

// Iface is one fixture interface.
type Iface struct {
	Name  string
	Index int
	IP    netip.Addr
	MAC   net.HardwareAddr
}

// Options shape an Env. Zero values take the defaults noted.
type Options struct {
	MaxConnections uint32 // default 1024
	SNATPortLo     uint16 // default 40000
	SNATPortHi     uint16 // default 40009
	// Ports defaults to 80->8080 and 443->8443.
	Ports []dataplane.PortMap
	// TwoArm routes backends through the second interface (SNAT 198.51.100.1).
	TwoArm bool
	// Backends defaults to the one-arm or two-arm backends.
	Backends []netip.Addr
	// Disable turns optional kernel features off (dataplane.Options.Disable).
	Disable []dataplane.Feature
	// ExtraSNAT are SNAT addresses after the first (snat.ip as a list),
	// added to the interface of the first: one-arm 192.0.2.0/24, two-arm
	// 198.51.100.0/24.
	ExtraSNAT []netip.Addr
	// Services default to one: DefaultService on ListenIP with Ports and
	// every backend (the instance's own, as the daemon configures it).
	// The Env configures them after the instance started (the first
	// keeps the instance's service id: the instance is named after it)
	// and publishes each one's backends.
	Services []Service
}

// DefaultService is the name of an Env's one service by default: the
// instance's (config name).
const DefaultService = config.DefaultName

// Service is one service of an Env.
type Service struct {
	Name   string              // default DefaultService for the first, svc<i> for the others
	Listen netip.Addr          // default ListenIP
	Ports  []dataplane.PortMap // default Options.Ports
	// Proto is dataplane.ProtoTCP (default) or dataplane.ProtoUDP; a
	// UDP service's UDPUnrepliedMax defaults to 64.
	Proto           string
	UDPUnrepliedMax uint32
	// Backends are the service's backends, indexes into Env.Backends
	// (their backend ids); default all of them.
	Backends []int
}

// Env is a packet-fixture environment. Front is XLB's client-side interface
// (192.0.2.10/24), Back its backend-side interface (198.51.100.1/24); both are
// veth ends whose peers stay in the same anonymous namespace. Neighbours of
// the client, second client and all backends are permanent with MAC(ip).
type Env struct {
	// Instance is the instance brought up by pkg/instance; DP is its
	// data path.
	Instance *instance.Instance
	DP       *dataplane.Dataplane
	Front    Iface
	Back     Iface
	SNAT     netip.Addr   // the first SNAT address
	SNATs    []netip.Addr // every SNAT address: SNAT, then Options.ExtraSNAT
	Backends []netip.Addr // by backend id
	Settings dataplane.Settings
	// Services are the services Configure returned for Settings.Services,
	// in their order; Routable[i] is Services[i]'s routable set as
	// published (member ids: the service's backends numbered on from the
	// previous service's).
	Services []dataplane.ServiceRef
	Routable [][]dataplane.BackendRef
	ns       netns.NsHandle
}

// NewEnv builds the environment and registers its cleanup with t.
func NewEnv(t testing.TB, o Options) *Env {
	t.Helper()
	testnet.RequireRoot(t)
	if o.MaxConnections == 0 {
		o.MaxConnections = 1024
	}
	if o.SNATPortLo == 0 {
		o.SNATPortLo, o.SNATPortHi = 40000, 40009
	}
	if len(o.Ports) == 0 {
		o.Ports = []dataplane.PortMap{{Local: 80, Remote: 8080}, {Local: 443, Remote: 8443}}
	}
	if len(o.Services) == 0 {
		o.Services = []Service{{}}
	}
	e := &Env{SNAT: ListenIP, Backends: OneArmBackends}
	if o.TwoArm {
		e.SNAT, e.Backends = BackIP, TwoArmBackends
	}
	if len(o.Backends) > 0 {
		e.Backends = o.Backends
	}
	e.SNATs = append([]netip.Addr{e.SNAT}, o.ExtraSNAT...)
	ns, err := testnet.NewAnon()
	if err != nil {
		t.Fatalf("dptest: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	e.ns = ns
	// No IPv6 on the fixture links: the kernel's duplicate address
	// detection and router solicitations would otherwise reach the
	// attached program and move its counters under a fixture's feet.
	if err := e.Do(testnet.DisableIPv6); err != nil {
		t.Fatalf("dptest: disable IPv6: %v", err)
	}
	if err := e.buildNet(ns, o.ExtraSNAT); err != nil {
		t.Fatalf("dptest: build namespace: %v", err)
	}
	// The instance comes up exactly as the daemon brings it up
	// (pkg/instance): journalled sysctls, reserved SNAT ports, the program
	// attached to both interfaces (generic mode: no traffic flows here)
	// so both are in the redirect map, backends resolved through their
	// permanent neighbours. Then discovery stops: the fixtures own the
	// routable set, ids 0..n-1 in Options.Backends order.
	cfg := config.Default()
	if o.Services[0].Name != "" {
		cfg.Name = o.Services[0].Name // the instance's service is the first one
	}
	cfg.Listen = config.Listen{IP: ListenIP}
	cfg.SNAT = config.SNAT{IPs: e.SNATs, PortLo: o.SNATPortLo, PortHi: o.SNATPortHi}
	cfg.Interfaces = []string{e.Front.Name, e.Back.Name}
	cfg.XDPMode = config.XDPModeGeneric
	cfg.FlowTable.MaxConnections = o.MaxConnections
	cfg.Ports = nil
	for _, p := range o.Ports {
		cfg.Ports = append(cfg.Ports, config.PortMapping{LocalPort: p.Local, RemotePort: p.Remote})
	}
	static := &config.StaticProvider{}
	for i, b := range e.Backends {
		static.Backends = append(static.Backends, config.Backend{Name: fmt.Sprintf("backend-%d", i), IP: b})
	}
	cfg.Provider = config.Provider{Static: static}
	for _, svc := range o.Services {
		if svc.Proto == dataplane.ProtoUDP {
			// the instance loads the SNAT bitmaps with their UDP half
			// (dataplane.SNATSpace.UDP) when its config has a UDP service
			cfg.Proto = dataplane.ProtoUDP
		}
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	iopts := instance.Options{Log: log, JournalDir: t.TempDir(), Disable: o.Disable, FixedSNATCursors: true, Unpinned: true}
	err = e.Do(func() error {
		in, err := instance.Start(context.Background(), cfg, iopts)
		e.Instance = in
		return err
	})
	if err != nil {
		t.Fatalf("dptest: start the instance: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Do(e.Instance.Stop); err != nil {
			t.Errorf("dptest: stop the instance: %v", err)
		}
	})
	e.Instance.StopDiscovery()
	e.DP = e.Instance.DP
	e.Settings = dataplane.Settings{SNAT: e.SNATs, SNATPortLo: o.SNATPortLo, SNATPortHi: o.SNATPortHi}
	for i, svc := range o.Services {
		s := dataplane.ServiceSettings{Name: svc.Name, Listen: svc.Listen, Proto: dataplane.ProtoTCP, Ports: svc.Ports}
		if svc.Proto == dataplane.ProtoUDP {
			s.Proto, s.UDPUnrepliedMax = dataplane.ProtoUDP, svc.UDPUnrepliedMax
			if s.UDPUnrepliedMax == 0 {
				s.UDPUnrepliedMax = 64
			}
		}
		if s.Name == "" {
			s.Name = DefaultService
			if i > 0 {
				s.Name = fmt.Sprintf("svc%d", i)
			}
		}
		if !s.Listen.IsValid() {
			s.Listen = ListenIP
		}
		if len(s.Ports) == 0 {
			s.Ports = o.Ports
		}
		e.Settings.Services = append(e.Settings.Services, s)
	}
	if e.Services, err = e.DP.Configure(e.Settings); err != nil {
		t.Fatalf("dptest: %v", err)
	}
	member := uint32(0)
	for i, svc := range o.Services {
		ids := svc.Backends
		if ids == nil {
			for id := range e.Backends {
				ids = append(ids, id)
			}
		}
		refs := make([]dataplane.BackendRef, len(ids))
		for j, id := range ids {
			refs[j] = dataplane.BackendRef{ID: uint32(id), Member: member, IP: e.Backends[id]}
			member++
		}
		if err := e.DP.SetRoutable(e.Services[i].ID, refs); err != nil {
			t.Fatalf("dptest: %v", err)
		}
		e.Routable = append(e.Routable, refs)
	}
	return e
}

// ServiceID is the id of the Env's service named name (Options.Services).
func (e *Env) ServiceID(t testing.TB, name string) uint16 {
	t.Helper()
	for _, s := range e.Services {
		if s.Name == name {
			return s.ID
		}
	}
	t.Fatalf("dptest: no service %q", name)
	return 0
}

// Do runs fn inside the fixture namespace.
func (e *Env) Do(fn func() error) error { return testnet.In(e.ns, fn) }

func (e *Env) buildNet(ns netns.NsHandle, extraSNAT []netip.Addr) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(lo); err != nil {
		return err
	}
	mk := func(name, peer string, ip netip.Addr, neighbours []netip.Addr) (Iface, error) {
		idx, err := testnet.AddVeth(testnet.VethEnd{Netlink: h, Name: name, MAC: MAC(ip), Addr: netip.PrefixFrom(ip, 24)}, testnet.VethEnd{Name: peer})
		if err != nil {
			return Iface{}, err
		}
		for _, n := range neighbours {
			err := h.NeighAdd(&netlink.Neigh{LinkIndex: idx.A, State: netlink.NUD_PERMANENT, IP: n.AsSlice(), HardwareAddr: MAC(n), Family: netlink.FAMILY_V4})
			if err != nil {
				return Iface{}, fmt.Errorf("neighbour %s: %w", n, err)
			}
		}
		return Iface{Name: name, Index: idx.A, IP: ip, MAC: MAC(ip)}, nil
	}
	front := append([]netip.Addr{ClientIP, Client2IP}, OneArmBackends...)
	if e.SNAT != BackIP {
		for _, b := range e.Backends { // Options.Backends beyond the default three
			if !slices.Contains(front, b) {
				front = append(front, b)
			}
		}
	}
	if e.Front, err = mk("xf0", "xf1", ListenIP, front); err != nil {
		return err
	}
	if e.Back, err = mk("xb0", "xb1", BackIP, TwoArmBackends); err != nil {
		return err
	}
	ifc := e.Front
	if e.SNAT == BackIP {
		ifc = e.Back
	}
	for _, a := range extraSNAT {
		link, err := h.LinkByIndex(ifc.Index)
		if err != nil {
			return err
		}
		if err := h.AddrAdd(link, &netlink.Addr{IPNet: netipx(netip.PrefixFrom(a, 24))}); err != nil {
			return fmt.Errorf("SNAT address %s: %w", a, err)
		}
	}
	return nil
}

func netipx(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}

// SNATSpace is the SNAT space of an Env with default Options: one address,
// ports 40000-40009. Tests that load a data path without an Env use it too.
var SNATSpace = dataplane.SNATSpace{Addrs: 1, PortLo: 40000, PortHi: 40009}
