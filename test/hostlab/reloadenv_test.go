package hostlab

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReloadEnvironment (issue 28, item 6): `systemctl reload xlb` on a
// booted Debian gives the new process the unit's EnvironmentFile= as it is
// at the reload, not as it was at the start: systemd reads
// /etc/default/xlb afresh for ExecReload (`xlb reload --pid $MAINPID
// --pass-environment`), which hands it to the successor. A rotated
// XLB_ADMIN_PASSWORD is the admin listener's password after the reload,
// the old one no longer is; a changed ARGS is the new process's command
// line; the streams open across the reload keep flowing; nothing of the
// hand-over is left in /run/xlb.
func TestReloadEnvironment(t *testing.T) {
	setup(t)
	h := bootHost(t, "renv")
	withAuth := strings.Replace(labConfig(h.l), "admin:\n", "admin:\n  auth:\n    username: operator\n", 1)
	envFile := func(password, args string) string {
		return fmt.Sprintf("# written by test/hostlab\nARGS=%q\nXLB_ADMIN_PASSWORD=%s\n", args, password)
	}

	h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(1))
	h.write("/etc/xlb/xlb.yaml", withAuth, 0o644)
	h.write("/etc/default/xlb", envFile("admin-old", "--log.level info"), 0o600)
	h.sh("xlb", "check", "--env-file", "/etc/default/xlb", "--config", "/etc/xlb/xlb.yaml")
	h.sh("systemctl", "enable", "--now", "xlb")
	if code := h.getAs("/api/v1/status", "admin-old"); code != http.StatusOK {
		t.Fatalf("GET /api/v1/status with the password of /etc/default/xlb: %d", code)
	}
	if args := h.mainArgs(); !slices.Equal(args[len(args)-2:], []string{"--log.level", "info"}) {
		t.Fatalf("the daemon's command line %q does not end with ARGS' words", args)
	}

	s := h.openStreams(20)
	old := h.mainPID()
	since := h.cursor()
	h.write("/etc/default/xlb", envFile("admin-new", "--log.level debug"), 0o600)
	if out, err := h.try("systemctl", "reload", "xlb"); err != nil {
		t.Fatalf("systemctl reload: %v\n%s\n%s", err, out, h.journal(since))
	}
	if pid := h.mainPID(); pid == old || pid == 0 {
		t.Fatalf("MainPID %d after the reload (before %d)", pid, old)
	}
	for _, c := range []struct {
		password string
		want     int
	}{{"admin-new", http.StatusOK}, {"admin-old", http.StatusUnauthorized}} {
		if code := h.getAs("/api/v1/status", c.password); code != c.want {
			t.Errorf("GET /api/v1/status with the %s password after the reload: %d, want %d", c.password, code, c.want)
		}
	}
	if args := h.mainArgs(); !slices.Equal(args[len(args)-2:], []string{"--log.level", "debug"}) || slices.Contains(args, "info") {
		t.Errorf("the new process's command line %q: want the new ARGS' words at its end, the old ones gone", args)
	}
	j := h.journal(since)
	line := firstMatch(j, "the unit's current environment")
	if !strings.Contains(line, "ARGS") || !strings.Contains(line, "XLB_ADMIN_PASSWORD") {
		t.Errorf("the journal does not name the changed variables: %q\n%s", line, j)
	}
	if strings.Contains(j, "admin-new") {
		t.Errorf("the journal shows the password:\n%s", j)
	}
	if out, _ := h.try("sh", "-c", "ls /run/xlb/hot-upgrade-env-* 2>/dev/null"); strings.TrimSpace(out) != "" {
		t.Errorf("the environment handed over is left in /run/xlb: %s", out)
	}
	h.keepFlowing(s, 3)
	if err := s.close(); err != nil {
		t.Fatalf("streams across the reload: %v", err)
	}
	h.checkBackendsClean()
	t.Logf("reload with a rotated admin password and ARGS: %s", clip(line, 300))
}

// getAs fetches an admin URL path as the user "operator" with password
// and returns the status code (0 on a transport error).
func (h *host) getAs(path, password string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:8642"+path, nil)
	req.SetBasicAuth("operator", password)
	resp, err := h.http.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// mainArgs is the command line of xlb.service's main process.
func (h *host) mainArgs() []string {
	h.t.Helper()
	out := h.sh("cat", fmt.Sprintf("/proc/%d/cmdline", h.mainPID()))
	return strings.Split(strings.TrimRight(out, "\x00"), "\x00")
}
