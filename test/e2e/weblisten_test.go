package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/webtest"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// Secured listeners (issue 16): exporter-toolkit web config files on the
// admin and metrics listeners, checked with curl inside the XLB
// namespace, and secured by a hot upgrade: the successor applies its
// files, TLS included, to the sockets it inherits.

const (
	adminTLSURL   = "https://127.0.0.1:8642"
	metricsURL    = "http://127.0.0.1:9642/metrics"
	metricsTLSURL = "https://127.0.0.1:9642/metrics"
	// The warnings the daemon logs for a listener beyond loopback.
	warnMetricsOpen      = "metrics listener on 0.0.0.0 is reachable beyond loopback without authentication"
	warnMetricsCleartext = "metrics listener on 0.0.0.0 uses HTTP Basic auth without TLS"
)

// webFiles are the files of one test: a PKI and web config files using
// its server certificate.
type webFiles struct {
	webtest.PKI
	tlsUsers string // tls_server_config and basic_auth_users (operator, prometheus)
	users    string // basic_auth_users only
	missing  string // a path with no file
}

func newWebFiles(t *testing.T) webFiles {
	t.Helper()
	dir := t.TempDir()
	f := webFiles{PKI: webtest.NewPKI(t, dir, "e2e"), users: webtest.UsersFile(t, "operator", "adm1n", "prometheus", "scr4pe"),
		tlsUsers: filepath.Join(dir, "web-tls.yml"), missing: filepath.Join(dir, "absent.yml")}
	users, err := os.ReadFile(f.users)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.tlsUsers, append([]byte(f.TLSServerConfig()), users...), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// reloadTo rewrites the daemon's xlb.yaml as cfg and hot-upgrades it
// with `xlb reload`, which must succeed; it returns the new owner's pid.
func reloadTo(t *testing.T, bin string, p *xlbproc.Proc, cfg string) int {
	t.Helper()
	rewriteConfig(t, p.Config, cfg)
	from := p.Pid()
	if code, stderr := reload(t, bin, from); code != 0 {
		t.Fatalf("reload: exit %d: %s", code, stderr)
	}
	to, err := p.WaitHandOff(from, swapTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// curlIn runs Debian's curl (make deps installs it) inside h and returns
// the HTTP status (0 without an answer), the body and curl's exit status.
func curlIn(t *testing.T, h *lab.Host, url string, args ...string) (code int, body string, exit int) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("curl is not installed (make deps installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	argv := append([]string{"-sS", "--max-time", "20", "-w", "\n%{http_code}"}, args...)
	out, err := h.Command(ctx, "curl", append(argv, url)...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("curl %s: %v", url, err)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	code, _ = strconv.Atoi(s[i+1:])
	return code, s[:max(i, 0)], exit
}

// curlCase is one curl request and the HTTP status it must get.
type curlCase struct {
	url  string
	args []string
	code int
}

func checkCurl(t *testing.T, l *lab.Lab, what string, cases []curlCase) {
	t.Helper()
	for _, c := range cases {
		if code, body, exit := curlIn(t, l.XLB, c.url, c.args...); code != c.code {
			t.Errorf("%s: curl %v %s: HTTP %d (exit %d), want %d: %.200s", what, c.args, c.url, code, exit, c.code, body)
		}
	}
}

// rewriteConfig replaces the daemon's xlb.yaml.
func rewriteConfig(t *testing.T, path, cfg string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The defaults warn about the open metrics listener; a reload secures
// both listeners on the sockets the successor inherits (admin TLS and
// bcrypt users, metrics users without TLS, which warns); a reload naming
// a missing file fails and the running instance keeps serving; a last
// reload turns TLS on for the metrics listener while /readyz is polled
// over TLS without a failure.
func TestWebConfigListeners(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	f := newWebFiles(t)
	base := labConfig(l, "")
	bin := installBinary(t, xlbBinary)
	p := startPinned(t, l, bin, base)

	if !strings.Contains(p.Log(), warnMetricsOpen) || strings.Contains(p.Log(), "admin listener on") {
		t.Errorf("defaults: want the open-metrics warning and no admin warning in\n%s", grepLines(p.Log(), "listener on"))
	}
	checkCurl(t, l, "defaults", []curlCase{
		{adminURL + "/readyz", nil, 200}, {adminURL + "/api/v1/status", nil, 200}, {metricsURL, nil, 200},
	})

	// Secure both listeners by a hot upgrade.
	secured := labConfig(l, fmt.Sprintf("admin:\n  web_config_file: %s\nmetrics:\n  web_config_file: %s\n", f.tlsUsers, f.users))
	to := reloadTo(t, bin, p, secured)
	if n := strings.Count(p.Log(), warnMetricsCleartext); n != 1 {
		t.Errorf("secured: %d cleartext warnings for metrics, want 1:\n%s", n, grepLines(p.Log(), "listener on"))
	}
	ca := []string{"--cacert", f.CA}
	checkCurl(t, l, "secured", []curlCase{
		{adminTLSURL + "/healthz", ca, 200},
		{adminTLSURL + "/readyz", ca, 200},
		{adminTLSURL + "/api/v1/status", ca, 401},
		{adminTLSURL + "/api/v1/status", append([]string{"-u", "operator:wrong"}, ca...), 401},
		{adminTLSURL + "/api/v1/status", append([]string{"-u", "operator:adm1n"}, ca...), 200},
		{adminTLSURL + "/admin/", append([]string{"-u", "operator:adm1n"}, ca...), 200},
		{adminURL + "/readyz", nil, 400}, // plain HTTP on the TLS socket
		{metricsURL, nil, 401},
		{metricsURL, []string{"-u", "prometheus:wrong"}, 401},
		{metricsURL, []string{"-u", "prometheus:scr4pe"}, 200},
	})
	if _, body, _ := curlIn(t, l.XLB, adminTLSURL+"/api/v1/status", append([]string{"-u", "operator:adm1n"}, ca...)...); !strings.Contains(body, `"`+string(api.StartHandedOver)+`"`) {
		t.Errorf("status after the hand-off does not say %s: %.300s", api.StartHandedOver, body)
	}
	if _, body, _ := curlIn(t, l.XLB, metricsURL, "-u", "prometheus:scr4pe"); !strings.Contains(body, `xlb_hot_upgrades_total{result="ok"} 1`) {
		t.Errorf("metrics after the hand-off: no xlb_hot_upgrades_total ok 1")
	}

	// A missing file fails the reload; the instance keeps serving TLS.
	rewriteConfig(t, p.Config, labConfig(l, fmt.Sprintf("admin:\n  web_config_file: %s\n", f.missing)))
	if code, stderr := reload(t, bin, to); code != 1 || !strings.Contains(stderr, f.missing) {
		t.Errorf("reload with a missing web config file: exit %d, stderr %q; want 1 naming %s", code, stderr, f.missing)
	}
	if p.Pid() != to || p.Exited() {
		t.Fatalf("after the failed reload the owner is %d (exited %v), want %d", p.Pid(), p.Exited(), to)
	}
	checkCurl(t, l, "after a failed reload", []curlCase{{adminTLSURL + "/readyz", ca, 200}})

	// TLS on the metrics listener too, by a hand-off polled over TLS.
	poll := pollTLSReadyz(t, l, f.CA)
	reloadTo(t, bin, p, labConfig(l, fmt.Sprintf("admin:\n  web_config_file: %[1]s\nmetrics:\n  web_config_file: %[1]s\n", f.tlsUsers)))
	n, bad := poll()
	t.Logf("/readyz over TLS during the hand-off: %d requests, %d not 200", n, len(bad))
	if len(bad) > 0 || n == 0 {
		t.Errorf("/readyz over TLS during the hand-off: %d requests, failures %v", n, bad)
	}
	checkCurl(t, l, "metrics over TLS", []curlCase{
		{metricsTLSURL, append([]string{"-u", "prometheus:scr4pe"}, ca...), 200},
		{metricsTLSURL, ca, 401},
		{metricsURL, []string{"-u", "prometheus:scr4pe"}, 400},
	})
	stopXLB(t, l, p)
}

// pollTLSReadyz polls https://127.0.0.1:8642/readyz in the XLB namespace
// on fresh connections, trusting only the CA in cert, until the returned function is
// called; that returns the number of requests and the failures.
func pollTLSReadyz(t *testing.T, l *lab.Lab, cert string) func() (int, []string) {
	t.Helper()
	pemBytes, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	client := nsClient(l.XLB)
	tr := client.Transport.(*http.Transport)
	tr.DisableKeepAlives = true
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var n int
	var bad []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(25 * time.Millisecond):
			}
			n++
			resp, err := client.Get(adminTLSURL + "/readyz")
			if err != nil {
				bad = append(bad, err.Error())
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				bad = append(bad, resp.Status)
			}
		}
	}()
	var once sync.Once
	stop := func() (int, []string) {
		once.Do(func() { close(done); wg.Wait() })
		return n, bad
	}
	t.Cleanup(func() { stop() })
	return stop
}
