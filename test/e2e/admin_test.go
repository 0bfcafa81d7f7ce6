package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// xlbctl is the console built once for the tests that use it.
var xlbctl = sync.OnceValues(func() (string, error) {
	out := filepath.Join(binDir, "xlbctl")
	if b, err := exec.Command("go", "build", "-o", out, "github.com/xlbproject/xlb/cmd/xlbctl").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build xlbctl: %v\n%s", err, b)
	}
	return out, nil
})

// runXlbctl runs the built xlbctl with args (outside the lab's
// namespaces: the admin socket is a path on this host) and returns its
// exit code and output.
func runXlbctl(t testing.TB, args ...string) (int, string) {
	t.Helper()
	bin, err := xlbctl()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no XLB_ADMIN_URL, no password
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("xlbctl %v: %v", args, err)
	}
	return code, string(out)
}

// postSocket sends POST path to the lab's admin socket and returns the
// status code and body.
func postSocket(t testing.TB, l *lab.Lab, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", adminSocket(l))
		},
	}}
	res, err := c.Post("http://localhost"+path, "", nil)
	if err != nil {
		t.Fatalf("POST %s over %s: %v", path, adminSocket(l), err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Issue 28, item 1: a local process cannot drain the instance over HTTP
// without auth, even on loopback (403, logged with its address); a page
// that reached the listener through DNS rebinding is refused for its
// Host; xlbctl as root drains and undrains through the admin socket
// (mode 0600) without credentials, and the drain names who asked: the
// log and the status document give the peer's uid and pid. A clean stop
// removes the socket.
func TestAdminDrainNeedsAuthOrSocket(t *testing.T) {
	l := greetedLab(t)
	p := startXLB(t, l, labConfig(l, ""))
	waitReadyz(t, l, http.StatusOK, "ready")

	code, body := post(t, l.XLB, adminURL+"/api/v1/drain")
	if code != http.StatusForbidden || !strings.Contains(body, adminSocket(l)) {
		t.Fatalf("POST /api/v1/drain over HTTP without auth: %d %q, want 403 naming the admin socket", code, body)
	}
	if err := p.WaitLog("admin: refused an unauthenticated drain request over HTTP", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := statusDoc(t, l); d.Drained || !d.Readiness.Ready {
		t.Fatalf("after the refused drain: drained %v readiness %+v, want ready", d.Drained, d.Readiness)
	}

	req, _ := http.NewRequest(http.MethodGet, adminURL+"/api/v1/status", nil)
	req.Host = "rebind.attacker.example:8642"
	res, err := nsClient(l.XLB).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET status with a foreign Host: %d, want 400", res.StatusCode)
	}

	fi, err := os.Stat(adminSocket(l))
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket %s: %v %v, want a socket, mode 0600", adminSocket(l), fi.Mode(), err)
	}
	if code, out := runXlbctl(t, "--config", p.Config, "drain"); code != 0 || !strings.HasPrefix(out, "drained:") {
		t.Fatalf("xlbctl drain: exit %d:\n%s", code, out)
	}
	waitReadyz(t, l, http.StatusServiceUnavailable, string(api.ReasonDraining))
	d := statusDoc(t, l)
	if !d.Drained || d.Drain == nil || d.Drain.Restored || !strings.HasPrefix(d.Drain.By, "unix socket uid 0 pid ") || d.Drain.SinceUnixMs == 0 {
		t.Fatalf("status after xlbctl drain: drained %v drain %+v, want by the socket's peer, uid 0", d.Drained, d.Drain)
	}
	if err := p.WaitLog("drained by "+d.Drain.By, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if code, out := runXlbctl(t, "--config", p.Config, "status"); code != 3 || !strings.Contains(out, "draining") {
		t.Fatalf("xlbctl status while drained: exit %d, want 3 (not ready), draining:\n%s", code, out)
	}
	if code, out := runXlbctl(t, "--config", p.Config, "undrain"); code != 0 || !strings.HasPrefix(out, "undrained:") {
		t.Fatalf("xlbctl undrain: exit %d:\n%s", code, out)
	}
	waitReadyz(t, l, http.StatusOK, "ready")
	if d := statusDoc(t, l); d.Drained || d.Drain != nil {
		t.Fatalf("after undrain: drained %v drain %+v", d.Drained, d.Drain)
	}
	stopXLB(t, l, p)
	if _, err := os.Stat(adminSocket(l)); !os.IsNotExist(err) {
		t.Fatalf("admin socket after a clean stop: %v, want it removed", err)
	}
}

// Issue 28, item 4: a drain is kept in /run/xlb, so an instance drained
// through the socket, then SIGKILLed and started again, is drained from
// its first moment: its BGP session comes up and ends the graceful
// restart without the route, readiness answers draining, and the status
// says since when and by whom (restored). Undrain announces again.
func TestBGPDrainSurvivesKill(t *testing.T) {
	l, b := bgpLab(t)
	cfg := bgpConfig(l, "")
	p := startPinned(t, l, xlbBinary, cfg)
	b.WaitRoute(t, bgpVIP, true)
	if code, body := postSocket(t, l, "/api/v1/drain"); code != http.StatusOK {
		t.Fatalf("drain over the socket: %d %s", code, body)
	}
	b.WaitRoute(t, bgpVIP, false)
	before := statusDoc(t, l).Drain
	if before == nil {
		t.Fatal("status shows no drain after the drain")
	}

	p.Kill() // SIGKILL: no withdrawal, no cleanup
	p = startPinned(t, l, xlbBinary, cfg)
	d := waitStatus(t, l, "the restarted daemon's bgp session established", func(d api.Document) bool {
		return d.BGP != nil && len(d.BGP.Peers) == 1 && d.BGP.Peers[0].State == "established"
	})
	if !d.Drained || d.Drain == nil || !d.Drain.Restored || d.Drain.By != before.By || d.Drain.SinceUnixMs != before.SinceUnixMs {
		t.Fatalf("restarted: drained %v drain %+v, want the drain of %+v, restored", d.Drained, d.Drain, before)
	}
	if len(d.BGP.Announced) != 0 {
		t.Fatalf("restarted while drained: announced %v, want nothing", d.BGP.Announced)
	}
	waitReadyz(t, l, http.StatusServiceUnavailable, string(api.ReasonDraining))
	// The router has the new session, out of graceful restart (the
	// speaker's End-of-RIB came), and no route via this host.
	birdWaitSession(t, b)
	if r := b.Route(bgpVIP); r.Present {
		t.Fatalf("the router has the VIP from the restarted, drained instance:\n%s", r.Out)
	}
	if err := p.WaitLog("drained, as the previous process was", 10*time.Second); err != nil {
		t.Fatal(err)
	}

	if code, body := postSocket(t, l, "/api/v1/undrain"); code != http.StatusOK {
		t.Fatalf("undrain over the socket: %d %s", code, body)
	}
	b.WaitRoute(t, bgpVIP, true)
	stopXLB(t, l, p)
}

// birdWaitSession waits until bird's session with XLB is established and
// out of graceful restart: the speaker's End-of-RIB came, so what bird
// holds from it now is all it announces.
func birdWaitSession(t testing.TB, b *birdtest.Bird) {
	t.Helper()
	birdtest.WaitFor(t, "bird's session established, graceful restart over", func() (bool, string) {
		s := b.Session(bgpRouter)
		return s.State == birdtest.Established && !s.GracefulRestart, s.Out
	})
}
