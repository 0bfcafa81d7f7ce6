package status

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

func TestAuth(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		ts := newTestServer(t, fixture(), "", "")
		for _, p := range []string{"/healthz", "/readyz", "/api/v1/status", "/admin/"} {
			if r := do(t, ts, "GET", p); r.code != http.StatusOK {
				t.Errorf("GET %s without auth configured = %d, want 200", p, r.code)
			}
		}
	})
	t.Run("on", func(t *testing.T) {
		ts := newTestServer(t, fixture(), "operator", "s3cret")
		for _, p := range []string{"/healthz", "/readyz"} {
			if r := do(t, ts, "GET", p); r.code != http.StatusOK {
				t.Errorf("probe %s without credentials = %d, want 200 (probes stay open)", p, r.code)
			}
		}
		for _, p := range []string{"/api/v1/status", "/admin/", "/admin/console.js"} {
			for _, c := range []struct {
				name string
				auth []string
				want int
			}{
				{"no credentials", nil, 401},
				{"wrong password", []string{"operator", "nope"}, 401},
				{"wrong user", []string{"admin", "s3cret"}, 401},
				{"password prefix", []string{"operator", "s3cre"}, 401},
				{"right", []string{"operator", "s3cret"}, 200},
			} {
				r := do(t, ts, "GET", p, c.auth...)
				if r.code != c.want {
					t.Errorf("GET %s %s = %d, want %d", p, c.name, r.code, c.want)
				}
				if c.want == 401 {
					if h := r.header.Get("WWW-Authenticate"); h != `Basic realm="xlb"` {
						t.Errorf("GET %s %s: WWW-Authenticate = %q", p, c.name, h)
					}
					if strings.Contains(r.body, "backend-1") {
						t.Errorf("GET %s %s: 401 body leaks the document", p, c.name)
					}
				}
			}
		}
	})
}

func TestNewRejectsBadAuth(t *testing.T) {
	store := &snapshot.Store{}
	if _, err := New(Options{Store: store, Username: "op:er", Password: "x"}); err == nil {
		t.Error("username with ':' accepted")
	}
	if _, err := New(Options{Store: store, Username: "operator"}); err == nil || !strings.Contains(err.Error(), api.EnvAdminPassword) {
		t.Errorf("username without password: err = %v, want one naming %s", err, api.EnvAdminPassword)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("nil Store accepted")
	}
}

func TestPasswordFromEnv(t *testing.T) {
	t.Setenv(api.EnvAdminPassword, "")
	if pw, err := PasswordFromEnv(""); pw != "" || err != nil {
		t.Errorf("no username: %q, %v; want auth off", pw, err)
	}
	if _, err := PasswordFromEnv("operator"); err == nil || !strings.Contains(err.Error(), "XLB_ADMIN_PASSWORD") {
		t.Errorf("empty variable: err = %v, want one naming XLB_ADMIN_PASSWORD", err)
	}
	t.Setenv(api.EnvAdminPassword, "s3cret")
	if pw, err := PasswordFromEnv("operator"); pw != "s3cret" || err != nil {
		t.Errorf("set: %q, %v", pw, err)
	}
}

func TestPasswordFromEnvUnset(t *testing.T) {
	t.Setenv(api.EnvAdminPassword, "x") // restored after the test
	if err := os.Unsetenv(api.EnvAdminPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := PasswordFromEnv("operator"); err == nil || !strings.Contains(err.Error(), "XLB_ADMIN_PASSWORD is not set") {
		t.Errorf("unset variable: err = %v", err)
	}
}
