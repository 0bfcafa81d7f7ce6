package weblisten

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/webtest"
)

// hello answers 200 "hello" on every path.
var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })

// probes keeps /healthz open, as the admin listener does.
func probes(r *http.Request) bool { return r.URL.Path == "/healthz" }

// writeFile writes a web config file (and bumps its modification time, so
// that a rewrite within the file system's time granularity is seen).
func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Duration(time.Now().UnixNano()%1000+1) * time.Millisecond)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, path string) *File {
	t.Helper()
	f, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// tlsFile writes a web config file with a new PKI's tls_server_config
// followed by extra, opens it and returns the PKI, the path and the file.
func tlsFile(t *testing.T, extra string) (webtest.PKI, string, *File) {
	t.Helper()
	dir := t.TempDir()
	p := webtest.NewPKI(t, dir, "a")
	path := filepath.Join(dir, "web.yml")
	writeFile(t, path, p.TLSServerConfig()+extra)
	return p, path, open(t, path)
}

// TLS with bcrypt basic auth, checked with curl: the CA-verified
// handshake, each credential case, the open probe, plain HTTP refused,
// an untrusted certificate refused by curl, HTTP/2 negotiated.
func TestCurlTLSAndBasicAuth(t *testing.T) {
	p, _, f := tlsFile(t, "basic_auth_users:\n  prometheus: "+webtest.Hash(t, "s3cret")+"\n")
	if !f.TLS() || !f.Users() || !f.Authenticates() {
		t.Fatalf("TLS %v Users %v Authenticates %v, want all true", f.TLS(), f.Users(), f.Authenticates())
	}
	url := serve(t, f, hello, probes)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("url %s", url)
	}
	for _, c := range []struct {
		name, path string
		args       []string
		code       int
	}{
		{"no credentials", "/metrics", nil, 401},
		{"wrong password", "/metrics", []string{"-u", "prometheus:wrong"}, 401},
		{"unknown user", "/metrics", []string{"-u", "nobody:s3cret"}, 401},
		{"right password", "/metrics", []string{"-u", "prometheus:s3cret"}, 200},
		{"right password again (cached)", "/metrics", []string{"-u", "prometheus:s3cret"}, 200},
		{"open probe", "/healthz", nil, 200},
	} {
		r := curl(t, url+c.path, append([]string{"--cacert", p.CA}, c.args...)...)
		if r.exit != 0 || r.code != c.code {
			t.Errorf("%s: curl exit %d, HTTP %d, want %d (%s)", c.name, r.exit, r.code, c.code, r.stderr)
		}
		if c.code == 401 && !strings.Contains(strings.ToLower(r.headers), "www-authenticate: basic") {
			t.Errorf("%s: no WWW-Authenticate in\n%s", c.name, r.headers)
		}
		if r.version != "2" {
			t.Errorf("%s: HTTP version %q, want 2 (http2 defaults to on)", c.name, r.version)
		}
	}
	// curl without the CA refuses the certificate (exit 60).
	if r := curl(t, url+"/healthz"); r.exit != 60 {
		t.Errorf("untrusted certificate: curl exit %d (%s), want 60", r.exit, r.stderr)
	}
	// Plain HTTP to the TLS port gets Go's 400, never the handler.
	if r := curl(t, strings.Replace(url, "https://", "http://", 1)+"/healthz"); r.code != 400 {
		t.Errorf("plain HTTP to the TLS listener: HTTP %d exit %d, want 400", r.code, r.exit)
	}
	// TLS 1.1 is below the toolkit's default min_version.
	if r := curl(t, url+"/healthz", "--cacert", p.CA, "--tlsv1.1", "--tls-max", "1.1"); r.exit == 0 {
		t.Errorf("TLS 1.1 accepted: HTTP %d", r.code)
	}
}

// The file is read again when it changes: new users, a broken file (500
// until fixed), new certificates (by a new CA) without restarting the
// listener; http2: false and a configured header are honoured.
func TestCurlFileChanges(t *testing.T) {
	p, path, f := tlsFile(t, "basic_auth_users:\n  prometheus: "+webtest.Hash(t, "one")+"\n")
	url := serve(t, f, hello, nil)
	get := func(user string, ca string, args ...string) curlResult {
		return curl(t, url+"/metrics", append([]string{"--cacert", ca, "-u", user}, args...)...)
	}
	if r := get("prometheus:one", p.CA); r.code != 200 {
		t.Fatalf("first password: HTTP %d (%s)", r.code, r.stderr)
	}

	writeFile(t, path, p.TLSServerConfig()+"basic_auth_users:\n  prometheus: "+webtest.Hash(t, "two")+"\n")
	if r := get("prometheus:one", p.CA); r.code != 401 {
		t.Errorf("old password after the change: HTTP %d, want 401", r.code)
	}
	if r := get("prometheus:two", p.CA); r.code != 200 {
		t.Errorf("new password: HTTP %d, want 200 (%s)", r.code, r.stderr)
	}

	writeFile(t, path, p.TLSServerConfig()+"basic_auth_users:\n  prometheus: not-a-bcrypt-hash\n")
	// A file that became invalid fails closed: the handshake (it reads
	// the TLS settings) fails, as in the toolkit's own server.
	if r := get("prometheus:two", p.CA); r.code != 0 || r.exit == 0 {
		t.Errorf("invalid file: HTTP %d exit %d, want a failed handshake", r.code, r.exit)
	}

	q := webtest.NewPKI(t, filepath.Dir(path), "b")
	writeFile(t, path, q.TLSServerConfig()+"basic_auth_users:\n  prometheus: "+webtest.Hash(t, "two")+"\n"+
		"http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: sameorigin\n")
	if r := get("prometheus:two", q.CA); r.code != 200 {
		t.Fatalf("after the new certificate: curl exit %d HTTP %d (%s)", r.exit, r.code, r.stderr)
	} else if !strings.Contains(strings.ToLower(r.headers), "x-frame-options: sameorigin") {
		t.Errorf("configured header missing:\n%s", r.headers)
	} else if r.version != "1.1" {
		t.Errorf("http2: false: HTTP version %q, want 1.1", r.version)
	}
	if r := get("prometheus:two", p.CA); r.exit != 60 {
		t.Errorf("the old CA still verifies the listener: curl exit %d", r.exit)
	}
}

