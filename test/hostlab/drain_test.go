package hostlab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// TestDrainUnderSystemd (issue 28, items 1 and 4) runs the packaged unit
// on a booted Debian: a drain over HTTP without auth is refused (403,
// logged) though the listener is on loopback; `xlbctl drain` as root goes
// through the admin socket the sandboxed daemon created in its runtime
// directory (0600, root) and is logged with the peer's uid and pid; the
// drain survives a SIGKILL (systemd restarts xlb, RuntimeDirectoryPreserve
// keeps /run/xlb), `systemctl restart` and a stop and start (the unit
// keeps /run/xlb until reboot: RuntimeDirectoryPreserve=yes), the status
// saying since when and by whom; `xlbctl undrain` ends it, and a clean
// stop then leaves neither a drain record nor the admin socket.
func TestDrainUnderSystemd(t *testing.T) {
	setup(t)
	h := bootHost(t, "drain")
	step := h.step

	step("install-and-start", func(t *testing.T) {
		h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(0))
		h.configure()
		h.sh("systemctl", "start", "xlb")
		h.waitReadyz(200, "ready")
	})

	step("http-drain-refused", func(t *testing.T) {
		cur := h.cursor()
		code, body := h.post("/api/v1/drain")
		if code != http.StatusForbidden || !strings.Contains(body, "/run/xlb/admin.sock") {
			t.Fatalf("POST /api/v1/drain on 127.0.0.1 without auth: %d %q, want 403 naming the admin socket", code, body)
		}
		h.waitFor("the refusal in the journal", 10*time.Second, func() (bool, string) {
			j := h.journal(cur)
			return strings.Contains(j, "refused an unauthenticated drain request over HTTP"), j
		})
		if d := h.status(); d.Drained {
			t.Fatal("drained by a refused request")
		}
	})

	var drain api.Drain
	step("xlbctl-drain-through-the-socket", func(t *testing.T) {
		if got := strings.TrimSpace(h.sh("stat", "-c", "%a %U %F", "/run/xlb/admin.sock")); got != "600 root socket" {
			t.Errorf("/run/xlb/admin.sock: %q, want 600 root socket", got)
		}
		cur := h.cursor()
		if out := h.sh("xlbctl", "drain"); !strings.HasPrefix(out, "drained:") {
			t.Fatalf("xlbctl drain: %q", out)
		}
		h.waitReadyz(503, "draining")
		d := h.status()
		if d.Drain == nil || d.Drain.Restored || !strings.HasPrefix(d.Drain.By, "unix socket uid 0 pid ") {
			t.Fatalf("status drain %+v, want by the socket's peer (uid 0)", d.Drain)
		}
		drain = *d.Drain
		h.waitFor("the drain in the journal with its requester", 10*time.Second, func() (bool, string) {
			j := h.journal(cur)
			return strings.Contains(j, "drained by "+drain.By), j
		})
	})

	keptDrained := func(t *testing.T, how string) {
		t.Helper()
		h.waitReadyz(503, "draining")
		d := h.status()
		if d.Drain == nil || !d.Drain.Restored || d.Drain.By != drain.By || d.Drain.SinceUnixMs != drain.SinceUnixMs {
			t.Fatalf("after %s: drain %+v, want %+v kept (restored)", how, d.Drain, drain)
		}
	}
	step("sigkill-keeps-the-drain", func(t *testing.T) {
		old := h.mainPID()
		h.sh("systemctl", "kill", "--signal=KILL", "xlb")
		h.waitFor("systemd restarted xlb", 60*time.Second, func() (bool, string) {
			p := h.show("ActiveState", "MainPID")
			return p["ActiveState"] == "active" && p["MainPID"] != "0" && p["MainPID"] != strconv.Itoa(old), fmt.Sprint(p)
		})
		keptDrained(t, "SIGKILL and systemd's restart")
	})

	step("restart-keeps-the-drain", func(t *testing.T) {
		h.sh("systemctl", "restart", "xlb")
		keptDrained(t, "systemctl restart")
	})

	step("stop-and-start-keep-the-drain", func(t *testing.T) {
		h.sh("systemctl", "stop", "xlb")
		h.sh("systemctl", "start", "xlb")
		keptDrained(t, "systemctl stop and start")
	})

	step("undrain-and-stop", func(t *testing.T) {
		if out := h.sh("xlbctl", "undrain"); !strings.HasPrefix(out, "undrained:") {
			t.Fatalf("xlbctl undrain: %q", out)
		}
		h.waitReadyz(200, "ready")
		h.sh("systemctl", "stop", "xlb")
		if out, err := h.try("sh", "-c", "ls /run/xlb/drain-netns-*.json /run/xlb/admin.sock"); err == nil {
			t.Errorf("after xlbctl undrain and systemctl stop: still there: %s", out)
		}
	})
}

// waitReadyz waits up to a minute for /readyz to answer code and body.
func (h *host) waitReadyz(code int, body string) {
	h.t.Helper()
	h.waitFor(fmt.Sprintf("/readyz %d %s", code, body), time.Minute, func() (bool, string) {
		c, b := h.readyz()
		return c == code && b == body, fmt.Sprintf("%d %s", c, b)
	})
}

// post sends POST path to the admin listener from inside the XLB
// namespace, without credentials.
func (h *host) post(path string) (int, string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://127.0.0.1:8642"+path, nil)
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
