package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/hostlab"
	"github.com/xlbproject/xlb/test/pkgtest"
)

// Package versions of the fleet test: v1 is installed by site.yml, v2 by
// the rolling upgrade (hot upgrade: xlb_upgrade_method reload), v3 by the
// rolling upgrade (drain and restart) that meets a failing host.
const (
	v1 = "0.1.0~fleet.1"
	v2 = "0.1.0~fleet.2"
	v3 = "0.1.0~fleet.3"
)

// shutdownTimeout is the lab's shutdown_timeout: short, so that each
// host's stop in the rollout is quick.
const shutdownTimeout = 2

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run `make deps` (Debian packages ansible-core, ansible-lint, ansible)", tool)
		}
	}
}

// TestLint runs ansible-lint with the production profile over ansible/ and
// ansible-playbook --syntax-check on every playbook.
func TestLint(t *testing.T) {
	requireTools(t, "ansible-lint", "ansible-playbook")
	dir, err := AnsibleDir()
	if err != nil {
		t.Fatal(err)
	}
	env := append(cleanEnv(os.Environ()), "ANSIBLE_CONFIG="+filepath.Join(dir, "ansible.cfg"), "NO_COLOR=1")
	lint := exec.Command("ansible-lint", "--offline", "--profile", "production", "--nocolor")
	lint.Dir, lint.Env = dir, env
	out, err := lint.CombinedOutput()
	if err != nil {
		t.Errorf("ansible-lint --profile production: %v\n%s", err, out)
	} else {
		t.Logf("ansible-lint: %s", strings.TrimSpace(Tail(string(out), 1)))
	}
	books, _ := filepath.Glob(filepath.Join(dir, "playbooks", "*.yml"))
	if len(books) < 2 {
		t.Fatalf("playbooks: %v", books)
	}
	for _, b := range books {
		cmd := exec.Command("ansible-playbook", "--syntax-check", b)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("ansible-playbook --syntax-check %s: %v\n%s", filepath.Base(b), err, out)
		}
	}
}

// rootfsSpec is hostlab's default root filesystem, which carries what
// Ansible needs on a managed Debian host (python3, python3-apt).
func rootfsSpec() hostlab.RootfsSpec { return hostlab.DefaultSpec() }

// fleet is the state the steps of TestFleet share.
type fleet struct {
	t      *testing.T
	l      *Lab
	dir    string // work directory: inventory, logs, reports
	inv    string
	pkgs   map[string]pkgtest.Packages
	sums   map[string]string
	mon    *Monitor
	work   *Workload
	phases []string // durations, for the final log
	// runs and cpu: the playbook runs and their CPU time in all
	// (Result.CPU), under mu (runs may go at once).
	mu   sync.Mutex
	runs int
	cpu  time.Duration
}

func (f *fleet) phase(name string, start time.Time) {
	d := time.Since(start).Round(100 * time.Millisecond)
	f.phases = append(f.phases, fmt.Sprintf("%-40s %s", name, d))
	f.t.Logf("%s took %s", name, d)
}

// labVars are the role's variables for the lab fleet (group xlb): each
// host's embedded speaker peers with the router's bird (router id: the
// default, auto, each host's own address toward the router; announce
// checks that they differ), and the rolling upgrade drains through the default
// hook, bgp, which checks the route with birdc on the router's control
// socket sock.
func labVars(sock, report string) map[string]any {
	backends := []map[string]string{}
	for i := 0; i < 3; i++ {
		backends = append(backends, map[string]string{
			"name": fmt.Sprintf("backend-%d", i+1), "ip": testnet.OneArmBackendIP(i).String(),
		})
	}
	return map[string]any{
		"xlb_name":                       "fleet",
		"xlb_vip":                        VIP.String(),
		"xlb_vip_interface":              "lo",
		"xlb_interfaces":                 []string{"eth0"},
		"xlb_xdp_mode":                   "native",
		"xlb_ports":                      []map[string]int{{"local_port": ServicePort, "remote_port": BackendPort}},
		"xlb_backends":                   backends,
		"xlb_shutdown_timeout":           shutdownTimeout,
		"xlb_ready_timeout":              20,
		"xlb_flow_table_max_connections": 65536,
		// Basic auth on the status API with a password that systemd's
		// env-file parsing would change unquoted.
		"xlb_admin_username": AdminUser,
		"xlb_admin_password": AdminPassword,
		"xlb_bgp": map[string]any{
			"local_asn":             XLBASN,
			"hold_time_secs":        HoldSecs,
			"graceful_restart_secs": GracefulRestartSecs,
			"peers":                 []map[string]any{{"address": RouterBack.String(), "asn": RouterASN}},
		},
		// Rolling upgrade: the bgp drain hook (the role's default) on the
		// router.
		"xlb_upstream_host":                "router",
		"xlb_bgp_route_command":            "birdc -s " + sock + " show route for {prefix} all",
		"xlb_drain_propagation_seconds":    1,
		"xlb_undrain_propagation_seconds":  2,
		"xlb_drain_wait_connections":       true,
		"xlb_drain_max_active_connections": 0,
		"xlb_drain_max_wait_seconds":       30,
		"xlb_drain_poll_seconds":           1,
		"xlb_probe_payload":                `xlb-probe\n`,
		"xlb_probe_expect":                 "xlb-probe",
		"xlb_probe_timeout":                10,
		"xlb_upgrade_report_file":          report,
	}
}

