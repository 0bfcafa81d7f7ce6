package weblisten

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/internal/webtest"
	"github.com/xlbproject/xlb/pkg/config"
)

func TestOpenListeners(t *testing.T) {
	dir := t.TempDir()
	p := webtest.NewPKI(t, dir, "a")
	users := filepath.Join(dir, "users.yml")
	writeFile(t, users, p.TLSServerConfig()+"basic_auth_users:\n  op: "+webtest.Hash(t, "pw")+"\n")
	tlsOnly := filepath.Join(dir, "tls.yml")
	writeFile(t, tlsOnly, p.TLSServerConfig())

	// The defaults: admin on loopback, metrics on 0.0.0.0 without auth.
	c := config.Default()
	l, w, err := OpenListeners(c, nil)
	if err != nil || l.Admin != nil || l.Metrics != nil {
		t.Fatalf("defaults: %+v, %v", l, err)
	}
	if len(w) != 1 || !strings.HasPrefix(w[0], "metrics listener on 0.0.0.0 is reachable beyond loopback without authentication") {
		t.Errorf("defaults: warnings %q, want the metrics one", w)
	}

	// One file for both listeners; admin on a public address.
	c.Admin.Address = netip.MustParseAddr("192.0.2.1")
	c.Admin.WebConfigFile, c.Metrics.WebConfigFile = users, users
	if l, w, err = OpenListeners(c, nil); err != nil || !l.Admin.TLS() || !l.Metrics.Users() || len(w) != 0 {
		t.Errorf("both secured: %+v warnings %q err %v", l, w, err)
	}

	// admin.auth (XLB_ADMIN_PASSWORD) with TLS from the file: allowed.
	c.Admin.Auth = &config.AdminAuth{Username: "operator"}
	c.Admin.WebConfigFile = tlsOnly
	if _, w, err = OpenListeners(c, nil); err != nil || len(w) != 0 {
		t.Errorf("admin.auth with a TLS-only file: warnings %q err %v", w, err)
	}
	// admin.auth and basic_auth_users: two sources of users.
	c.Admin.WebConfigFile = users
	if _, _, err = OpenListeners(c, nil); err == nil || !strings.Contains(err.Error(), "admin.auth and basic_auth_users") {
		t.Errorf("admin.auth with file users: err = %v", err)
	}

	// Errors name the key.
	c.Admin.Auth = nil
	c.Metrics.WebConfigFile = filepath.Join(dir, "absent.yml")
	if _, _, err = OpenListeners(c, nil); err == nil || !strings.Contains(err.Error(), "metrics.web_config_file: web config file") {
		t.Errorf("missing metrics file: err = %v", err)
	}
}
