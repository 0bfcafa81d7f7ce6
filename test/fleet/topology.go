package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/xlbproject/xlb/test/hostlab"
	"github.com/xlbproject/xlb/test/lab"
)

// Addresses and timers of the lab (documentation ranges only).
var (
	VIP         = netip.MustParseAddr("198.51.100.10") // the shared service address
	ClientIP    = netip.MustParseAddr("203.0.113.10")
	RouterFront = netip.MustParseAddr("203.0.113.1") // router, client side
	RouterBack  = netip.MustParseAddr("192.0.2.1")   // router, XLB hosts' segment
	hostBase    = 11                                 // xlb1 192.0.2.11, …
	backendBase = 31                                 // backend1 192.0.2.31, …
)

const (
	ServicePort = 80
	BackendPort = 8080
	// GroupID is the router's resilient nexthop group; host i (from 1) is
	// nexthop 10+i.
	GroupID = 100
	Buckets = 64
	// Weight is a member's normal weight.
	Weight = 100
	// IdleTimer (seconds) is the group's idle timer in service: longer
	// than LongLivedInterval with margin, so the buckets of a connection
	// that sends every LongLivedInterval never count as idle.
	IdleTimer = 10
	// DrainIdleTimer (seconds) applies while a host drains: shorter than
	// LongLivedInterval, so a drained host's long-lived connections move
	// (and are reset) between two of their messages, and far longer than
	// any gap inside a short connection, so those never move mid-way.
	DrainIdleTimer = 2
	// DrainTimeout bounds the wait for a drained host's buckets to go idle.
	DrainTimeout = 60
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
}

// NS is a network namespace of the lab.
type NS struct {
	Name string // PREFIX-role
	Path string // /run/netns/Name
}

// Host is an XLB host: a booted container in its own namespace.
type Host struct {
	NS
	Index     int        // 1…
	Inventory string     // xlb1, …
	Addr      netip.Addr // 192.0.2.10+Index
	NexthopID int        // 10+Index
	Container *hostlab.Container
}

// Backend is a backend namespace with its banner-and-echo server.
type Backend struct {
	NS
	Addr   netip.Addr
	Server *Server
}

// Lab is a running fleet lab. Close removes all of it.
type Lab struct {
	Prefix   string
	LAN      NS
	Router   NS
	Client   NS
	Hosts    []*Host
	Backends []*Backend
	// HolderPID is a process sleeping in the router's namespace (and the
	// host's other namespaces): Ansible's nsenter target for the router.
	HolderPID int

	logf    func(string, ...any)
	holder  *exec.Cmd
	mu      sync.Mutex
	undo    []func() error
	closeMu sync.Mutex
	closed  bool
}

func randomPrefix() string {
	var b [3]byte
	rand.Read(b[:])
	return "xf" + hex.EncodeToString(b[:])
}

func (l *Lab) ns(role string) NS {
	name := l.Prefix + "-" + role
	return NS{Name: name, Path: filepath.Join("/run/netns", name)}
}

// onClose registers f to run in Close, in reverse order of registration.
func (l *Lab) onClose(f func() error) {
	l.mu.Lock()
	l.undo = append(l.undo, f)
	l.mu.Unlock()
}

// ip runs `ip ARGS` on the host.
func (l *Lab) ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := run(ctx, "ip", args...)
	return err
}

// inNS runs a command inside a namespace (network namespace only).
func inNS(ns NS, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return run(ctx, "nsenter", append([]string{"--net=" + ns.Path, "--", name}, args...)...)
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
	if o.Hosts < 1 || o.Hosts > 9 || o.Backends < 1 || o.Backends > 9 {
		return nil, fmt.Errorf("fleet: %d hosts and %d backends; want 1…9 of each", o.Hosts, o.Backends)
	}
	if o.Prefix == "" {
		o.Prefix = randomPrefix()
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	l := &Lab{Prefix: o.Prefix, logf: o.Logf}
	l.LAN, l.Router, l.Client = l.ns("lan"), l.ns("rtr"), l.ns("cli")
	for i := 1; i <= o.Hosts; i++ {
		l.Hosts = append(l.Hosts, &Host{
			NS: l.ns("x" + strconv.Itoa(i)), Index: i, Inventory: "xlb" + strconv.Itoa(i),
			Addr: addr4(192, 0, 2, hostBase-1+i), NexthopID: 10 + i,
		})
	}
	for i := 1; i <= o.Backends; i++ {
		l.Backends = append(l.Backends, &Backend{NS: l.ns("b" + strconv.Itoa(i)), Addr: addr4(192, 0, 2, backendBase-1+i)})
	}
	steps := []struct {
		name string
		f    func() error
	}{
		{"namespaces", l.buildNamespaces},
		{"links", l.buildLinks},
		{"xdp", l.buildXDP},
		{"router", l.buildRouter},
		{"servers", l.buildServers},
		{"holder", l.startHolder},
		{"containers", func() error { return l.bootHosts(o.Rootfs) }},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.f(); err != nil {
			return nil, errors.Join(fmt.Errorf("fleet %s: %s: %w", l.Prefix, s.name, err), l.Close())
		}
		l.logf("fleet %s: %s in %s", l.Prefix, s.name, time.Since(start).Round(10*time.Millisecond))
	}
	return l, nil
}

func addr4(a, b, c, d int) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a), byte(b), byte(c), byte(d)})
}