// TestFleet provisions three booted Debian hosts with site.yml, upgrades
// them with rolling-upgrade.yml under client traffic by hot upgrade
// (reload: no drain, no connection reset), drains a host whose hot
// upgrade fails verification, and then, by drain and restart, meets a
// host whose upgrade fails readiness.
func TestFleet(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("fleet: needs root (network namespaces, XDP, systemd-nspawn)")
	}
	requireTools(t, "ansible-playbook", "systemd-nspawn", "debootstrap", "nsenter", "dpkg-deb")
	total := time.Now()
	f := &fleet{t: t, pkgs: map[string]pkgtest.Packages{}, sums: map[string]string{}}
	f.dir = t.TempDir()

	if names, err := hostlab.CleanupStale(); err != nil || len(names) > 0 {
		t.Logf("hostlab leftovers removed: %v %v", names, err)
	}
	// The three package versions build at once (each in its own
	// directory; Go's build cache is shared), beside the root filesystem
	// and the lab.
	start := time.Now()
	type built struct {
		v   string
		p   pkgtest.Packages
		sum string
		err error
		at  time.Duration
	}
	pkgs := make(chan built, 3)
	for _, v := range []string{v1, v2, v3} {
		go func(v string) {
			b := built{v: v}
			if b.p, b.err = pkgtest.Build(filepath.Join(f.dir, "pkg-"+v), v); b.err == nil {
				b.sum, b.err = FileSHA256(b.p.Deb)
			}
			b.at = time.Since(start)
			pkgs <- b
		}(v)
	}
	waitPackages := func() {
		var errs []string
		for range 3 {
			b := <-pkgs
			if b.err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", b.v, b.err))
				continue
			}
			f.pkgs[b.v], f.sums[b.v] = b.p, b.sum
			t.Logf("package %s built after %s", b.v, b.at.Round(100*time.Millisecond))
		}
		if len(errs) > 0 {
			t.Fatalf("packages: %s", strings.Join(errs, "\n"))
		}
		f.phase("three package versions (at once)", start)
	}

	rootStart := time.Now()
	rootfs, debootstrapped, err := hostlab.EnsureRootfs(hostlab.CacheDir(), rootfsSpec(), t.Logf)
	if err != nil {
		waitPackages()
		t.Fatal(err)
	}
	f.phase(fmt.Sprintf("root filesystem (debootstrap: %v)", debootstrapped), rootStart)

	labStart := time.Now()
	l, err := Start(Options{Rootfs: rootfs, Logf: t.Logf})
	if err != nil {
		waitPackages()
		t.Fatal(err)
	}
	f.l = l
	stopSignals := testnet.CloseOnSignal(l.Close)
	t.Cleanup(func() {
		if f.work != nil {
			f.work.Stop()
		}
		if f.mon != nil {
			f.mon.Stop()
		}
		if err := l.Close(); err != nil {
			t.Errorf("fleet close: %v", err)
		}
		stopSignals()
		t.Logf("durations:\n%s\n%-40s %s\n%-40s %s", strings.Join(f.phases, "\n"), "TestFleet total", time.Since(total).Round(time.Second),
			fmt.Sprintf("CPU of %d ansible-playbook runs", f.runs), f.cpu.Round(time.Second))
	})
	f.phase("lab and three booted hosts", labStart)
	waitPackages()

	f.inv = filepath.Join(f.dir, "inventory.json")
	if err := l.Inventory(f.inv, labVars(l.Bird.Sock(), filepath.Join(f.dir, "report.json"))); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name string
		f    func(*testing.T)
	}{
		{"site check mode on new hosts", f.siteCheckNew},
		{"site", f.site},
		{"site again changes nothing", f.siteAgain},
		{"a rejected config or environment changes no host", f.rejected},
		{"every host announces and carries traffic", f.announce},
		{"config change rolls host by host", f.configChange},
		{"rolling hot upgrade under traffic", f.rollingUpgrade},
		{"a hot upgrade that fails verification drains the host", f.hotUpgradeFailsVerification},
		{"xlbctl drain withdraws the route", f.drainOne},
		{"failing host stops the rollout", f.failingHost},
		{"a host killed hard", f.killHost},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.f) {
			f.logJournals(t)
			return
		}
	}
}