// client_auth_type RequireAndVerifyClientCert: curl without a client
// certificate fails the handshake, with one it gets in; it counts as auth.
func TestCurlClientCertificates(t *testing.T) {
	dir := t.TempDir()
	p := webtest.NewPKI(t, dir, "a")
	path := filepath.Join(dir, "web.yml")
	writeFile(t, path, p.TLSServerConfig()+"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: "+p.CA+"\n")
	f := open(t, path)
	if f.Users() || !f.Authenticates() {
		t.Fatalf("Users %v Authenticates %v, want false, true", f.Users(), f.Authenticates())
	}
	url := serve(t, f, hello, nil)
	if r := curl(t, url+"/metrics", "--cacert", p.CA); r.code != 0 {
		t.Errorf("without a client certificate: HTTP %d, want no answer", r.code)
	}
	if r := curl(t, url+"/metrics", "--cacert", p.CA, "--cert", p.ClientCert, "--key", p.ClientKey); r.code != 200 {
		t.Errorf("with a client certificate: curl exit %d HTTP %d (%s)", r.exit, r.code, r.stderr)
	}
}

// Auth without TLS (a file with only users) on plain HTTP; rate_limit
// answers 429 beyond its burst, the open probe is exempt; a file that
// became invalid answers 500 (fail closed).
func TestCurlPlainAuthAndRateLimit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yml")
	writeFile(t, path, "basic_auth_users:\n  op: "+webtest.Hash(t, "pw")+"\nrate_limit:\n  interval: 1h\n  burst: 2\n")
	f := open(t, path)
	if f.TLS() {
		t.Fatal("TLS() without tls_server_config")
	}
	url := serve(t, f, hello, probes)
	for i, want := range []int{200, 200, 429} {
		if r := curl(t, url+"/api", "-u", "op:pw"); r.code != want {
			t.Errorf("request %d: HTTP %d, want %d", i+1, r.code, want)
		}
	}
	if r := curl(t, url+"/healthz"); r.code != 200 {
		t.Errorf("probe past the rate limit: HTTP %d, want 200", r.code)
	}
	writeFile(t, path, "basic_auth_users:\n  op: plain\n")
	if r := curl(t, url+"/api", "-u", "op:pw"); r.code != 500 {
		t.Errorf("invalid file: HTTP %d, want 500", r.code)
	}
}

// A listener inherited through a descriptor, as a hot-upgrade successor
// gets it (pkg/daemon), serves TLS all the same.
func TestCurlTLSOnInheritedListener(t *testing.T) {
	p, _, f := tlsFile(t, "")
	orig, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	file, err := orig.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	orig.Close()
	ln, err := net.FileListener(file)
	file.Close()
	if err != nil {
		t.Fatal(err)
	}
	url := serveOn(t, f, ln, hello, nil)
	if r := curl(t, url+"/", "--cacert", p.CA); r.code != 200 {
		t.Errorf("inherited listener: curl exit %d HTTP %d (%s)", r.exit, r.code, r.stderr)
	}
}

// A nil *File is plain HTTP without auth.
func TestNilFile(t *testing.T) {
	f, err := Open("", nil)
	if err != nil || f != nil {
		t.Fatalf("Open(\"\") = %v, %v", f, err)
	}
	if f.TLS() || f.Users() || f.Authenticates() || f.Path() != "" {
		t.Fatal("nil File claims TLS, users or a path")
	}
	url := serve(t, f, hello, nil)
	if r := curl(t, url+"/metrics"); r.code != 200 {
		t.Errorf("HTTP %d", r.code)
	}
}

// Open fails on what the exporter toolkit refuses, naming the file.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	p := webtest.NewPKI(t, dir, "a")
	for _, c := range []struct{ name, body, want string }{
		{"unknown key", "basic_auth_user:\n  a: b\n", "field basic_auth_user not found"},
		{"not bcrypt", "basic_auth_users:\n  a: plain\n", "hashedSecret too short"},
		{"missing key file", "tls_server_config:\n  cert_file: " + p.Cert + "\n", "missing one of key or key_file"},
		{"unreadable cert", "tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: " + p.Key + "\n", "/nonexistent.pem"},
		{"bad client auth", "tls_server_config:\n  cert_file: " + p.Cert + "\n  key_file: " + p.Key + "\n  client_auth_type: Sometimes\n", "Sometimes"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yml")
		writeFile(t, path, c.body)
		_, err := Open(path, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want one naming %s and containing %q", c.name, err, path, c.want)
		}
	}
	if _, err := Open(filepath.Join(dir, "absent.yml"), nil); err == nil || !strings.Contains(err.Error(), "absent.yml") {
		t.Errorf("missing file: err = %v", err)
	}
}