func (l *Lab) all() []NS {
	nss := []NS{l.LAN, l.Router, l.Client}
	for _, h := range l.Hosts {
		nss = append(nss, h.NS)
	}
	for _, b := range l.Backends {
		nss = append(nss, b.NS)
	}
	return nss
}

func (l *Lab) buildNamespaces() error {
	for _, ns := range l.all() {
		if _, err := os.Lstat(ns.Path); err == nil {
			return fmt.Errorf("namespace %s exists already", ns.Name)
		}
		if err := l.ip("netns", "add", ns.Name); err != nil {
			return err
		}
		name := ns.Name
		l.onClose(func() error { return l.ip("netns", "delete", name) })
		if err := l.ip("-n", ns.Name, "link", "set", "lo", "up"); err != nil {
			return err
		}
		// IPv4 only: no router solicitations or DAD in the lab.
		if _, err := inNS(ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"); err != nil {
			return err
		}
	}
	return l.ip("-n", l.LAN.Name, "link", "add", "br0", "up", "type", "bridge")
}

// veth creates a pair: inner end ifname in ns (with addr/24 if valid),
// outer end PREFIX-tag in the LAN namespace on the bridge.
func (l *Lab) lanPort(ns NS, ifname, tag string, addr netip.Addr) error {
	port := l.Prefix + "-" + tag
	steps := [][]string{
		{"-n", l.LAN.Name, "link", "add", port, "type", "veth", "peer", "name", ifname, "netns", ns.Name},
		{"-n", l.LAN.Name, "link", "set", port, "master", "br0", "up"},
		{"-n", ns.Name, "address", "add", addr.String() + "/24", "dev", ifname},
		{"-n", ns.Name, "link", "set", ifname, "up"},
	}
	for _, s := range steps {
		if err := l.ip(s...); err != nil {
			return err
		}
	}
	_, err := inNS(ns, "ethtool", "-K", ifname, "tx", "off")
	return err
}