// logJournals logs the tail of xlb.service's journal on every host and
// the router's BGP state: what a failed step leaves to read before the
// containers go.
func (f *fleet) logJournals(t *testing.T) {
	for _, h := range f.l.Hosts {
		out, err := h.Exec("journalctl", "--no-pager", "-o", "short-monotonic", "-n", "60", "-u", "xlb.service")
		t.Logf("%s: journalctl -u xlb.service (last 60 lines, %v):\n%s", h.Inventory, err, out)
	}
	out, _ := f.l.Bird.Birdc("show", "protocols", "all")
	t.Logf("router: birdc show protocols all:\n%s\nbird's log (tail):\n%s", out, Tail(f.l.Bird.Log(), 60))
}

// playbook runs a playbook with the package variables of version v.
func (f *fleet) playbook(t *testing.T, name, v string, extra map[string]any, args ...string) Result {
	t.Helper()
	vars := map[string]any{
		"xlb_package_version": v,
		"xlb_package_file":    f.pkgs[v].Deb,
		"xlb_package_sha256":  f.sums[v],
	}
	for k, val := range extra {
		vars[k] = val
	}
	f.mu.Lock()
	f.runs++
	seq := f.runs
	f.mu.Unlock()
	log := filepath.Join(f.dir, fmt.Sprintf("%s-%02d-%d.log", strings.TrimSuffix(name, ".yml"), seq, time.Now().UnixNano()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := Playbook(ctx, f.inv, name, vars, log, args...)
	f.mu.Lock()
	f.cpu += r.CPU
	f.mu.Unlock()
	t.Logf("%s %s: %s (CPU %s), recap %v", name, strings.Join(args, " "), r.Duration.Round(100*time.Millisecond), r.CPU.Round(100*time.Millisecond), r.Recap)
	return r
}

func (f *fleet) requireRecap(t *testing.T, r Result, hosts []string, check func(Recap) bool, what string) {
	t.Helper()
	for _, h := range hosts {
		rc, ok := r.Recap[h]
		if !ok || !check(rc) {
			t.Fatalf("%s: %s: recap %+v (present %v), want %s\n%s", strings.Join(r.Args, " "), h, rc, ok, what, Tail(r.Output, 150))
		}
	}
}

func (f *fleet) hostNames() []string {
	var n []string
	for _, h := range f.l.Hosts {
		n = append(n, h.Inventory)
	}
	return n
}

// siteCheckNew: check mode on hosts without XLB succeeds, reports what it
// would change and changes nothing.
func (f *fleet) siteCheckNew(t *testing.T) {
	start := time.Now()
	r := f.playbook(t, "site.yml", v1, nil, "--check", "--diff")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, Tail(r.Output, 150))
	}
	f.requireRecap(t, r, f.hostNames(), func(rc Recap) bool { return rc.Failed == 0 && rc.Unreachable == 0 && rc.Changed > 0 }, "no failure, some changes")
	for _, h := range f.l.Hosts {
		if out, err := h.Exec("sh", "-c", "dpkg-query --show xlb; ls /etc/xlb /etc/systemd/system/xlb-vip.service"); err == nil {
			t.Errorf("%s: check mode left something behind:\n%s", h.Inventory, out)
		}
	}
	f.phase("site.yml --check on new hosts", start)
}

