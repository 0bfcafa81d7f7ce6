package hostlab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/test/lab"
)

// shutdownTimeout is the lab config's shutdown_timeout (seconds): short,
// so that every stop in the test stays quick.
const shutdownTimeout = 3

const listenAddr = "192.0.2.10:80"

// labConfig is /etc/xlb/xlb.yaml for the booted host: the one-arm lab,
// listen 192.0.2.10:80, the lab's backends on 8080, admin and metrics on
// their defaults (127.0.0.1:9090, 0.0.0.0:9642).
func labConfig(l *lab.Lab) string {
	var b strings.Builder
	b.WriteString("# written by test/hostlab\nname: hostlab\nlisten:\n  ip: 192.0.2.10\nports:\n  - local_port: 80\n    remote_port: 8080\n")
	b.WriteString("provider:\n  static:\n    backends:\n")
	for i, be := range l.Backends {
		fmt.Fprintf(&b, "      - name: backend-%d\n        ip: %s\n", i+1, be.IP())
	}
	b.WriteString("interfaces: [eth0]\nxdp_mode: native\nsnat:\n  ip: 192.0.2.10\n  port_range: \"40000-59999\"\n")
	fmt.Fprintf(&b, "shutdown_timeout: %d\nflow_table:\n  max_connections: 65536\n", shutdownTimeout)
	return b.String()
}

// host is the booted container in the lab's XLB namespace.
type host struct {
	t    *testing.T
	c    *Container
	l    *lab.Lab
	http *http.Client
}

// sh runs a command inside the container and fails the test on error.
func (h *host) sh(args ...string) string {
	h.t.Helper()
	out, err := h.try(args...)
	if err != nil {
		h.t.Fatalf("%v\n%s", err, out)
	}
	return out
}

func (h *host) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return h.c.Exec(ctx, nil, args...)
}

func (h *host) write(path, content string, mode int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.c.WriteFile(ctx, path, []byte(content), fsMode(mode)); err != nil {
		h.t.Fatal(err)
	}
}

