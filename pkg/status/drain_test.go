package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// drainCall is one call of Options.Drain.
type drainCall struct {
	on bool
	by Requester
}

// drainRecorder records Drain's calls and answers err.
type drainRecorder struct {
	mu    sync.Mutex
	calls []drainCall
	err   error
}

func (d *drainRecorder) drain(on bool, by Requester) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	d.calls = append(d.calls, drainCall{on, by})
	return nil
}

func (d *drainRecorder) take() []drainCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.calls
	d.calls = nil
	return c
}

// drainServer serves fixture() over HTTP with Drain recorded by rec (nil:
// no Drain).
func drainServer(t *testing.T, user, pass string, rec *drainRecorder) *httptest.Server {
	t.Helper()
	srv := drainOptions(t, Options{Username: user, Password: pass}, rec)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// drainOptions builds a Server over fixture() from o with Drain recorded
// by rec (nil: no Drain).
func drainOptions(t *testing.T, o Options, rec *drainRecorder) *Server {
	t.Helper()
	store := &snapshot.Store{}
	store.Publish(fixture())
	o.Store, o.Now, o.Socket = store, func() time.Time { return fixedNow }, "/run/xlb/admin.sock"
	if rec != nil {
		o.Drain = rec.drain
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// socketClient serves srv's socket routes on a fresh admin socket and
// returns a client whose every request goes to it.
func socketClient(t *testing.T, srv *Server) (*http.Client, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "admin.sock")
	ln, err := ListenSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeSocket(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("ServeSocket: %v", err)
		}
	})
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, path
}

// post sends POST path through c and returns the status and the body.
func post(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	res, err := c.Post("http://xlb"+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// POST /api/v1/drain and /api/v1/undrain (DESIGN §6a) call Drain and
// answer the new state; other methods are 405. Over HTTP they need a
// proven identity (issue 28: never unauthenticated, even on loopback),
// and the requester they pass names the client's address and user; a
// browser's cross-origin POST is refused, so a web page cannot drain the
// instance through the operator's browser.
func TestDrainRoutes(t *testing.T) {
	rec := &drainRecorder{}
	ts := drainServer(t, "", "", rec)
	if r := do(t, ts, "POST", "/api/v1/drain"); r.code != http.StatusForbidden ||
		r.body != "drain over HTTP needs authentication: run xlbctl on this host as root (it uses the admin socket /run/xlb/admin.sock), or configure admin.auth or basic_auth_users in admin.web_config_file" {
		t.Fatalf("POST drain over HTTP without auth: %d %q, want 403 naming the socket", r.code, r.body)
	}
	if r := do(t, ts, "POST", "/api/v1/undrain"); r.code != http.StatusForbidden {
		t.Fatalf("POST undrain over HTTP without auth: %d, want 403", r.code)
	}
	if r := do(t, ts, "GET", "/api/v1/status"); r.code != http.StatusOK {
		t.Fatalf("GET status over HTTP without auth: %d, want 200 (reads stay open)", r.code)
	}
	if c := rec.take(); len(c) != 0 {
		t.Fatalf("Drain calls %v for refused requests", c)
	}

	authed := drainServer(t, "operator", "s3cret", rec)
	if r := do(t, authed, "POST", "/api/v1/drain"); r.code != http.StatusUnauthorized {
		t.Fatalf("POST drain without credentials: %d, want 401", r.code)
	}
	if r := do(t, authed, "POST", "/api/v1/drain", "operator", "s3cret"); r.code != http.StatusOK || r.body != "{\"drained\":true}\n" || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("POST drain with credentials: %d %q %q", r.code, r.body, r.header.Get("Content-Type"))
	}
	if r := do(t, authed, "POST", "/api/v1/undrain", "operator", "s3cret"); r.code != http.StatusOK || r.body != "{\"drained\":false}\n" {
		t.Fatalf("POST undrain with credentials: %d %q", r.code, r.body)
	}
	if r := do(t, authed, "GET", "/api/v1/drain", "operator", "s3cret"); r.code != http.StatusMethodNotAllowed {
		t.Fatalf("GET drain: %d, want 405", r.code)
	}
	req, _ := http.NewRequest("POST", authed.URL+"/api/v1/drain", nil)
	req.SetBasicAuth("operator", "s3cret")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	res, err := authed.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin browser POST: %d, want 403", res.StatusCode)
	}
	calls := rec.take()
	if len(calls) != 2 || !calls[0].on || calls[1].on {
		t.Fatalf("Drain calls %+v, want drain then undrain (nothing for the refused requests)", calls)
	}
	if by := calls[0].by; by.Socket || by.User != "operator" || !strings.HasPrefix(by.Remote, "127.0.0.1:") ||
		by.String() != "http "+by.Remote+" user operator" {
		t.Fatalf("requester %+v (%q), want http from 127.0.0.1, user operator", by, by.String())
	}

	refused := drainServer(t, "operator", "s3cret", &drainRecorder{err: errors.New("the instance is shutting down")})
	if r := do(t, refused, "POST", "/api/v1/drain", "operator", "s3cret"); r.code != http.StatusConflict || r.body != "the instance is shutting down" {
		t.Fatalf("refused drain: %d %q, want 409 with the reason", r.code, r.body)
	}
	none := drainServer(t, "operator", "s3cret", nil)
	if r := do(t, none, "POST", "/api/v1/drain", "operator", "s3cret"); r.code != http.StatusServiceUnavailable {
		t.Fatalf("no Drain: %d, want 503", r.code)
	}
}