// site: from nothing to three ready hosts.
func (f *fleet) site(t *testing.T) {
	start := time.Now()
	r := f.playbook(t, "site.yml", v1, nil)
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, Tail(r.Output, 200))
	}
	f.requireRecap(t, r, f.hostNames(), func(rc Recap) bool { return rc.Failed == 0 && rc.Unreachable == 0 }, "no failure")
	f.phase("site.yml on new hosts", start)
	for _, h := range f.l.Hosts {
		f.checkHost(t, h, v1, true)
		checkAdminPassword(t, h)
		out, err := h.Exec("ip", "-4", "-o", "address", "show", "dev", "lo")
		if err != nil || !strings.Contains(out, VIP.String()+"/32") {
			t.Errorf("%s: service address not on lo: %v\n%s", h.Inventory, err, out)
		}
		out, err = h.Exec("systemctl", "is-enabled", "xlb.service", "xlb-vip.service")
		if err != nil {
			t.Errorf("%s: units not enabled: %v\n%s", h.Inventory, err, out)
		}
		out, err = h.Exec("dpkg", "--get-selections", "xlb")
		if err != nil || !strings.Contains(out, "hold") {
			t.Errorf("%s: package not held at its version: %v %q", h.Inventory, err, out)
		}
	}
	// site.yml ends once every host announces the VIP (the role's wait,
	// xlb_bgp_announce_timeout): read at once, with no wait of our own.
	for _, h := range f.l.Hosts {
		d, err := h.Status()
		switch {
		case err != nil:
			t.Errorf("%s: status after site.yml: %v", h.Inventory, err)
		case d.BGP == nil || !slices.Equal(d.BGP.Announced, []string{vipPrefix.String()}):
			t.Errorf("%s: site.yml ended before the host announced %s: status bgp %+v", h.Inventory, vipPrefix, d.BGP)
		}
	}
	// The service answers through the router, which installs the route a
	// moment after the announcements: poll, within routeWait.
	c, failed, err := f.l.dialServiceWithin(routeWait, 5*time.Second)
	if err != nil {
		t.Fatalf("connection from the client after site.yml: %v", err)
	}
	defer c.c.Close()
	t.Logf("first connection through the router after site.yml: via %s, after %d failed attempts", c.Host, failed)
	if err := c.exchange("hello\n", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// checkHost checks a host's state through its status API.
func (f *fleet) checkHost(t *testing.T, h *Host, version string, ready bool) {
	t.Helper()
	var code int
	var body []byte
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, err = h.Get("/readyz")
		if (err == nil && (code == 200) == ready) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil || (code == 200) != ready {
		t.Errorf("%s: /readyz %d %q %v, want ready=%v", h.Inventory, code, body, err, ready)
	}
	d, err := h.Status()
	if err != nil {
		t.Errorf("%s: %v", h.Inventory, err)
		return
	}
	if d.Version != version {
		t.Errorf("%s: version %q, want %q", h.Inventory, d.Version, version)
	}
	if len(d.Dataplane.XDPAttachments) != 1 || d.Dataplane.XDPAttachments[0].Interface != "eth0" || d.Dataplane.XDPAttachments[0].Mode != "native" {
		t.Errorf("%s: XDP %+v, want eth0 native", h.Inventory, d.Dataplane.XDPAttachments)
	}
	if d.Listen.IP != VIP.String() || d.SNAT.IP != h.Addr.String() {
		t.Errorf("%s: listen %s snat %s, want %s and %s", h.Inventory, d.Listen.IP, d.SNAT.IP, VIP, h.Addr)
	}
}

// siteAgain: a second run changes nothing, in check mode or not.
func (f *fleet) siteAgain(t *testing.T) {
	start := time.Now()
	r := f.playbook(t, "site.yml", v1, nil)
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, Tail(r.Output, 150))
	}
	f.requireRecap(t, r, f.hostNames(), func(rc Recap) bool { return rc.Failed == 0 && rc.Changed == 0 }, "changed=0")
	f.phase("site.yml again (changed=0)", start)
	start = time.Now()
	r = f.playbook(t, "site.yml", v1, nil, "--check")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, Tail(r.Output, 150))
	}
	f.requireRecap(t, r, f.hostNames(), func(rc Recap) bool { return rc.Failed == 0 && rc.Changed == 0 }, "changed=0 in check mode")
	f.phase("site.yml --check again (changed=0)", start)
	// Each tag alone works and changes nothing either. The three runs
	// change nothing, so they run at once (each its own ansible-playbook).
	start = time.Now()
	tags := []string{"xlb_install", "xlb_configure", "xlb_run"}
	results := make([]Result, len(tags))
	var wg sync.WaitGroup
	for i, tag := range tags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = f.playbook(t, "site.yml", v1, nil, "--tags", tag)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("%v\n%s", r.Err, Tail(r.Output, 150))
		}
		f.requireRecap(t, r, f.hostNames(), func(rc Recap) bool { return rc.Failed == 0 && rc.Changed == 0 }, "changed=0 with --tags "+tags[i])
	}
	f.phase("site.yml --tags each tag, at once (changed=0)", start)
}

// startTraffic starts the monitor and the client once.
func (f *fleet) startTraffic(t *testing.T) {
	if f.work != nil {
		return
	}
	f.mon = f.l.StartMonitor()
	w, err := f.l.StartWorkload(3, 40, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	f.work = w
	st := w.Stats()
	t.Logf("client: %d long-lived connections per host %v, a new connection every %v", st.LongOpened, hostCounts(f.l, st.LongOpen), st.ShortPeriod)
	// Let traffic flow before the first drain.
	time.Sleep(3 * time.Second)
}

func logReport(t *testing.T, entries []ReportEntry) {
	for _, e := range entries {
		active := "-"
		if e.ActiveAtStop != nil {
			active = fmt.Sprint(*e.ActiveAtStop)
		}
		t.Logf("report %s: %s by %s, %s -> %s, xdp %v, drained %v for %.1f s, active at the swap %s %s",
			e.Host, e.Result, e.Method, e.VersionBefore, e.VersionAfter, e.XDP, e.Drained, e.DrainedSeconds, active, e.Message)
	}
}

// reportOfAll reads the change report at path, logs it and requires one
// entry per host.
func (f *fleet) reportOfAll(t *testing.T, path string) []ReportEntry {
	t.Helper()
	entries, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, entries)
	if len(entries) != len(f.l.Hosts) {
		t.Fatalf("report has %d hosts, want %d: %+v", len(entries), len(f.l.Hosts), entries)
	}
	return entries
}

