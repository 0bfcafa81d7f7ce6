package main

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/pkg/limits"
	"github.com/xlbproject/xlb/pkg/sched"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/pkg/weblisten"
)

var checkAbout = fmt.Sprintf(`Validates FILE (or standard input, "-"), prints the effective config (defaults
filled in) on stdout and exits 0, or prints every error with its file, line and
field on stderr and exits 1. Warnings go to stderr either way. After the config,
comments list each service's scheduler (a Maglev service's hash, table size
and the kernel memory of its table), for UDP services the two UDP timeouts,
the kernel memory of the UDP SNAT ports and each udp_unreplied_max, and each
service's address on this host: an address
of which interface (lo for a fleet VIP), what auto resolves to, or an address
the host does not hold, which the network must route here.

It checks what xlb's start checks, the data path's limits among them: at most
%d services, %d backends of all services, %d backends and %d port mappings
per service, %d flow_table.max_connections; ports 1-65535; numbers too large
for 64 bits are reported as such. It warns about
what the packaged unit would trip over: an admin or metrics port below 1024
(the unit has no CAP_NET_BIND_SERVICE), a state_dir outside a BPF filesystem
and outside /sys/fs/bpf, a bgp.router_id that is a service address.

--env-file names the service's environment file (the unit's EnvironmentFile=,
/etc/default/xlb or /etc/sysconfig/xlb), read as systemd reads it; repeat it
for several, later files overriding earlier ones. Then the check fails, as the
daemon's start would, when admin.auth is set without XLB_ADMIN_PASSWORD, when a
BGP peer's password_env is empty or unset, or when XLB_DISABLE_FEATURES names
an unknown feature; lines systemd would ignore are warnings. Without
--env-file the environment is not checked.`, config.MaxServices, config.MaxMembers, config.MaxBackends, config.MaxPortMappings, config.MaxFlowConnections)

// stdinSource names standard input in messages ("stdin:7: ports: ...").
const stdinSource = "stdin"