// Over the admin socket (issue 28) drain and undrain need no credentials,
// even with admin auth configured, and the requester is the peer
// process's uid and pid (SO_PEERCRED); the socket is mode 0600 and serves
// the read-only routes too.
func TestDrainOverSocket(t *testing.T) {
	rec := &drainRecorder{}
	srv := drainOptions(t, Options{Username: "operator", Password: "s3cret"}, rec)
	c, path := socketClient(t, srv)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode(); m&os.ModeSocket == 0 || m.Perm() != 0o600 {
		t.Fatalf("admin socket mode %v, want a socket, 0600", m)
	}
	if di, err := os.Stat(filepath.Dir(path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("admin socket directory: %v %v, want 0700", di.Mode(), err)
	}
	if code, body := post(t, c, "/api/v1/drain"); code != http.StatusOK || body != "{\"drained\":true}\n" {
		t.Fatalf("POST drain over the socket: %d %q", code, body)
	}
	if code, body := post(t, c, "/api/v1/undrain"); code != http.StatusOK || body != "{\"drained\":false}\n" {
		t.Fatalf("POST undrain over the socket: %d %q", code, body)
	}
	calls := rec.take()
	if len(calls) != 2 || !calls[0].on || calls[1].on {
		t.Fatalf("Drain calls %+v, want drain then undrain", calls)
	}
	want := Requester{Socket: true, UID: os.Getuid(), PID: os.Getpid()}
	if by := calls[0].by; by != want || by.String() != fmt.Sprintf("unix socket uid %d pid %d", os.Getuid(), os.Getpid()) {
		t.Fatalf("requester %+v (%q), want %+v", by, by.String(), want)
	}
	res, err := c.Get("http://xlb/api/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET status over the socket: %d", res.StatusCode)
	}
}

// ListenSocket replaces a socket a dead process left and refuses one
// that another process serves or a path that is not a socket.
func TestListenSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "admin.sock")
	ln, err := ListenSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ListenSocket(path); err == nil || !strings.Contains(err.Error(), "another process serves it") {
		t.Fatalf("a second ListenSocket while the first serves: %v", err)
	}
	ln.Close() // a crash: the file stays, nobody listens
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the socket file after Close: %v, want it kept (a successor serves on it)", err)
	}
	ln, err = ListenSocket(path)
	if err != nil {
		t.Fatalf("ListenSocket over a stale socket: %v", err)
	}
	ln.Close()
	if err := RemoveSocket(path); err != nil {
		t.Fatal(err)
	}
	if err := RemoveSocket(path); err != nil {
		t.Fatalf("RemoveSocket of a missing file: %v", err)
	}
	plain := filepath.Join(dir, "file")
	os.WriteFile(plain, nil, 0o600)
	if _, err := ListenSocket(plain); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("ListenSocket over a plain file: %v", err)
	}
}

// The HTTP listener answers only requests whose Host names it (issue 28:
// DNS rebinding): an allowed name, the address the request arrived on,
// or none (HTTP/1.0); any other is 400, the probes excepted.
func TestHostAllowlist(t *testing.T) {
	srv := drainOptions(t, Options{AllowedHosts: []string{"localhost", "lb1.example.net"}}, nil)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	port := ts.URL[strings.LastIndexByte(ts.URL, ':'):]
	for _, tc := range []struct {
		host, path string
		code       int
	}{
		{"localhost" + port, "/api/v1/status", http.StatusOK},
		{"LB1.example.NET", "/api/v1/status", http.StatusOK},
		{"127.0.0.1" + port, "/api/v1/status", http.StatusOK}, // the address it arrived on
		{"", "/api/v1/status", http.StatusOK},
		{"rebind.attacker.example" + port, "/api/v1/status", http.StatusBadRequest},
		{"127.0.0.2" + port, "/admin/", http.StatusBadRequest},
		{"[::1]" + port, "/api/v1/status", http.StatusBadRequest}, // not listed here, not this connection's
		{"rebind.attacker.example", "/readyz", http.StatusOK},
		{"rebind.attacker.example", "/healthz", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", ts.URL+tc.path, nil)
		req.Host = tc.host
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.code {
			t.Errorf("GET %s Host %q: %d %q, want %d", tc.path, tc.host, res.StatusCode, b, tc.code)
		}
	}
}

// A drained instance answers /readyz 503 "draining", and the document
// says drained.
func TestDrainedReadiness(t *testing.T) {
	s := fixture()
	if d := Build(s, fixedNow).Drain; d != nil {
		t.Fatalf("drain %+v while not drained, want null", d)
	}
	s.Drained, s.DrainedSince, s.DrainedBy, s.DrainRestored = true, fixedNow.Add(-time.Minute), "unix socket uid 0 pid 42", true
	if d := Build(s, fixedNow).Drain; d == nil || *d != (api.Drain{SinceUnixMs: fixedNow.Add(-time.Minute).UnixMilli(), By: "unix socket uid 0 pid 42", Restored: true}) {
		t.Fatalf("drain %+v, want since a minute ago, by the socket's peer, restored", d)
	}
	ts := newTestServer(t, s, "", "")
	if r := do(t, ts, "GET", "/readyz"); r.code != http.StatusServiceUnavailable || r.body != "draining" {
		t.Fatalf("readyz: %d %q, want 503 draining", r.code, r.body)
	}
	if doc := Build(s, fixedNow); !doc.Drained || doc.Readiness.Ready || doc.Readiness.Reason != "draining" {
		t.Fatalf("document drained %v readiness %+v", doc.Drained, doc.Readiness)
	}
}