// checkActiveAtStop checks what the drained host's connection wait left
// for the stop: no connection that its client still holds. Every pair
// still counted is one of the long-lived connections that the drain moved
// (moved of them broke on it): the keepalive probes of BackendKeepAlive
// clear most of those, but not one whose backend was still waiting for
// the ACK of its last echo when the route moved. That ACK went to another
// host, a backend with unacknowledged data retransmits instead of probing
// (for tcp_retries2, about 15 minutes), each retransmission refreshes the
// pair on the drained host, and no FIN or RST from the client reaches it.
// The client's delayed ACK (up to 40 ms per exchange) makes that race
// rare but real; in production it is why the wait has a maximum.
func (f *fleet) checkActiveAtStop(t *testing.T, e ReportEntry, moved int) {
	t.Helper()
	switch {
	case e.ActiveAtStop == nil:
		t.Errorf("report %s: no active connections recorded at the stop", e.Host)
	case *e.ActiveAtStop > moved:
		t.Errorf("report %s: %d active connections at the stop, more than the %d long-lived connections the drain moved off it",
			e.Host, *e.ActiveAtStop, moved)
	case *e.ActiveAtStop > 0:
		t.Logf("report %s: %d pairs still active at the stop, of the %d long-lived connections the drain moved off it (a backend retransmitting an echo whose ACK went elsewhere)",
			e.Host, *e.ActiveAtStop, moved)
	}
}

// checkResetBound checks that the long-lived connections reset on each
// drained host are bounded by those it carried when its path left the
// router's route: each moves with the router's rehash (and is reset by the
// host it lands on), and no new connection reaches the host after that.
// breakSlack widens a drain interval when a long-lived connection's break
// is attributed to it: the client notices a reset at its next exchange.
const breakSlack = time.Second

func (f *fleet) checkResetBound(t *testing.T, resets map[string]int, since time.Time) {
	t.Helper()
	for _, h := range f.l.Hosts {
		for _, iv := range f.mon.IntervalsSince(h, since) {
			to := iv.To
			if to.IsZero() {
				to = time.Now()
			}
			// The same slack as checkTraffic's Drained: a break counted as
			// "while drained" may lie up to breakSlack before From, so the
			// connections it may have broken are those open at From-slack.
			atStart, opened := f.work.Carried(h.Addr, iv.From.Add(-breakSlack), to)
			if resets[h.Inventory] > atStart+opened {
				t.Errorf("%s: %d long-lived connections reset, but it carried only %d when drained (+%d opened on it during the drain)",
					h.Inventory, resets[h.Inventory], atStart, opened)
			} else {
				t.Logf("%s: %d long-lived connections reset while drained; it carried %d when its path left, %d more landed on it meanwhile",
					h.Inventory, resets[h.Inventory], atStart, opened)
			}
		}
	}
}

func hostCounts(l *Lab, m map[netip.Addr]int) string {
	var parts []string
	for _, h := range l.Hosts {
		parts = append(parts, fmt.Sprintf("%s=%d", h.Inventory, m[h.Addr]))
	}
	return strings.Join(parts, " ")
}

// movedWindow bounds how long after a change of the router's route a
// long-lived connection that the change moved to another host breaks: it
// notices at its next exchange (within LongLivedInterval), by a reset from
// the host it landed on or, at worst, the exchange's 5 s timeout.
const movedWindow = LongLivedInterval + 5*time.Second + breakSlack

// broken counts the long-lived connections that broke in a step, per
// host, by cause.
type broken struct {
	// drained: the host's path had left the router's route (the
	// connection moved with it and was reset where it landed).
	drained map[string]int
	// moved: the host was in service, and the router's route had just
	// changed: its hash-threshold rehash moved the connection to another
	// host, which reset it.
	moved map[string]int
}

func (b broken) total() int {
	n := 0
	for _, m := range []map[string]int{b.drained, b.moved} {
		for _, v := range m {
			n += v
		}
	}
	return n
}

