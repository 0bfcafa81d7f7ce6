package dptest

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xlbproject/xlb/pkg/dataplane"
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
}

// Env is a packet-fixture environment. Front is XLB's client-side interface
// (192.0.2.10/24), Back its backend-side interface (198.51.100.1/24); both are
// veth ends whose peers stay in the same anonymous namespace. Neighbours of
// the client, second client and all backends are permanent with MAC(ip).
type Env struct {
	DP       *dataplane.Dataplane
	Front    Iface
	Back     Iface
	SNAT     netip.Addr
	Backends []netip.Addr
	Settings dataplane.Settings
	runner   nsRunner
}

// RequireRoot skips the test when not running as root (BPF and netns need it).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loads BPF programs and creates network namespaces")
	}
}

// NewEnv builds the environment and registers its cleanup with t.
func NewEnv(t testing.TB, o Options) *Env {
	t.Helper()
	RequireRoot(t)
	if o.MaxConnections == 0 {
		o.MaxConnections = 1024
	}
	if o.SNATPortLo == 0 {
		o.SNATPortLo, o.SNATPortHi = 40000, 40009
	}
	if len(o.Ports) == 0 {
		o.Ports = []dataplane.PortMap{{Local: 80, Remote: 8080}, {Local: 443, Remote: 8443}}
	}
	e := &Env{SNAT: ListenIP, Backends: OneArmBackends}
	if o.TwoArm {
		e.SNAT, e.Backends = BackIP, TwoArmBackends
	}
	if len(o.Backends) > 0 {
		e.Backends = o.Backends
	}
	ns, err := newAnonNS()
	if err != nil {
		t.Fatalf("dptest: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	e.runner = nsRunner{ns: ns}
	// No IPv6 on the fixture links: the kernel's duplicate address
	// detection and router solicitations would otherwise reach the
	// attached program and move its counters under a fixture's feet.
	err = e.Do(func() error {
		for _, k := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0o644); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("dptest: disable IPv6: %v", err)
	}
	if err := e.buildNet(ns); err != nil {
		t.Fatalf("dptest: build namespace: %v", err)
	}
	dp, err := dataplane.Load(dataplane.Options{MaxConnections: o.MaxConnections, Disable: o.Disable})
	if err != nil {
		t.Fatalf("dptest: %v", err)
	}
	e.DP = dp
	t.Cleanup(func() { e.Do(func() error { return dp.Close() }) })
	e.Settings = dataplane.Settings{Listen: ListenIP, SNAT: e.SNAT, SNATPortLo: o.SNATPortLo, SNATPortHi: o.SNATPortHi, Ports: o.Ports}
	if err := dp.Configure(e.Settings); err != nil {
		t.Fatalf("dptest: %v", err)
	}
	refs := make([]dataplane.BackendRef, len(e.Backends))
	for i, b := range e.Backends {
		refs[i] = dataplane.BackendRef{ID: uint32(i), IP: b}
	}
	if err := dp.SetRoutable(refs); err != nil {
		t.Fatalf("dptest: %v", err)
	}
	// Attach (generic mode: no traffic flows here) so both interfaces are
	// in the redirect map exactly as in production, and enable forwarding on
	// lo for bpf_fib_lookup as the daemon does.
	err = e.Do(func() error {
		if _, err := dataplane.EnableFIBLookups(); err != nil {
			return err
		}
		for _, ifc := range []string{e.Front.Name, e.Back.Name} {
			if _, err := dp.Attach(ifc, dataplane.ModeGeneric); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("dptest: %v", err)
	}
	return e
}

// Do runs fn inside the fixture namespace.
func (e *Env) Do(fn func() error) error { return e.runner.do(fn) }

func (e *Env) buildNet(ns netns.NsHandle) error {
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
	mk := func(name, peer string, ip netip.Addr, bits int, neighbours []netip.Addr) (Iface, error) {
		mac := MAC(ip)
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: mac}, PeerName: peer}
		if err := h.LinkAdd(veth); err != nil {
			return Iface{}, fmt.Errorf("add veth %s: %w", name, err)
		}
		for _, n := range []string{name, peer} {
			l, err := h.LinkByName(n)
			if err != nil {
				return Iface{}, err
			}
			if err := h.LinkSetUp(l); err != nil {
				return Iface{}, err
			}
		}
		l, err := h.LinkByName(name)
		if err != nil {
			return Iface{}, err
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(bits, 32)}}
		if err := h.AddrAdd(l, addr); err != nil {
			return Iface{}, fmt.Errorf("address %s: %w", ip, err)
		}
		for _, n := range neighbours {
			err := h.NeighAdd(&netlink.Neigh{LinkIndex: l.Attrs().Index, State: netlink.NUD_PERMANENT, IP: n.AsSlice(), HardwareAddr: MAC(n), Family: netlink.FAMILY_V4})
			if err != nil {
				return Iface{}, fmt.Errorf("neighbour %s: %w", n, err)
			}
		}
		return Iface{Name: name, Index: l.Attrs().Index, IP: ip, MAC: mac}, nil
	}
	front := append([]netip.Addr{ClientIP, Client2IP}, OneArmBackends...)
	if e.Front, err = mk("xf0", "xf1", ListenIP, 24, front); err != nil {
		return err
	}
	if e.Back, err = mk("xb0", "xb1", BackIP, 24, TwoArmBackends); err != nil {
		return err
	}
	return nil
}