// check is `xlb check [--env-file FILE]... [--config] FILE|-`.
func check(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommand("xlb check", "xlb check [--env-file FILE]... [--config] FILE|-", checkAbout)
	cfgPath := c.fs.String("config", "/etc/xlb/xlb.yaml", "path of the config `FILE` to check, - for standard input (or give it as the argument)")
	var envFiles fileList
	c.fs.Var(&envFiles, "env-file", "check the environment the service gets from `FILE` too (repeatable)")
	if code, done := c.parse(args, 1, stdout, stderr); done {
		return code
	}
	path := *cfgPath
	if c.fs.NArg() == 1 {
		if flagSet(c.fs, "config") {
			return c.fail(stderr, "unexpected argument %q (the config is --config %s)", c.fs.Arg(0), path)
		}
		path = c.fs.Arg(0)
	}
	data, source, err := readConfig(path, stdin)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	cfg, warnings, cfgErr := config.Parse(data, source)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	env, envWarnings, envErr := loadEnv(envFiles)
	for _, w := range envWarnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if cfgErr == nil {
		if w := stateDirWarning(cfg.StateDir); w != "" {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
	}
	var listenErr error
	if cfgErr == nil {
		// The web config files, opened as the start opens them, and the
		// warnings it logs about listeners reachable without auth.
		var listenWarnings []string
		_, listenWarnings, listenErr = weblisten.OpenListeners(cfg, nil)
		for _, w := range listenWarnings {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
	}
	var errs []string
	for _, err := range []error{cfgErr, envErr, listenErr} {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	switch {
	case cfgErr != nil || envErr != nil || listenErr != nil:
	case len(envFiles) > 0:
		errs = append(errs, env.check(cfg, source)...)
	case cfg.Admin.Auth != nil:
		fmt.Fprintf(stderr, "warning: admin.auth is set: xlb starts only with %s in its environment; check that with --env-file /etc/default/xlb\n", api.EnvAdminPassword)
	}
	if len(errs) > 0 {
		fmt.Fprintln(stderr, strings.Join(errs, "\n"))
		return 1
	}
	out, err := cfg.Marshal()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	stdout.Write(out)
	io.WriteString(stdout, serviceSchedulers(cfg))
	io.WriteString(stdout, serviceUDP(cfg))
	io.WriteString(stdout, serviceAddresses(cfg, hostAddrs))
	return 0
}

// addressBook is what check asks the host about its addresses: the
// answers of pkg/hostnet, which resolves `listen: auto` at the start;
// tests give their own.
type addressBook interface {
	// DefaultRouteIPv4 is `listen: auto`: the primary IPv4 address of
	// the default route's interface, and that interface.
	DefaultRouteIPv4() (netip.Addr, string, error)
	// InterfaceOf names the interface that holds an address; an error
	// when none does.
	InterfaceOf(netip.Addr) (string, error)
}

type hostnetAddrs struct{}

func (hostnetAddrs) DefaultRouteIPv4() (netip.Addr, string, error) { return hostnet.DefaultRouteIPv4() }
func (hostnetAddrs) InterfaceOf(a netip.Addr) (string, error)      { return hostnet.InterfaceOf(a) }

// hostAddrs answers for this host (its network namespace).
var hostAddrs addressBook = hostnetAddrs{}

// serviceAddresses lists each service's effective address on this host
// as YAML comments that follow the effective config (DESIGN §9, issue 29
// item 8): an address of an interface (the ingress one, or lo for a
// fleet VIP), what auto resolves to, or an address this host does not
// hold, which the network must route here. It is information, not a
// check: the start resolves the addresses again.
func serviceAddresses(cfg *config.Config, book addressBook) string {
	var b strings.Builder
	b.WriteString("# The services' addresses on this host (xlb check resolves them; the start resolves them again):\n")
	for _, s := range cfg.ServiceList() {
		fmt.Fprintf(&b, "#   %s: %s\n", s.Name, effectiveAddress(s.Listen, book))
	}
	return b.String()
}

// serviceSchedulers lists each service's scheduler as YAML comments that
// follow the effective config (issue 30): the Maglev hash, the table size
// and where it comes from, and the kernel memory of one table (a service
// may hold two, one beside each of its two backend sets;
// docs/schedulers.md).
func serviceSchedulers(cfg *config.Config) string {
	var b strings.Builder
	b.WriteString("# The services' schedulers (the kernel memory of one table; a service may hold two, one per backend set):\n")
	for _, s := range cfg.ServiceList() {
		fmt.Fprintf(&b, "#   %s: %s\n", s.Name, describeScheduler(&s))
	}
	return b.String()
}

// serviceUDP lists, when the config has a proto udp service (issue 31),
// the UDP pairs' two timeouts, the kernel memory of the SNAT bitmaps'
// UDP half (which exists only while a UDP service does) and each UDP
// service's udp_unreplied_max, as comments that follow the effective
// config; "" without a UDP service.
func serviceUDP(cfg *config.Config) string {
	var b strings.Builder
	for _, s := range cfg.ServiceList() {
		if s.Proto != config.ProtoUDP {
			continue
		}
		if b.Len() == 0 {
			ft := cfg.FlowTable
			fmt.Fprintf(&b, "# UDP: a pair expires %d s after its last datagram without a reply (flow_table.udp_timeout_secs), %d s with one (udp_stream_timeout_secs); the SNAT ports' UDP half takes %s of kernel memory\n",
				int64(ft.UDPTimeout/time.Second), int64(ft.UDPStreamTimeout/time.Second), memory(udpSNATMemory(cfg.SNAT)))
		}
		from := "udp_unreplied_max"
		if s.UDPUnrepliedMax == 0 {
			from = "the default, a quarter of flow_table.max_connections"
		}
		fmt.Fprintf(&b, "#   %s: at most %d pairs without a reply (%s)\n", s.Name, cfg.UDPUnrepliedMax(&s), from)
	}
	return b.String()
}

// udpSNATMemory is the size of the SNAT bitmaps' UDP half: one bit per
// port of the range, in 64-bit words, per SNAT address (auto is one) and
// backend id (pkg/dataplane SNATSpace).
func udpSNATMemory(sn config.SNAT) uint64 {
	addrs := uint64(max(len(sn.IPs), 1))
	if sn.Auto {
		addrs = 1
	}
	words := (uint64(sn.PortHi) - uint64(sn.PortLo) + 1 + 63) / 64
	return limits.MaxBackends * addrs * words * 8
}

// describeScheduler is one service's line of serviceSchedulers.
func describeScheduler(s *config.Service) string {
	switch s.Scheduler {
	case config.SchedulerMaglev:
		m := s.TableSize()
		var from string
		switch {
		case s.Maglev != nil && s.Maglev.TableSize != 0:
			from = "maglev.table_size"
		case s.Provider.Static != nil:
			n := len(s.Provider.Static.Backends)
			from = fmt.Sprintf("the default for %d static backends, up to %d; more change it and move nearly every client: set maglev.table_size to keep it",
				n, int(m)/sched.MaglevSlotsPerMember)
		default:
			from = fmt.Sprintf("the Kubernetes default: %d endpoints at %d slots each, more make it overfull: set maglev.table_size for more", sched.MaglevMembers(m), sched.MinSlotsPerMember)
		}
		return fmt.Sprintf("maglev, hash %s, table of %d slots (%s), %s", s.MaglevHash(), m, from, memory(s.TableMemory()))
	case config.SchedulerWeightedRoundRobin:
		st := s.Provider.Static
		if st == nil {
			return "weighted_round_robin, a cycle as long as the endpoints' weights add up (divided by their gcd), 64 bytes per 32 connections of it"
		}
		var g, sum uint64
		for _, be := range st.Backends {
			w := uint64(max(be.Weight, 1))
			g, sum = gcd(g, w), sum+w
		}
		n := sum / max(g, 1)
		return fmt.Sprintf("weighted_round_robin, a cycle of %d connections with every backend routable, %s", n, memory(64*(1+(n+31)/32)))
	}
	return s.Scheduler + " (no table)"
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// memory renders a size in bytes, KiB or MiB.
func memory(b uint64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", b)
}

// effectiveAddress describes one listen address on this host.
func effectiveAddress(l config.Listen, book addressBook) string {
	if l.Auto {
		ip, ifname, err := book.DefaultRouteIPv4()
		if err != nil {
			return "auto, unresolved: " + err.Error()
		}
		return fmt.Sprintf("auto = %s, the primary IPv4 address of %s (the default route's interface)", ip, ifname)
	}
	if ifname, err := book.InterfaceOf(l.IP); err == nil {
		return fmt.Sprintf("%s, an address of %s", l.IP, ifname)
	}
	return fmt.Sprintf("%s, not an address of this host: must be routed here", l.IP)
}

// readConfig reads the config at path, standard input for "-", and the
// source name its messages use.
func readConfig(path string, stdin io.Reader) ([]byte, string, error) {
	if path == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, "", fmt.Errorf("config: reading standard input: %w", err)
		}
		return data, stdinSource, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("config: %w", err)
	}
	return data, path, nil
}

// fileList is a repeatable flag of file paths.
type fileList []string

var _ flag.Value = (*fileList)(nil)

func (l *fileList) String() string { return strings.Join(*l, ",") }

func (l *fileList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// bpffsRoot is where systemd mounts the BPF filesystem, and where the
// unit's ExecStartPre (xlb mount-bpffs) mounts one when it is missing.
const bpffsRoot = "/sys/fs/bpf"

// stateDirWarning says what is wrong with state_dir on this host, or "":
// the pins live only on a BPF filesystem, so state_dir must be on one, or
// under /sys/fs/bpf, where `xlb mount-bpffs` mounts one as systemd does.
// Elsewhere that mount would go over state_dir's parent and hide what the
// parent holds, and the packaged unit makes only /sys/fs/bpf/xlb
// writable. The nearest existing directory of state_dir decides.
func stateDirWarning(stateDir string) string {
	if rel, err := filepath.Rel(bpffsRoot, stateDir); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return ""
	}
	for dir := stateDir; ; dir = filepath.Dir(dir) {
		var st unix.Statfs_t
		err := unix.Statfs(dir, &st)
		if err == nil {
			if uint32(st.Type) == unix.BPF_FS_MAGIC {
				return ""
			}
			break
		}
		if dir == "/" {
			break
		}
	}
	parent := filepath.Dir(stateDir)
	return fmt.Sprintf("state_dir %s is not on a BPF filesystem: xlb mount-bpffs (the unit's ExecStartPre) would mount one over %s, hiding what that directory holds, and the packaged unit makes only %s/xlb writable; keep state_dir under %s (default %s/xlb)",
		stateDir, parent, bpffsRoot, bpffsRoot, bpffsRoot)
}