// checkTraffic checks the client's record since `since`: no failed new
// connection, and every long-lived connection that broke was on a host
// whose path was out of the router's route at that moment or, with
// rehash, on a host in service shortly after a change of the route (it
// returns both counts per host). Any other break is an error.
func (f *fleet) checkTraffic(t *testing.T, since time.Time, rehash bool) broken {
	t.Helper()
	st := f.work.Stats()
	var lines []string
	for _, fl := range st.Failures {
		if !fl.At.Before(since) {
			lines = append(lines, fl.At.Format("15:04:05.000")+" "+fl.Err)
		}
	}
	if len(lines) > 0 {
		t.Errorf("%d failed new connections:\n%s\nrouter's route changes: %s", len(lines), strings.Join(lines, "\n"), f.changes(since))
	}
	b := broken{drained: map[string]int{}, moved: map[string]int{}}
	changes := f.mon.Changes(since.Add(-movedWindow))
	for _, br := range st.Breaks {
		if br.At.Before(since) {
			continue
		}
		h := f.l.HostByAddr(br.Host)
		if h == nil {
			t.Errorf("long-lived connection broke on unknown host %s: %s", br.Host, br.Err)
			continue
		}
		if f.mon.Drained(h, br.At, breakSlack) {
			b.drained[h.Inventory]++
			continue
		}
		moved := false
		for _, c := range changes {
			if !br.At.Before(c.At.Add(-breakSlack)) && !br.At.After(c.At.Add(movedWindow)) {
				moved = true
			}
		}
		if rehash && moved {
			b.moved[h.Inventory]++
			continue
		}
		t.Errorf("long-lived connection on %s broke at %s while %s was in service (opened %s; route changes %s): %s",
			h.Inventory, br.At.Format("15:04:05.000"), h.Inventory, br.Opened.Format("15:04:05.000"), f.changes(since), br.Err)
	}
	if n, last := f.mon.Errors(); n > 0 {
		t.Logf("monitor: %d failed samples, last: %s", n, last)
	}
	return b
}

// changes formats the router's route changes since `since`.
func (f *fleet) changes(since time.Time) string {
	var parts []string
	for _, c := range f.mon.Changes(since) {
		var hs []string
		for _, a := range c.Paths {
			if h := f.l.HostByAddr(a); h != nil {
				hs = append(hs, h.Inventory)
			} else {
				hs = append(hs, a.String())
			}
		}
		parts = append(parts, c.At.Format("15:04:05.000")+" ["+strings.Join(hs, " ")+"]")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (f *fleet) perHost(m map[string]int) string {
	var parts []string
	for _, h := range f.l.Hosts {
		parts = append(parts, fmt.Sprintf("%s=%d", h.Inventory, m[h.Inventory]))
	}
	return strings.Join(parts, " ")
}

func (f *fleet) logTraffic(t *testing.T, since time.Time, b broken) {
	st := f.work.Stats()
	failed := 0
	for _, fl := range st.Failures {
		if !fl.At.Before(since) {
			failed++
		}
	}
	t.Logf("client: %d new connections in all, %d failed in this step; per host %s; long-lived: %d opened, %d echoes, open now %s; "+
		"broken in this step on hosts out of the route: %s; moved by the router's rehash on hosts in service: %s",
		st.NewOK+st.NewFailed, failed, hostCounts(f.l, st.NewByHost), st.LongOpened, st.Exchanges,
		hostCounts(f.l, st.LongOpen), f.perHost(b.drained), f.perHost(b.moved))
}

// checkRouteKept checks that the router had the VIP's route in every
// sample since counts0 (kernel and bird) and that no host's path left it.
func (f *fleet) checkRouteKept(t *testing.T, what string, counts0 RouteCounts, since time.Time) {
	t.Helper()
	c := f.mon.Counts().Sub(counts0)
	if c.Samples == 0 || c.KernelMissing > 0 || c.BirdMissing > 0 {
		t.Errorf("router during %s: %s; want the route in every sample", what, c)
	} else {
		t.Logf("router during %s: %s (every %v)", what, c, pollInterval)
	}
	for _, h := range f.l.Hosts {
		if ivs := f.mon.IntervalsSince(h, since); len(ivs) != 0 {
			t.Errorf("%s: its path left the router's route %d times during %s, want 0: %+v (changes %s)", h.Inventory, len(ivs), what, ivs, f.changes(since))
		}
	}
}

// rollingUpgrade: v1 -> v2 on all hosts while the client runs, by hot
// upgrade (xlb_upgrade_method: reload): no host is drained, and not one
// connection, new or long-lived, fails or is reset.
func (f *fleet) rollingUpgrade(t *testing.T) {
	f.startTraffic(t)
	since := time.Now()
	start := time.Now()
	counts0 := f.mon.Counts()
	report := filepath.Join(f.dir, "report.json")
	os.Remove(report)
	exchanges := f.work.Stats().Exchanges
	r := f.playbook(t, "rolling-upgrade.yml", v2, map[string]any{"xlb_upgrade_method": "reload"})
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, Tail(r.Output, 200))
	}
	f.requireRecap(t, r, f.hostNames(), func(rc Recap) bool { return rc.Failed == 0 && rc.Unreachable == 0 }, "no failure")
	f.phase("rolling-upgrade.yml v1 -> v2 by reload (3 hosts)", start)
	t.Logf("rollout summary printed by the playbook:\n%s", SummaryBlock(r.Output))
	for _, line := range strings.Split(r.Output, "\n") {
		if strings.Contains(line, "handed over to") || strings.Contains(line, "xlb-probe: connected") {
			t.Logf("%s", strings.TrimSpace(line))
		}
	}

	for _, h := range f.hostNames() {
		for _, task := range []string{
			"Check the package's SHA-256 before installing it",
			"Check that a new process took over",
			"Open a connection to the service through this host",
		} {
			if st := TaskStatus(r.Output, task, h); st != "ok" {
				t.Errorf("%s: %q: %q, want ok", h, task, st)
			}
		}
	}
	for _, e := range f.reportOfAll(t, report) {
		if e.Result != "upgraded" || e.Method != "reload" || e.VersionBefore != v1 || e.VersionAfter != v2 || !slices.Equal(e.XDP, []string{"eth0=native"}) || e.Drained {
			t.Errorf("report: %+v, want upgraded by reload %s -> %s, eth0=native, not drained", e, v1, v2)
		}
		// The hand-off carried the connections the host had.
		if e.ActiveAtStop == nil || *e.ActiveAtStop == 0 {
			t.Errorf("report %s: active connections at the hand-off %v, want some (the client's long-lived ones)", e.Host, e.ActiveAtStop)
		}
	}
	// The route never left the router, no host's path left it; every
	// host runs v2.
	f.checkRouteKept(t, "the rolling hot upgrade", counts0, since)
	for _, h := range f.l.Hosts {
		f.checkHost(t, h, v2, true)
	}
	// Traffic kept flowing: new connections after the rollout, long-lived
	// exchanges through it.
	before := f.work.Stats().NewOK
	time.Sleep(2 * time.Second)
	st := f.work.Stats()
	if st.NewOK <= before {
		t.Errorf("no new connections completed after the rollout")
	}
	if st.Exchanges <= exchanges {
		t.Errorf("no long-lived exchange during and after the rollout")
	}
	// checkTraffic fails on any failed new connection and on any
	// long-lived connection that broke on a host in service, which is
	// every host here.
	f.logTraffic(t, since, f.checkTraffic(t, since, false))
	breaks := 0
	for _, b := range st.Breaks {
		if !b.At.Before(since) {
			breaks++
		}
	}
	if breaks != 0 {
		t.Errorf("%d long-lived connections broke during the hot upgrade, want 0", breaks)
	} else {
		t.Logf("hot upgrade of %d hosts: 0 connections reset, 0 new connections failed (%d long-lived exchanges during and after it)", len(f.l.Hosts), st.Exchanges-exchanges)
	}
}

