package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
	"github.com/xlbproject/xlb/test/hostlab"
)

// Addresses of the lab (testnet's address plan: documentation ranges only).
var (
	VIP         = testnet.ServiceIP // the shared service address
	ClientIP    = testnet.OuterClientIP
	RouterFront = testnet.OuterRouterIP // router, client side
	RouterBack  = testnet.RouterIP      // router, XLB hosts' segment
)

// Ports and the client's timer.
const (
	ServicePort = 80
	BackendPort = 8080
	// LongLivedInterval is how often a long-lived connection sends.
	LongLivedInterval = 3 * time.Second
)

// Options describe a lab fleet.
type Options struct {
	Hosts    int    // XLB hosts, 1…9 (0: 3)
	Backends int    // backends, 1…9 (0: 3)
	Prefix   string // names start with it; empty: "xf" + 6 random hex digits
	Rootfs   string // hostlab root filesystem for the hosts
	Logf     func(format string, args ...any)

	// networkOnly, set by tests only, stops Start after the network and
	// the backends' servers: no holder process, no containers.
	networkOnly bool
}

// Host is an XLB host: a booted container in its own namespace
// (PREFIX-xINDEX).
type Host struct {
	*testnet.Host
	Index     int        // 1…
	Inventory string     // xlb1, …
	Addr      netip.Addr // 192.0.2.10+Index
	Container *hostlab.Container
}

// Backend is a backend namespace (PREFIX-bINDEX) with its banner-and-echo
// server.
type Backend struct {
	*testnet.Host
	Addr   netip.Addr
	Server *testnet.Server
}

// Lab is a running fleet lab. Close removes all of it.
type Lab struct {
	Prefix string
	LAN    *testnet.Host // the bridge all but the client hang on
	Router *testnet.Host
	Client *testnet.Host
	// Bird is the router's BGP daemon.
	Bird     *birdtest.Bird
	Hosts    []*Host
	Backends []*Backend
	// HolderPID is a process sleeping in the router's namespace (and the
	// host's other namespaces): Ansible's nsenter target for the router.
	HolderPID int

	net *testnet.Topology
}

// Start builds the lab and boots the hosts. On error everything created
// is removed.
func Start(o Options) (*Lab, error) {
	if o.Hosts == 0 {
		o.Hosts = 3
	}
	if o.Backends == 0 {
		o.Backends = 3
	}
	if o.Hosts < 1 || o.Hosts > testnet.MaxHosts || o.Backends < 1 || o.Backends > 9 {
		return nil, fmt.Errorf("fleet: %d hosts and %d backends; want 1…9 of each", o.Hosts, o.Backends)
	}
	if o.Prefix == "" {
		p, err := testnet.RandomPrefix("xf")
		if err != nil {
			return nil, err
		}
		o.Prefix = p
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	tn, err := testnet.New(testnet.Config{Prefix: o.Prefix})
	if err != nil {
		return nil, err
	}
	l := &Lab{Prefix: o.Prefix, net: tn}
	steps := []testnet.Step{
		{Name: "namespaces", Run: func() error { return l.buildNamespaces(o.Hosts, o.Backends) }},
		{Name: "links", Run: l.buildLinks},
		{Name: "xdp", Run: l.buildXDP},
		{Name: "router", Run: l.buildRouter},
		{Name: "servers", Run: l.buildServers},
	}
	if !o.networkOnly {
		steps = append(steps,
			testnet.Step{Name: "holder", Run: l.startHolder},
			testnet.Step{Name: "containers", Run: func() error { return l.bootHosts(o.Rootfs) }})
	}
	err = tn.Build(steps, func(step string, took time.Duration) error {
		o.Logf("fleet %s: %s in %s", l.Prefix, step, took.Round(10*time.Millisecond))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fleet %w", err)
	}
	return l, nil
}

// buildNamespaces creates every namespace (IPv6 off) and the bridge in
// PREFIX-lan.
func (l *Lab) buildNamespaces(hosts, backends int) error {
	var err error
	add := func(role string) *testnet.Host {
		var h *testnet.Host
		if err == nil {
			h, err = l.net.AddHost(role)
		}
		return h
	}
	l.LAN, l.Router, l.Client = add("lan"), add("rtr"), add("cli")
	for i := 1; i <= hosts; i++ {
		l.Hosts = append(l.Hosts, &Host{
			Host: add("x" + strconv.Itoa(i)), Index: i, Inventory: "xlb" + strconv.Itoa(i),
			Addr: testnet.HostIP(i - 1),
		})
	}
	for i := 1; i <= backends; i++ {
		l.Backends = append(l.Backends, &Backend{Host: add("b" + strconv.Itoa(i)), Addr: testnet.OneArmBackendIP(i - 1)})
	}
	if err != nil {
		return err
	}
	return l.net.AddBridge(l.LAN, "br", nil)
}

// buildLinks joins the client and the router directly and everything else
// to the bridge, sets the default routes and turns TX checksum offload off
// on every endpoint.
func (l *Lab) buildLinks() error {
	outer := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, testnet.OuterNet.Bits()) }
	front := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, testnet.FrontNet.Bits()) }
	if err := l.net.Pair(l.Router, "eth0", outer(RouterFront), l.Client, "eth0", outer(ClientIP)); err != nil {
		return err
	}
	if err := l.Client.AddDefaultRoute("eth0", RouterFront); err != nil {
		return err
	}
	if _, err := l.net.Attach(l.Router, "eth1", front(RouterBack), l.LAN, "r"); err != nil {
		return err
	}
	for _, h := range l.Hosts {
		if _, err := l.net.Attach(h.Host, "eth0", front(h.Addr), l.LAN, hostPort(h)); err != nil {
			return err
		}
		if err := h.AddDefaultRoute("eth0", RouterBack); err != nil {
			return err
		}
	}
	for i, b := range l.Backends {
		if _, err := l.net.Attach(b.Host, "eth0", front(b.Addr), l.LAN, "b"+strconv.Itoa(i+1)); err != nil {
			return err
		}
	}
	for _, h := range l.net.Hosts() {
		var names []string
		for _, i := range h.Ifaces {
			names = append(names, i.Name)
		}
		if err := h.SetTxChecksum(false, names...); err != nil {
			return err
		}
	}
	return nil
}

