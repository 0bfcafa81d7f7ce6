package fleet

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// adminFake records the requests of one fake admin listener: the status
// document (not drained, no bgp) for GET /api/v1/status, {"drained":
// true|false} for the commands; with user set, every request needs that
// Basic auth user.
type adminFake struct {
	user string
	mu   sync.Mutex
	got  []string
}

func (a *adminFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u, _, ok := r.BasicAuth(); a.user != "" && (!ok || u != a.user) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	a.mu.Lock()
	a.got = append(a.got, r.Method+" "+r.URL.Path)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/status":
		var d api.Document
		d.Listen.IP = VIP.String()
		json.NewEncoder(w).Encode(d)
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/drain":
		w.Write([]byte(`{"drained":true}`))
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/undrain":
		w.Write([]byte(`{"drained":false}`))
	default:
		http.NotFound(w, r)
	}
}

func (a *adminFake) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

// TestDrainHookUsesTheSocket (issue 28): without admin credentials the
// bgp drain hook posts the drain to the admin socket (xlb_admin_socket),
// since xlb refuses it over HTTP without auth; it still reads the status
// over HTTP. With credentials it posts over HTTP with them, as before.
func TestDrainHookUsesTheSocket(t *testing.T) {
	for _, c := range []struct {
		name             string
		user             string
		wantHTTP, wantOn []string
	}{
		{"no credentials: the socket", "", []string{"GET /api/v1/status"}, []string{"POST /api/v1/drain"}},
		{"credentials: HTTP", AdminUser, []string{"GET /api/v1/status", "POST /api/v1/drain"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			web := &adminFake{user: c.user}
			ts := httptest.NewServer(web)
			defer ts.Close()
			sock := &adminFake{}
			path := filepath.Join(t.TempDir(), "admin.sock")
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: sock}
			go srv.Serve(ln)
			defer srv.Close()

			vars := map[string]any{"xlb_admin_url": ts.URL, "xlb_admin_socket": path, "xlb_drain_action": "drain",
				"xlb_admin_username": c.user, "xlb_admin_password": ""}
			if c.user != "" {
				vars["xlb_admin_password"] = AdminPassword
			}
			if out, err := runDrainHook(t, vars); err != nil {
				t.Fatalf("ansible-playbook: %v\n%s", err, out)
			}
			if got := web.requests(); !slices.Equal(got, c.wantHTTP) {
				t.Errorf("HTTP requests %v, want %v", got, c.wantHTTP)
			}
			if got := sock.requests(); !slices.Equal(got, c.wantOn) {
				t.Errorf("admin socket requests %v, want %v", got, c.wantOn)
			}
		})
	}
}

// runDrainHook runs testdata/drain_hook.yml with the given variables.
func runDrainHook(t *testing.T, vars map[string]any) (string, error) {
	t.Helper()
	requireTools(t, "ansible-playbook")
	return runTestPlaybook(t, "drain_hook.yml", t.TempDir(), vars)
}

// runTestPlaybook runs testdata/name on the controller (localhost, the
// repository's ansible.cfg and roles) with vars as extra variables,
// written to work/vars.json, and returns its output.
func runTestPlaybook(t *testing.T, name, work string, vars map[string]any) (string, error) {
	t.Helper()
	dir, err := AnsibleDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(work, "vars.json")
	if err := os.WriteFile(extra, b, 0o600); err != nil {
		t.Fatal(err)
	}
	playbook, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ansible-playbook", playbook, "-i", "localhost,", "-e", "@"+extra)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(os.Environ()),
		"ANSIBLE_CONFIG="+filepath.Join(dir, "ansible.cfg"),
		"ANSIBLE_ROLES_PATH="+filepath.Join(dir, "roles"),
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_LOCALHOST_WARNING=0",
	)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