// show returns xlb.service's properties.
func (h *host) show(props ...string) map[string]string {
	h.t.Helper()
	out := h.sh(append([]string{"systemctl", "show", "xlb.service"}, prefixEach("--property=", props)...)...)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

func fsMode(m int) os.FileMode { return os.FileMode(m) }

func prefixEach(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}

// get fetches an admin URL path from inside the XLB namespace.
func (h *host) get(path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:9090"+path, nil)
	resp, err := h.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (h *host) readyz() (int, string) {
	code, body, err := h.get("/readyz")
	if err != nil {
		return 0, err.Error()
	}
	return code, strings.TrimSpace(body)
}

// statusVersion is the version field of /api/v1/status.
func (h *host) statusVersion() string {
	h.t.Helper()
	code, body, err := h.get("/api/v1/status")
	if err != nil || code != 200 {
		h.t.Fatalf("GET /api/v1/status: %d %v\n%s", code, err, body)
	}
	var doc struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		h.t.Fatalf("status document: %v\n%s", err, body)
	}
	return doc.Version
}

// xdpAttached reports whether eth0 of the XLB namespace has an XDP program.
func (h *host) xdpAttached() bool {
	h.t.Helper()
	mode, err := h.l.XLB.XDPAttachMode("eth0")
	if err != nil {
		h.t.Fatal(err)
	}
	return mode != 0
}

// waitFor polls cond every 100 ms until it holds or timeout passes.
func (h *host) waitFor(what string, timeout time.Duration, cond func() (bool, string)) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not within %v; last state: %s\n%s", what, timeout, state, h.journal(""))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// journal returns xlb.service's journal after cursor (all of it when
// cursor is empty).
func (h *host) journal(cursor string) string {
	args := []string{"journalctl", "--no-pager", "-o", "short-monotonic", "-u", "xlb.service"}
	if cursor != "" {
		args = append(args, "--after-cursor="+cursor)
	}
	out, _ := h.try(args...)
	return out
}

// cursor is the position of the journal's latest entry, for journal.
func (h *host) cursor() string {
	h.t.Helper()
	out := h.sh("journalctl", "--no-pager", "-n", "1", "-o", "cat", "--show-cursor")
	i := strings.LastIndex(out, "-- cursor: ")
	if i < 0 {
		h.t.Fatalf("no journal cursor in %q", out)
	}
	return strings.TrimSpace(out[i+len("-- cursor: "):])
}

func (h *host) mainPID() int {
	pid, _ := strconv.Atoi(h.show("MainPID")["MainPID"])
	return pid
}

// traffic sends n echo connections through XLB and checks every byte, the
// round robin (per-backend counts differ by at most one) and that backends
// see only XLB's SNAT address.
func (h *host) traffic(n int) {
	h.t.Helper()
	h.l.ResetStats()
	rng := rand.New(rand.NewPCG(uint64(n), 5))
	for i := 0; i < n; i++ {
		if err := echoThrough(h.l.Client(), rng, 1+rng.IntN(8<<10)); err != nil {
			h.t.Fatalf("connection %d of %d through %s: %v", i+1, n, listenAddr, err)
		}
	}
	var counts []int
	h.waitFor("backends complete the connections", 30*time.Second, func() (bool, string) {
		done := 0
		counts = counts[:0]
		for _, b := range h.l.Backends {
			st := b.Stats()
			done += st.Completed
			counts = append(counts, st.Accepted)
		}
		return done >= n, fmt.Sprintf("completed %d of %d, accepted %v", done, n, counts)
	})
	lo, hi, sum := counts[0], counts[0], 0
	for _, c := range counts {
		lo, hi, sum = min(lo, c), max(hi, c), sum+c
	}
	if sum != n || hi-lo > 1 {
		h.t.Fatalf("per-backend connections %v: want %d in total, differing by at most one", counts, n)
	}
	for _, b := range h.l.Backends {
		for addr := range b.Stats().Remotes {
			if addr != lab.XLBFrontIP {
				h.t.Fatalf("backend %s saw source %s, want only %s", b.IP(), addr, lab.XLBFrontIP)
			}
		}
	}
}

func echoThrough(client *lab.Host, rng *rand.Rand, size int) error {
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(rng.Uint32())
	}
	return client.EchoCheck(listenAddr, msg, 20*time.Second)
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// exposure runs systemd-analyze security on unit and returns its overall
// exposure (0 safest … 10).
func (h *host) exposure(unit string) float64 {
	h.t.Helper()
	out := h.sh("systemd-analyze", "security", "--no-pager", unit)
	m := exposureRE.FindStringSubmatch(out)
	if m == nil {
		h.t.Fatalf("systemd-analyze security %s: no overall exposure:\n%s", unit, out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestPackagedService installs the .deb (then the .rpm) on a booted Debian
// with systemd as PID 1 in the lab's XLB namespace and drives the service
// through its life: install without start, start until ready, traffic,
// SIGKILL and restart, upgrade with and without restart, stop through the
// shutdown window, removal and purge.
func TestPackagedService(t *testing.T) {
	setup(t)
	testStart := time.Now()
	l := lab.New(t, lab.Options{})
	bootStart := time.Now()
	c, err := Boot(Options{Rootfs: rootfs, Name: "hostlab-" + l.Prefix, NetnsPath: l.XLB.Path, Files: pkgFiles}, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot to is-system-running=running: %s", time.Since(bootStart).Round(10*time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("container console (tail):\n%s", tail(c.Console(), 40))
		}
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("container: %v", err)
		}
		t.Logf("container poweroff and cleanup: %s", time.Since(start).Round(10*time.Millisecond))
	})
	stopSignals := l.CloseOnSignal(func() {
		c.Close()
		if workDir != "" {
			os.RemoveAll(workDir)
		}
	})
	t.Cleanup(stopSignals)

	h := &host{t: t, c: c, l: l, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return l.XLB.Dial(ctx, addr) },
	}}}
	if out := h.sh("systemctl", "is-system-running"); strings.TrimSpace(out) != "running" {
		t.Logf("container state %s; failed units:\n%s", out, h.sh("systemctl", "--failed", "--no-legend"))
	}
	config := labConfig(l)

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, func(t *testing.T) { h.t = t; f(t) }) {
			t.FailNow()
		}
		h.t = t
	}

	var before, after float64
	step("exposure-bare-unit", func(t *testing.T) {
		h.write("/etc/systemd/system/xlb-bare.service", "[Service]\nType=notify\nExecStart=/usr/bin/xlb --config /etc/xlb/xlb.yaml\n", 0o644)
		h.sh("systemctl", "daemon-reload")
		before = h.exposure("xlb-bare.service")
		h.sh("rm", "/etc/systemd/system/xlb-bare.service")
		h.sh("systemctl", "daemon-reload")
	})

	step("install-does-not-start", func(t *testing.T) {
		out := h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(0))
		if !strings.Contains(out, "not enabled and not started") {
			t.Errorf("install output lacks the not-started notice:\n%s", out)
		}
		if st, _ := h.try("systemctl", "is-active", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("after install: is-active %q, want inactive", st)
		}
		if st, _ := h.try("systemctl", "is-enabled", "xlb"); strings.TrimSpace(st) != "disabled" {
			t.Errorf("after install: is-enabled %q, want disabled", st)
		}
		if h.xdpAttached() {
			t.Error("an XDP program is attached right after install")
		}
		if mode := strings.TrimSpace(h.sh("stat", "-c", "%a %U", "/etc/default/xlb")); mode != "600 root" {
			t.Errorf("/etc/default/xlb: %s, want 600 root", mode)
		}
		if out := h.sh("xlb", "--version"); !strings.Contains(out, v1) {
			t.Errorf("xlb --version = %q, want %s", out, v1)
		}
		// The packaged example config validates on the host.
		h.sh("xlb", "check", "--config", "/etc/xlb/xlb.yaml")
		out, err := h.try("systemd-analyze", "verify", "--man=no", "/lib/systemd/system/xlb.service")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("systemd-analyze verify in the booted host: %v\n%s", err, out)
		}
	})

	step("exposure-packaged-unit", func(t *testing.T) {
		after = h.exposure("xlb.service")
		t.Logf("systemd-analyze security: bare Type=notify unit %.1f, packaged xlb.service %.1f", before, after)
		if after >= before || after > 3.0 {
			t.Errorf("exposure %.1f (bare unit %.1f): want lower than the bare unit and at most 3.0", after, before)
		}
	})

	h.write("/etc/xlb/xlb.yaml", config, 0o644)
	h.sh("xlb", "check", "--config", "/etc/xlb/xlb.yaml")

	step("each-capability-is-needed", func(t *testing.T) {
		// The unit keeps only CAP_BPF and CAP_NET_ADMIN; without either
		// of them the daemon fails to start.
		for _, capName := range []string{"CAP_BPF", "CAP_NET_ADMIN"} {
			h.write("/run/systemd/system/xlb.service.d/drop-cap.conf", "[Service]\nCapabilityBoundingSet=~"+capName+"\nRestart=no\n", 0o644)
			h.sh("systemctl", "daemon-reload")
			since := h.cursor()
			if out, err := h.try("systemctl", "start", "xlb"); err == nil {
				t.Errorf("xlb started without %s:\n%s", capName, out)
				h.sh("systemctl", "stop", "xlb")
			}
			j := h.journal(since)
			if !strings.Contains(j, "xlb failed") {
				t.Errorf("without %s: no daemon error in the journal:\n%s", capName, j)
			}
			t.Logf("without %s: %s", capName, clip(firstMatch(j, "xlb failed"), 240))
			h.sh("rm", "-r", "/run/systemd/system/xlb.service.d")
			h.sh("systemctl", "daemon-reload")
			h.sh("systemctl", "reset-failed", "xlb")
		}
	})

	step("start-returns-when-ready", func(t *testing.T) {
		h.sh("systemctl", "enable", "xlb")
		start := time.Now()
		h.sh("systemctl", "start", "xlb")
		took := time.Since(start)
		code, body := h.readyz() // right when start returned
		if code != 200 {
			t.Fatalf("readyz right after systemctl start returned: %d %q", code, body)
		}
		t.Logf("systemctl start xlb returned after %s; readyz then: %d %s", took.Round(10*time.Millisecond), code, body)
		p := h.show("ActiveState", "SubState", "StatusText", "WatchdogUSec")
		if p["ActiveState"] != "active" || p["SubState"] != "running" {
			t.Errorf("state %s/%s, want active/running", p["ActiveState"], p["SubState"])
		}
		if !strings.HasPrefix(p["StatusText"], "running:") {
			t.Errorf("StatusText %q, want the daemon's running summary", p["StatusText"])
		}
		if st, _ := h.try("systemctl", "status", "--no-pager", "--lines=0", "xlb"); !strings.Contains(st, `Status: "`+p["StatusText"]+`"`) {
			t.Errorf("systemctl status lacks the status line %q:\n%s", p["StatusText"], st)
		}
		if p["WatchdogUSec"] != "30s" {
			t.Errorf("WatchdogUSec=%s, want 30s", p["WatchdogUSec"])
		}
		if !h.xdpAttached() {
			t.Error("no XDP program on eth0 while running")
		}
	})

	step("sandbox", func(t *testing.T) {
		status := h.sh("cat", fmt.Sprintf("/proc/%d/status", h.mainPID()))
		want := map[string]string{
			// CAP_NET_ADMIN (12), CAP_BPF (39); no CAP_PERFMON (38)
			"CapEff": "0000008000001000", "CapBnd": "0000008000001000",
			"NoNewPrivs": "1", "Seccomp": "2",
		}
		for k, v := range want {
			if got := procField(status, k); got != v {
				t.Errorf("%s: %s, want %s", k, got, v)
			}
		}
	})

	step("traffic", func(t *testing.T) { h.traffic(30) })

	step("watchdog-pings", func(t *testing.T) {
		// systemd stamps the watchdog at start; a ping moves the stamp.
		// The daemon pings at half of WatchdogSec (15 s).
		first := h.show("WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"]
		h.waitFor("a watchdog ping", 45*time.Second, func() (bool, string) {
			ts := h.show("WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"]
			return ts != first, "WatchdogTimestampMonotonic=" + ts
		})
	})

	step("sigkill-restarts", func(t *testing.T) {
		old := h.mainPID()
		since := h.cursor()
		h.sh("systemctl", "kill", "--signal=KILL", "xlb")
		h.waitFor("restart after SIGKILL", 60*time.Second, func() (bool, string) {
			p := h.show("ActiveState", "MainPID", "NRestarts")
			return p["ActiveState"] == "active" && p["MainPID"] != "0" && p["MainPID"] != strconv.Itoa(old), fmt.Sprint(p)
		})
		if n, _ := strconv.Atoi(h.show("NRestarts")["NRestarts"]); n < 1 {
			t.Errorf("NRestarts=%d after SIGKILL", n)
		}
		if code, body := h.readyz(); code != 200 {
			t.Errorf("readyz after the restart: %d %s", code, body)
		}
		if j := h.journal(since); !strings.Contains(j, "status=9/KILL") {
			t.Errorf("journal lacks the SIGKILL:\n%s", j)
		}
		h.traffic(9)
	})

	step("upgrade-restarts", func(t *testing.T) {
		cfgBefore := h.sh("sha256sum", "/etc/xlb/xlb.yaml")
		old := h.mainPID()
		since := h.cursor()
		out := h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(1))
		if !strings.Contains(out, "connections established through this instance are reset") {
			t.Errorf("upgrade output lacks the reset warning:\n%s", out)
		}
		// postinst's try-restart returned: the new process is ready.
		if code, body := h.readyz(); code != 200 {
			t.Errorf("readyz right after the upgrade: %d %s", code, body)
		}
		if pid := h.mainPID(); pid == old || pid == 0 {
			t.Errorf("MainPID %d after the upgrade (before %d): not restarted", pid, old)
		}
		if v := h.statusVersion(); v != v2 {
			t.Errorf("status API version %q after the upgrade, want %s", v, v2)
		}
		if after := h.sh("sha256sum", "/etc/xlb/xlb.yaml"); after != cfgBefore {
			t.Errorf("/etc/xlb/xlb.yaml changed by the upgrade")
		}
		if left, _ := h.try("sh", "-c", "ls /etc/xlb/*.dpkg-* 2>/dev/null"); strings.TrimSpace(left) != "" {
			t.Errorf("dpkg left %s", left)
		}
		if j := h.journal(since); !strings.Contains(j, "shutdown window over") {
			t.Errorf("journal lacks the old process's shutdown window:\n%s", j)
		}
		h.traffic(9)
	})

	step("upgrade-without-restart", func(t *testing.T) {
		h.sh("sh", "-c", "echo XLB_RESTART_ON_UPGRADE=no >> /etc/default/xlb")
		old := h.mainPID()
		out := h.sh("apt-get", "install", "-y", "--reinstall", "--no-install-recommends", debIn(1))
		if !strings.Contains(out, "keeps running the previous version") {
			t.Errorf("output lacks the no-restart notice:\n%s", out)
		}
		if pid := h.mainPID(); pid != old {
			t.Errorf("MainPID %d, before %d: restarted despite XLB_RESTART_ON_UPGRADE=no", pid, old)
		}
		if env := h.sh("cat", "/etc/default/xlb"); !strings.Contains(env, "\nXLB_RESTART_ON_UPGRADE=no\n") {
			t.Errorf("/etc/default/xlb lost the operator's setting:\n%s", env)
		}
	})

	step("stop-takes-the-shutdown-window", func(t *testing.T) {
		since := h.cursor()
		done := make(chan error, 1)
		start := time.Now()
		go func() { _, err := h.try("systemctl", "stop", "xlb"); done <- err }()
		sawDraining := false
		var err error
	poll:
		for {
			select {
			case err = <-done:
				break poll
			case <-time.After(100 * time.Millisecond):
				if code, body := h.readyz(); code == 503 && strings.Contains(body, "shutting_down") {
					sawDraining = true
				}
			}
		}
		took := time.Since(start)
		if err != nil {
			t.Fatalf("systemctl stop: %v", err)
		}
		t.Logf("systemctl stop xlb took %s (shutdown_timeout %d s)", took.Round(10*time.Millisecond), shutdownTimeout)
		if took < time.Duration(shutdownTimeout-1)*time.Second {
			t.Errorf("stop took %s, want at least shutdown_timeout-1s = %ds", took, shutdownTimeout-1)
		}
		if !sawDraining {
			t.Error("readyz never answered 503 shutting_down during the stop")
		}
		p := h.show("ActiveState", "Result")
		if p["ActiveState"] != "inactive" || p["Result"] != "success" {
			t.Errorf("after stop: %v, want inactive/success", p)
		}
		if st, _ := h.try("systemctl", "is-failed", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("is-failed: %q, want inactive", st)
		}
		if h.xdpAttached() {
			t.Error("XDP program still attached after stop")
		}
		j := h.journal(since)
		for _, want := range []string{"shutting down", "shutdown window over"} {
			if !strings.Contains(j, want) {
				t.Errorf("journal of the stop lacks %q:\n%s", want, j)
			}
		}
	})

	step("remove-stops-and-disables", func(t *testing.T) {
		h.sh("systemctl", "start", "xlb")
		if !h.xdpAttached() {
			t.Fatal("not attached after start")
		}
		out := h.sh("apt-get", "remove", "-y", "xlb")
		if st, _ := h.try("systemctl", "is-active", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("after remove: is-active %q\n%s", st, out)
		}
		if h.xdpAttached() {
			t.Error("XDP program still attached after remove")
		}
		h.sh("test", "!", "-e", "/lib/systemd/system/xlb.service")
		h.sh("test", "!", "-e", "/etc/systemd/system/multi-user.target.wants/xlb.service")
		h.sh("test", "-f", "/etc/xlb/xlb.yaml") // conffiles stay until purge
		if st := h.sh("dpkg-query", "-W", "-f=${db:Status-Abbrev}", "xlb"); strings.TrimSpace(st) != "rc" {
			t.Errorf("dpkg status %q, want rc", st)
		}
	})

	step("purge-removes-config", func(t *testing.T) {
		h.sh("apt-get", "purge", "-y", "xlb")
		h.sh("test", "!", "-e", "/etc/xlb")
		h.sh("test", "!", "-e", "/etc/default/xlb")
	})

	step("rpm-lifecycle", func(t *testing.T) {
		out := h.sh("rpm", "-i", "--nodeps", rpmIn(0))
		if !strings.Contains(out, "not enabled and not started") {
			t.Errorf("rpm -i output lacks the not-started notice:\n%s", out)
		}
		if st, _ := h.try("systemctl", "is-active", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("after rpm -i: is-active %q", st)
		}
		h.write("/etc/xlb/xlb.yaml", config, 0o644)
		h.sh("systemctl", "enable", "--now", "xlb")
		if code, body := h.readyz(); code != 200 {
			t.Fatalf("readyz after start: %d %s", code, body)
		}
		old := h.mainPID()
		out = h.sh("rpm", "-U", "--nodeps", rpmIn(1))
		if !strings.Contains(out, "connections established through this instance are reset") {
			t.Errorf("rpm -U output lacks the reset warning:\n%s", out)
		}
		if pid := h.mainPID(); pid == old || pid == 0 {
			t.Errorf("MainPID %d after rpm -U (before %d): not restarted", pid, old)
		}
		if v := h.statusVersion(); v != v2 {
			t.Errorf("version %q after rpm -U, want %s", v, v2)
		}
		if got := h.sh("cat", "/etc/xlb/xlb.yaml"); got != config {
			t.Error("/etc/xlb/xlb.yaml changed by rpm -U")
		}
		h.sh("rpm", "-e", "xlb")
		if st, _ := h.try("systemctl", "is-active", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("after rpm -e: is-active %q", st)
		}
		if h.xdpAttached() {
			t.Error("XDP program still attached after rpm -e")
		}
		h.sh("test", "!", "-e", "/etc/systemd/system/multi-user.target.wants/xlb.service")
		h.sh("test", "-f", "/etc/xlb/xlb.yaml.rpmsave")
	})

	t.Logf("whole booted-host test: %s", time.Since(testStart).Round(100*time.Millisecond))
}

func procField(status, key string) string {
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func firstMatch(s, sub string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
