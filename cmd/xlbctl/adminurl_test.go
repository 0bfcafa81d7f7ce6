package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/config"
)

// The tests never reach a daemon's admin socket on this machine: the
// default socket is a path that does not exist, and lbConfig's files
// name one too unless the test sets its own.
func init() { defaultSocket = "/nonexistent/xlbctl-test/admin.sock" }

// lbConfig writes an xlb.yaml whose admin section is admin (YAML lines
// under "admin:", none when empty) and returns its path.
func lbConfig(t *testing.T, admin string) string {
	t.Helper()
	src := "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: 198.51.100.11\n"
	if !strings.Contains(admin, "socket:") {
		admin += "  socket: /nonexistent/xlbctl-test/admin.sock\n"
	}
	src += "admin:\n" + admin
	path := filepath.Join(t.TempDir(), "xlb.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestResolveTarget: --admin, then XLB_ADMIN_URL, then the admin section
// of --config (0.0.0.0 and :: reached on loopback), then, only for a
// missing default file, the daemon's default.
func TestResolveTarget(t *testing.T) {
	def := "http://127.0.0.1:" + strconv.Itoa(config.DefaultAdminPort)
	any4 := lbConfig(t, "  address: 0.0.0.0\n  port: 8700\n  auth:\n    username: operator\n")
	any6 := lbConfig(t, "  address: \"::\"\n  port: 8701\n")
	fixed := lbConfig(t, "  address: 192.0.2.7\n  port: 8702\n")
	none := lbConfig(t, "")
	missing := filepath.Join(t.TempDir(), "absent.yaml")
	cases := []struct {
		name      string
		args      []string
		env       string
		url, user string
	}{
		{"--admin first", []string{"--admin", "http://192.0.2.1:1", "--config", any4}, "http://192.0.2.2:2", "http://192.0.2.1:1", ""},
		{"then the environment", []string{"--config", any4}, "http://192.0.2.2:2", "http://192.0.2.2:2", ""},
		{"then xlb.yaml, 0.0.0.0 as 127.0.0.1, its user", []string{"--config", any4}, "", "http://127.0.0.1:8700", "operator"},
		{"--user wins over the file's", []string{"--config", any4, "--user", "other"}, "", "http://127.0.0.1:8700", "other"},
		{":: as ::1", []string{"--config", any6}, "", "http://[::1]:8701", ""},
		{"a bound address as it is", []string{"--config", fixed}, "", "http://192.0.2.7:8702", ""},
		{"no admin section: the default port", []string{"--config", none}, "", def, ""},
		{"the default file missing", []string{"--config", missing}, "", "", ""}, // error: given explicitly
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, _, err := parseArgs(append(c.args, "status"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := resolveTarget(o, func(k string) string {
				if k == envAdminURL {
					return c.env
				}
				return ""
			})
			if c.url == "" {
				if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "--admin") {
					t.Fatalf("got %+v, %v; want an error naming %s and --admin", got, err, missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.url != c.url || got.user != c.user {
				t.Errorf("url %q user %q, want %q %q", got.url, got.user, c.url, c.user)
			}
		})
	}

	// Only the default path may be missing; it then means the default.
	o, _, _ := parseArgs([]string{"status"})
	o.config = missing
	if got, err := resolveTarget(o, func(string) string { return "" }); err != nil || got.url != def {
		t.Errorf("missing default config: %+v, %v; want %s", got, err, def)
	}
}

// TestConfigErrors: an invalid xlb.yaml is an error (exit 1) that says
// where and how to get past it; a file username without the password
// says where the username came from.
func TestConfigErrors(t *testing.T) {
	bad := lbConfig(t, "  port: 0\n")
	code, out, errs := runCLI(t, nil, "--config", bad, "status")
	if code != exitError || out != "" || !strings.Contains(errs, bad) || !strings.Contains(errs, "admin.port") || !strings.Contains(errs, "pass --admin") {
		t.Errorf("invalid xlb.yaml: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	authed := lbConfig(t, "  port: 8703\n  auth:\n    username: operator\n")
	code, _, errs = runCLI(t, nil, "--config", authed, "status")
	if code != exitError || !strings.Contains(errs, "admin.auth.username operator in "+authed) {
		t.Errorf("file user, no password: exit %d, stderr %q", code, errs)
	}
}

// TestAdminFromConfig: xlbctl reaches a live listener through xlb.yaml
// alone, with the password from the environment for the file's user, and
// over TLS when the listener's web config has tls_server_config: the
// certificate it names is trusted though it was issued for example.com,
// not 127.0.0.1.
func TestAdminFromConfig(t *testing.T) {
	_, body := recorded(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "operator" || p != "s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write(body)
	})
	env := map[string]string{"XLB_ADMIN_PASSWORD": "s3cret"}

	plainSrv := httptest.NewServer(h)
	defer plainSrv.Close()
	cfg := lbConfig(t, "  address: 0.0.0.0\n  port: "+port(t, plainSrv)+"\n  auth:\n    username: operator\n")
	if code, out, errs := runCLI(t, env, "--config", cfg, "status"); code != exitOK || out != readGolden(t, "status") {
		t.Errorf("plain HTTP from xlb.yaml: exit %d, stderr %q", code, errs)
	}

	cert, certPEM := selfSigned(t, "example.com")
	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin.crt"), certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(web, []byte("tls_server_config:\n  cert_file: admin.crt\n  key_file: admin.key\nbasic_auth_users:\n  operator: $2y$10$x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = lbConfig(t, "  address: 127.0.0.1\n  port: "+port(t, tlsSrv)+"\n  web_config_file: "+web+"\n")
	if code, out, errs := runCLI(t, env, "--config", cfg, "--user", "operator", "status"); code != exitOK || out != readGolden(t, "status") {
		t.Errorf("TLS from xlb.yaml: exit %d, stderr %q", code, errs)
	}
	// Another certificate (httptest's own) is verified as usual and fails.
	other := httptest.NewTLSServer(h)
	defer other.Close()
	cfg = lbConfig(t, "  address: 127.0.0.1\n  port: "+port(t, other)+"\n  web_config_file: "+web+"\n")
	if code, _, errs := runCLI(t, env, "--config", cfg, "--user", "operator", "status"); code != exitError || !strings.Contains(errs, "not the web config's") {
		t.Errorf("TLS, another certificate: exit %d, stderr %q", code, errs)
	}
}

// port is the port of a test server.
func port(t *testing.T, s *httptest.Server) string {
	t.Helper()
	i := strings.LastIndexByte(s.URL, ':')
	return s.URL[i+1:]
}

// selfSigned is a fresh self-signed ECDSA certificate for name, and its
// PEM.
func selfSigned(t *testing.T, name string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
