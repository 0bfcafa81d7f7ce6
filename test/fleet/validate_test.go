package fleet

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// envFile is the unit's environment file on the lab's Debian hosts.
const envFile = "/etc/default/xlb"

// runningEnv reads the environment of xlb.service's main process on h
// (/proc/PID/environ): what systemd made of the environment file.
func runningEnv(h *Host) (map[string]string, error) {
	pid, err := mainPID(h)
	if err != nil {
		return nil, err
	}
	out, err := h.Exec("cat", "/proc/"+pid+"/environ")
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, e := range strings.Split(out, "\x00") {
		if name, value, ok := strings.Cut(e, "="); ok {
			env[name] = value
		}
	}
	return env, nil
}

// checkAdminPassword: the lab's password, with every character systemd's
// env-file parsing changes unquoted, reached xlb unchanged (its process
// environment), and the status API takes it (and refuses a request
// without it) while the probes stay open.
func checkAdminPassword(t *testing.T, h *Host) {
	t.Helper()
	env, err := runningEnv(h)
	if err != nil {
		t.Errorf("%s: %v", h.Inventory, err)
		return
	}
	if got, ok := env["XLB_ADMIN_PASSWORD"]; !ok || got != AdminPassword {
		t.Errorf("%s: xlb runs with XLB_ADMIN_PASSWORD %q (set %v), want %q", h.Inventory, got, ok, AdminPassword)
	}
	if code, body, err := h.get("/api/v1/status", false); err != nil || code != http.StatusUnauthorized {
		t.Errorf("%s: /api/v1/status without credentials: %d %.80q %v, want 401", h.Inventory, code, body, err)
	}
	if code, body, err := h.Get("/api/v1/status"); err != nil || code != http.StatusOK {
		t.Errorf("%s: /api/v1/status with the lab's password: %d %.80q %v, want 200", h.Inventory, code, body, err)
	}
	if code, _, err := h.get("/healthz", false); err != nil || code != http.StatusOK {
		t.Errorf("%s: /healthz without credentials: %d %v, want 200", h.Inventory, code, err)
	}
}

// hostFiles is what the rejected runs must leave alone on a host: its
// xlb.yaml and environment file (their SHA-256) and xlb's main PID.
func hostFiles(t *testing.T, h *Host) string {
	t.Helper()
	out, err := h.Exec("sha256sum", "/etc/xlb/xlb.yaml", envFile)
	if err != nil {
		t.Fatalf("%s: %v\n%s", h.Inventory, err, out)
	}
	pid, err := mainPID(h)
	if err != nil {
		t.Fatal(err)
	}
	return out + "main PID " + pid
}

// rejected: what would stop xlb stops site.yml on every host before any
// of them changes. In check mode, a username without a password fails
// the preflight on every host. For real, a changed xlb.yaml together with
// an environment that `xlb check --env-file` rejects (an unknown
// XLB_DISABLE_FEATURES) fails the check on every host in the first play,
// the second play (the host-by-host change) never runs, and every host
// keeps its xlb.yaml, its environment file and its running process.
func (f *fleet) rejected(t *testing.T) {
	start := time.Now()
	before := map[string]string{}
	for _, h := range f.l.Hosts {
		before[h.Inventory] = hostFiles(t, h)
	}

	r := f.playbook(t, "site.yml", v1, map[string]any{"xlb_admin_password": ""}, "--check")
	if r.Err == nil {
		t.Fatalf("site.yml --check with a username and no password succeeded\n%s", Tail(r.Output, 60))
	}
	for _, h := range f.hostNames() {
		if st := TaskStatus(r.Output, "Check the admin listener's settings", h); st != "fatal" {
			t.Errorf("%s: preflight %q, want fatal", h, st)
		}
	}
	if !strings.Contains(strings.Join(strings.Fields(r.Output), " "), "xlb_admin_password is empty") {
		t.Errorf("the preflight's message is missing:\n%s", Tail(r.Output, 40))
	}
	f.phase("site.yml --check, username without password", start)

	start = time.Now()
	r = f.playbook(t, "site.yml", v1, map[string]any{
		"xlb_name":        "fleet-rejected",
		"xlb_environment": map[string]string{"XLB_DISABLE_FEATURES": "no-such-feature"},
	})
	if r.Err == nil {
		t.Fatalf("site.yml with an unknown XLB_DISABLE_FEATURES succeeded\n%s", Tail(r.Output, 60))
	}
	for _, h := range f.hostNames() {
		if st := TaskStatus(r.Output, "Stop at a rejected environment file or xlb.yaml (nothing was installed)", h); st != "fatal" {
			t.Errorf("%s: the check's verdict %q, want fatal", h, st)
		}
		if st := TaskStatus(r.Output, "Write /etc/xlb/xlb.yaml", h); st != "" {
			t.Errorf("%s: xlb.yaml written (%q) after the check failed", h, st)
		}
	}
	if strings.Contains(r.Output, "PLAY [Apply the changes to running hosts one at a time]") {
		t.Errorf("the host-by-host play ran after the first play failed")
	}
	if !strings.Contains(strings.Join(strings.Fields(r.Output), " "), `unknown kernel feature "no-such-feature"`) {
		t.Errorf("xlb check's reason is missing:\n%s", Tail(r.Output, 40))
	}
	for _, h := range f.l.Hosts {
		if after := hostFiles(t, h); after != before[h.Inventory] {
			t.Errorf("%s: changed by the rejected runs:\nbefore %s\nafter  %s", h.Inventory, before[h.Inventory], after)
		}
		if out, _ := h.Exec("sh", "-c", "ls -d /tmp/xlb-render.* 2>/dev/null"); strings.TrimSpace(out) != "" {
			t.Errorf("%s: staging directories left behind: %s", h.Inventory, out)
		}
	}
	f.phase("site.yml with a rejected environment", start)
}
