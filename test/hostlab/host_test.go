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

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// shutdownTimeout is the lab config's shutdown_timeout (seconds): short,
// so that every stop in the test stays quick.
const shutdownTimeout = 3

const listenAddr = "192.0.2.10:80"

// labConfig is /etc/xlb/xlb.yaml for the booted host: the one-arm lab,
// listen 192.0.2.10:80, the lab's backends with the given indices (all of
// them when none is given) on 8080 as backend-1, backend-2, ..., admin on
// 127.0.0.1:8642 (written out: the older versions some tests start from
// default to 9090), metrics on its default (0.0.0.0:9642), the default
// state_dir (/sys/fs/bpf/xlb, in the container's own bpffs).
func labConfig(l *lab.Lab, backends ...int) string {
	if len(backends) == 0 {
		backends = allBackends(l)
	}
	var b strings.Builder
	b.WriteString("# written by test/hostlab\nname: hostlab\nlisten:\n  ip: 192.0.2.10\nports:\n  - local_port: 80\n    remote_port: 8080\n")
	b.WriteString("provider:\n  static:\n    backends:\n")
	for _, i := range backends {
		fmt.Fprintf(&b, "      - name: %s\n        ip: %s\n", backendName(i), l.Backends[i].IP())
	}
	fmt.Fprintf(&b, "admin:\n  port: %d\n", config.DefaultAdminPort)
	b.WriteString("interfaces: [eth0]\nxdp_mode: native\nsnat:\n  ip: 192.0.2.10\n  port_range: \"40000-59999\"\n")
	fmt.Fprintf(&b, "shutdown_timeout: %d\nflow_table:\n  max_connections: 65536\n", shutdownTimeout)
	return b.String()
}

// backendName is the config name of the lab's backend i (from 0).
func backendName(i int) string { return fmt.Sprintf("backend-%d", i+1) }

func allBackends(l *lab.Lab) []int {
	all := make([]int, len(l.Backends))
	for i := range all {
		all[i] = i
	}
	return all
}

// host is the booted container in the lab's XLB namespace.
type host struct {
	t    *testing.T
	c    *Container
	l    *lab.Lab
	http *http.Client
	// backends are the lab backends (indices) the current xlb.yaml lists:
	// traffic expects connections on these only.
	backends []int
}

// bootHost builds a one-arm lab, boots a container (name prefix plus the
// lab's prefix) with the packages in its XLB namespace and removes both
// when t ends.
func bootHost(t *testing.T, name string) *host {
	t.Helper()
	l := lab.New(t, lab.Options{})
	bootStart := time.Now()
	c, err := Boot(Options{Rootfs: rootfs, Name: name + "-" + l.Prefix, NetnsPath: l.XLB.Path, Files: pkgFiles}, 2*time.Minute)
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
	h := &host{t: t, c: c, l: l, backends: allBackends(l), http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return l.XLB.Dial(ctx, addr) },
	}}}
	if out := h.sh("systemctl", "is-system-running"); strings.TrimSpace(out) != "running" {
		t.Logf("container state %s; failed units:\n%s", out, h.sh("systemctl", "--failed", "--no-legend"))
	}
	return h
}

// step runs f as subtest name with h reporting to it, and stops t when
// it fails: later steps build on earlier ones.
func (h *host) step(name string, f func(t *testing.T)) {
	t := h.t
	if !t.Run(name, func(t *testing.T) { h.t = t; f(t) }) {
		t.FailNow()
	}
	h.t = t
}

// configure writes /etc/xlb/xlb.yaml with the given lab backends (all when
// none) and checks it with xlb check.
func (h *host) configure(backends ...int) {
	h.t.Helper()
	if len(backends) == 0 {
		backends = allBackends(h.l)
	}
	h.write("/etc/xlb/xlb.yaml", labConfig(h.l, backends...), 0o644)
	h.sh("xlb", "check", "--config", "/etc/xlb/xlb.yaml")
	h.backends = backends
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
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:8642"+path, nil)
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

// status reads /api/v1/status.
func (h *host) status() api.Document {
	h.t.Helper()
	code, body, err := h.get("/api/v1/status")
	if err != nil || code != 200 {
		h.t.Fatalf("GET /api/v1/status: %d %v\n%s", code, err, body)
	}
	var doc api.Document
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		h.t.Fatalf("status document: %v\n%s", err, body)
	}
	return doc
}

// statusVersion is the version field of /api/v1/status.
func (h *host) statusVersion() string {
	h.t.Helper()
	return h.status().Version
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
// round robin over the configured backends (their counts differ by at most
// one; the others get none) and that backends see only XLB's SNAT
// address. It resets the backends' statistics first: streams that must
// report their server side are checked before.
func (h *host) traffic(n int) {
	h.t.Helper()
	h.l.ResetStats()
	rng := rand.New(rand.NewPCG(uint64(n), 5))
	for i := 0; i < n; i++ {
		if err := echoThrough(h.l.Client(), rng, 1+rng.IntN(8<<10)); err != nil {
			h.t.Fatalf("connection %d of %d through %s: %v", i+1, n, listenAddr, err)
		}
	}
	counts := make([]int, len(h.l.Backends))
	h.waitFor("backends complete the connections", 30*time.Second, func() (bool, string) {
		done := 0
		for i, b := range h.l.Backends {
			st := b.Stats()
			done += st.Completed
			counts[i] = st.Accepted
		}
		return done >= n, fmt.Sprintf("completed %d of %d, accepted %v", done, n, counts)
	})
	lo, hi, sum := counts[h.backends[0]], counts[h.backends[0]], 0
	for _, i := range h.backends {
		lo, hi, sum = min(lo, counts[i]), max(hi, counts[i]), sum+counts[i]
	}
	if sum != n || hi-lo > 1 {
		h.t.Fatalf("per-backend connections %v over configured backends %v: want %d in total, differing by at most one", counts, h.backends, n)
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