// hostPort is the tag of the bridge port facing XLB host h.
func hostPort(h *Host) string { return "x" + strconv.Itoa(h.Index) }

// buildXDP attaches a native XDP_PASS program to the bridge ports facing
// the XLB hosts: native XDP_TX out of a veth is delivered only when the
// peer has a native XDP program (LAB-NOTES).
func (l *Lab) buildXDP() error {
	var names []string
	for _, h := range l.Hosts {
		names = append(names, l.net.LinkName(hostPort(h)))
	}
	return l.LAN.AttachXDPPass(names...)
}

// BackendKeepAlive is the backends' TCP keepalive: a connection idle for
// 4 s (longer than LongLivedInterval, so live long-lived connections are
// never probed) is probed every second. It is how a backend learns that a
// client vanished: a long-lived connection that a drain moved to another
// host is reset there, and the backend's socket would otherwise stay
// ESTABLISHED. Such a leftover matters when a restarted XLB hands out its
// 4-tuple again (it starts its SNAT cursors at random points, which makes
// that rare): a SYN on it draws a challenge ACK, a reset and a SYN
// retransmission. The rolling upgrade's connection wait ends
// when the drained host's pairs are gone, that is when the backends'
// probes have cleared them.
var BackendKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 4 * time.Second, Interval: time.Second, Count: 3}

// buildServers starts each backend's server: on accept it sends one banner
// line naming itself and the peer address it sees (the XLB host's SNAT
// address, so a client learns which host carries its connection), then
// echoes.
func (l *Lab) buildServers() error {
	for _, b := range l.Backends {
		addr := netip.AddrPortFrom(b.Addr, BackendPort).String()
		banner := func(c *testnet.Conn) error {
			if _, err := fmt.Fprintf(c, "xlb-fleet backend=%s peer=%s\n", addr, c.Remote()); err != nil {
				return err
			}
			return testnet.Echo(c)
		}
		s, err := b.ServeWith(net.ListenConfig{KeepAliveConfig: BackendKeepAlive}, addr, banner)
		if err != nil {
			return err
		}
		b.Server = s
	}
	return nil
}

// startHolder starts a process in the router's network namespace (all
// its other namespaces are the host's) for Ansible's nsenter connection.
func (l *Lab) startHolder() error {
	cmd := l.Router.Command(context.Background(), "sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	l.HolderPID = cmd.Process.Pid // nsenter execs sleep: same process
	l.net.OnClose(func() error {
		cmd.Process.Kill()
		cmd.Wait()
		return nil
	})
	// Wait until the exec happened (the namespace is the router's).
	want, err := os.Readlink("/proc/self/ns/net")
	for i := 0; i < 100 && err == nil; i++ {
		got, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", l.HolderPID))
		if got != "" && got != want {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("holder process %d did not enter %s", l.HolderPID, l.Router.NS)
}

func (l *Lab) bootHosts(rootfs string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(l.Hosts))
	for i, h := range l.Hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := hostlab.Boot(hostlab.Options{
				Rootfs: rootfs, Name: l.Prefix + "-" + h.Inventory, NetnsPath: h.Path,
			}, 2*time.Minute)
			if err != nil {
				errs[i] = err
				return
			}
			h.Container = c
			l.net.OnClose(c.Close)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// systemd in the container may take lo down while it boots.
	for _, h := range l.Hosts {
		lo, err := h.Netlink().LinkByName("lo")
		if err == nil {
			err = h.Netlink().LinkSetUp(lo)
		}
		if err != nil {
			return fmt.Errorf("lo up in %s: %w", h.NS, err)
		}
	}
	return nil
}

// Exec runs a command inside host h's container.
func (h *Host) Exec(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return h.Container.Exec(ctx, nil, args...)
}

// Close stops the containers, the holder and the servers and removes every
// namespace. It is idempotent.
func (l *Lab) Close() error { return l.net.Close() }

// HostByAddr returns the XLB host with address a, or nil.
func (l *Lab) HostByAddr(a netip.Addr) *Host {
	for _, h := range l.Hosts {
		if h.Addr == a {
			return h
		}
	}
	return nil
}