// brokenConfig is host 2's xlb.yaml with every backend replaced by an
// address nobody holds: xlb starts, but no backend becomes routable.
func brokenConfig(cfg string) string {
	for i := 0; i < 3; i++ {
		cfg = strings.ReplaceAll(cfg, testnet.OneArmBackendIP(i).String(), netip.AddrFrom4([4]byte{192, 0, 2, byte(201 + i)}).String())
	}
	return "# fleet test: the same service with backends nobody holds\n" + cfg
}

// failingHost: the upgrade to v3 (from an apt repository, by drain and
// restart) makes xlb2 fail readiness; the rollout stops there with xlb2
// drained, xlb1 on v3, xlb3 still on v2, and the client never notices.
func (f *fleet) failingHost(t *testing.T) {
	f.startTraffic(t)
	start := time.Now()
	repo, err := AptRepo(f.pkgs[v3].Deb)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, h := range f.l.Hosts {
		for name, b := range repo {
			if err := h.Container.WriteFile(ctx, "/var/tmp/xlb-repo/"+name, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The lab has no route to a mirror: the local repository is the
		// only apt source.
		if err := h.Container.WriteFile(ctx, "/etc/apt/sources.list.d/xlb-fleet.list", []byte("deb [trusted=yes] copy:/var/tmp/xlb-repo ./\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := h.Exec("sh", "-c", "mv /etc/apt/sources.list /etc/apt/sources.list.fleet-off 2>/dev/null; true"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	bad := f.l.Hosts[1]
	cfg, err := bad.Exec("cat", "/etc/xlb/xlb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Container.WriteFile(ctx, "/etc/xlb/fleet-broken.yaml", []byte(brokenConfig(cfg)), 0o644); err != nil {
		t.Fatal(err)
	}
	dropin := "# fleet test: the next start uses a config whose backends nobody holds\n[Service]\nExecStart=\nExecStart=/usr/bin/xlb --config /etc/xlb/fleet-broken.yaml\n"
	if err := bad.Container.WriteFile(ctx, "/etc/systemd/system/xlb.service.d/50-fleet-broken.conf", []byte(dropin), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := bad.Exec("systemctl", "daemon-reload"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	since := time.Now()
	report := filepath.Join(f.dir, "report.json")
	os.Remove(report)
	r := f.playbook(t, "rolling-upgrade.yml", v3, map[string]any{"xlb_package_source": "repository", "xlb_upgrade_method": "restart"})
	f.phase("rolling-upgrade.yml v2 -> v3, xlb2 fails", start)
	if r.Err == nil {
		t.Fatalf("the rollout succeeded; want it to stop at %s\n%s", bad.Inventory, Tail(r.Output, 100))
	}
	t.Logf("rollout summary printed by the playbook:\n%s", SummaryBlock(r.Output))
	if rc := r.Recap[bad.Inventory]; rc.Failed != 1 {
		t.Errorf("%s: recap %+v, want failed=1", bad.Inventory, rc)
	}
	if rc, ok := r.Recap["xlb3"]; ok && rc.OK > 0 {
		t.Errorf("xlb3 ran tasks after the failure: %+v", rc)
	}
	// xlb1's package came from the repository and was checked.
	if st := TaskStatus(r.Output, "Download the package from the repositories (Debian)", "xlb1"); st != "changed" {
		t.Errorf("xlb1: download from the repository: %q, want changed", st)
	}
	if st := TaskStatus(r.Output, "Check the package's SHA-256 before installing it", "xlb1"); st != "ok" {
		t.Errorf("xlb1: SHA-256 check: %q, want ok", st)
	}
	entries, err := ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, entries)
	byHost := map[string]ReportEntry{}
	for _, e := range entries {
		byHost[e.Host] = e
	}
	if e := byHost["xlb1"]; e.Result != "upgraded" || e.Method != "restart" || !e.Drained || e.VersionBefore != v2 || e.VersionAfter != v3 {
		t.Errorf("report xlb1: %+v, want upgraded by drain and restart %s -> %s", e, v2, v3)
	}
	// The role's drain outlives the restart (issue 28), so /readyz answers
	// draining, which the role's start wait accepts; the verification
	// then fails on the routable backends.
	if e := byHost["xlb2"]; e.Result != "FAILED" || !e.Drained || !strings.Contains(e.Message, "routable backends") {
		t.Errorf("report xlb2: %+v, want FAILED on its routable backends, drained", e)
	}
	if _, ok := byHost["xlb3"]; ok || len(entries) != 2 {
		t.Errorf("report: %+v, want xlb1 and xlb2 only", entries)
	}

	// xlb2 stays drained (no path via it); the others serve.
	want := hostAddrs(f.l.Hosts[0], f.l.Hosts[2])
	paths, err := f.l.KernelPaths()
	slices.SortFunc(paths, netip.Addr.Compare)
	if err != nil || !slices.Equal(paths, want) {
		t.Errorf("router's kernel route via %v (%v), want %v (xlb2 drained)", paths, err, want)
	}
	if bird, out := f.l.BirdPaths(); !slices.Equal(bird, want) {
		t.Errorf("bird's routes via %v, want %v (xlb2 drained):\n%s", bird, want, out)
	}
	f.checkHost(t, f.l.Hosts[0], v3, true)
	f.checkHost(t, f.l.Hosts[2], v2, true)
	// The drain the role set before the restart outlives it (kept in
	// /run/xlb, issue 28): readiness says draining before it says that
	// no backend is routable.
	code, body, err := bad.Get("/readyz")
	if err != nil || code != 503 || !strings.Contains(string(body), "draining") {
		t.Errorf("%s: /readyz %d %q %v, want 503 draining (the role's drain kept across the restart)", bad.Inventory, code, body, err)
	}
	// The others keep serving: new connections complete, none on xlb2.
	st0 := f.work.Stats()
	time.Sleep(3 * time.Second)
	st1 := f.work.Stats()
	if st1.NewOK-st0.NewOK < 10 {
		t.Errorf("only %d new connections in 3 s after the stopped rollout", st1.NewOK-st0.NewOK)
	}
	if st1.NewByHost[bad.Addr] != st0.NewByHost[bad.Addr] {
		t.Errorf("new connections reached the drained %s", bad.Inventory)
	}
	b := f.checkTraffic(t, since, true)
	f.logTraffic(t, since, b)
	f.checkResetBound(t, b.drained, since)
	f.checkActiveAtStop(t, byHost["xlb1"], b.drained["xlb1"])
	t.Logf("restart rollout with the bgp hook: router's route changes %s", f.changes(since))
	t.Logf("restart rollout with the bgp hook: long-lived connections broken: %d; on hosts out of the route (drained): %s; "+
		"on hosts in service, moved by the router's rehash: %s", b.total(), f.perHost(b.drained), f.perHost(b.moved))
}