func (l *Lab) buildLinks() error {
	// Client <-> router, a direct pair.
	for _, s := range [][]string{
		{"-n", l.Router.Name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", l.Client.Name},
		{"-n", l.Router.Name, "address", "add", RouterFront.String() + "/24", "dev", "eth0"},
		{"-n", l.Router.Name, "link", "set", "eth0", "up"},
		{"-n", l.Client.Name, "address", "add", ClientIP.String() + "/24", "dev", "eth0"},
		{"-n", l.Client.Name, "link", "set", "eth0", "up"},
		{"-n", l.Client.Name, "route", "add", "default", "via", RouterFront.String()},
	} {
		if err := l.ip(s...); err != nil {
			return err
		}
	}
	for _, ns := range []NS{l.Router, l.Client} {
		if _, err := inNS(ns, "ethtool", "-K", "eth0", "tx", "off"); err != nil {
			return err
		}
	}
	// Router, hosts and backends on the bridge.
	if err := l.lanPort(l.Router, "eth1", "r", RouterBack); err != nil {
		return err
	}
	for _, h := range l.Hosts {
		if err := l.lanPort(h.NS, "eth0", "x"+strconv.Itoa(h.Index), h.Addr); err != nil {
			return err
		}
		if err := l.ip("-n", h.Name, "route", "add", "default", "via", RouterBack.String()); err != nil {
			return err
		}
	}
	for i, b := range l.Backends {
		if err := l.lanPort(b.NS, "eth0", "b"+strconv.Itoa(i+1), b.Addr); err != nil {
			return err
		}
	}
	return nil
}

// buildXDP attaches a native XDP_PASS program to the bridge ports facing
// the XLB hosts: native XDP_TX out of a veth is delivered only when the
// peer has a native XDP program (LAB-NOTES).
func (l *Lab) buildXDP() error {
	prog, err := lab.LoadXDPPass()
	if err != nil {
		return err
	}
	defer prog.Close()
	var names []string
	for _, x := range l.Hosts {
		names = append(names, l.Prefix+"-x"+strconv.Itoa(x.Index))
	}
	// netlink's package-level calls use the calling thread's namespace.
	return inNetns(l.LAN.Path, func() error { return lab.AttachXDPPass(prog, names...) })
}

func (l *Lab) buildRouter() error {
	if _, err := inNS(l.Router, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1"); err != nil {
		return err
	}
	var members string
	for _, h := range l.Hosts {
		if err := l.ip("-n", l.Router.Name, "nexthop", "add", "id", strconv.Itoa(h.NexthopID), "via", h.Addr.String(), "dev", "eth1"); err != nil {
			return err
		}
		if members != "" {
			members += "/"
		}
		members += fmt.Sprintf("%d,%d", h.NexthopID, Weight)
	}
	for _, s := range [][]string{
		{"-n", l.Router.Name, "nexthop", "add", "id", strconv.Itoa(GroupID), "group", members, "type", "resilient",
			"buckets", strconv.Itoa(Buckets), "idle_timer", strconv.Itoa(IdleTimer), "unbalanced_timer", "0"},
		{"-n", l.Router.Name, "route", "add", VIP.String() + "/32", "nhid", strconv.Itoa(GroupID)},
	} {
		if err := l.ip(s...); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) buildServers() error {
	for _, b := range l.Backends {
		s, err := Serve(b.Path, fmt.Sprintf("%s:%d", b.Addr, BackendPort))
		if err != nil {
			return err
		}
		b.Server = s
		l.onClose(s.Close)
	}
	return nil
}

// startHolder starts a process in the router's network namespace (all
// its other namespaces are the host's) for Ansible's nsenter connection.
func (l *Lab) startHolder() error {
	cmd := exec.Command("nsenter", "--net="+l.Router.Path, "--", "sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	l.holder = cmd
	l.HolderPID = cmd.Process.Pid // nsenter execs sleep: same process
	l.onClose(func() error {
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
	return fmt.Errorf("holder process %d did not enter %s", l.HolderPID, l.Router.Name)
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
			l.onClose(c.Close)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// systemd in the container may take lo down while it boots.
	for _, h := range l.Hosts {
		if err := l.ip("-n", h.Name, "link", "set", "lo", "up"); err != nil {
			return err
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

// Close stops the containers and the servers and removes every namespace.
// It is idempotent.
func (l *Lab) Close() error {
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.mu.Lock()
	undo := l.undo
	l.undo = nil
	l.mu.Unlock()
	var errs []error
	for i := len(undo) - 1; i >= 0; i-- {
		errs = append(errs, undo[i]())
	}
	return errors.Join(errs...)
}

// Member is one entry of the router's nexthop group.
type Member struct {
	ID     int `json:"id"`
	Weight int `json:"weight"`
}

// Group reads the router's nexthop group: its members and idle timer.
func (l *Lab) Group() ([]Member, int, error) {
	out, err := inNS(l.Router, "ip", "-j", "nexthop", "show", "id", strconv.Itoa(GroupID))
	if err != nil {
		return nil, 0, err
	}
	var g []struct {
		Group     []Member `json:"group"`
		Resilient struct {
			IdleTimer int `json:"idle_timer"`
		} `json:"resilient_args"`
	}
	if err := json.Unmarshal([]byte(out), &g); err != nil || len(g) != 1 {
		return nil, 0, fmt.Errorf("nexthop group %d: %v: %s", GroupID, err, out)
	}
	for i := range g[0].Group {
		if g[0].Group[i].Weight == 0 {
			g[0].Group[i].Weight = 1 // ip -j omits weight 1
		}
	}
	return g[0].Group, g[0].Resilient.IdleTimer, nil
}

// Buckets counts the group's buckets per nexthop id.
func (l *Lab) Buckets() (map[int]int, error) {
	out, err := inNS(l.Router, "ip", "-j", "nexthop", "bucket", "show", "id", strconv.Itoa(GroupID))
	if err != nil {
		return nil, err
	}
	var bs []struct {
		Bucket struct {
			NHID int `json:"nhid"`
		} `json:"bucket"`
	}
	if err := json.Unmarshal([]byte(out), &bs); err != nil {
		return nil, err
	}
	m := map[int]int{}
	for _, b := range bs {
		m[b.Bucket.NHID]++
	}
	return m, nil
}

// HostByAddr returns the XLB host with address a, or nil.
func (l *Lab) HostByAddr(a netip.Addr) *Host {
	for _, h := range l.Hosts {
		if h.Addr == a {
			return h
		}
	}
	return nil
}
