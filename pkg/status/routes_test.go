package status

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

func TestRoutes(t *testing.T) {
	ts := newTestServer(t, fixture(), "", "")
	cases := []struct {
		method, path string
		code         int
		check        func(t *testing.T, r response)
	}{
		{"GET", "/", http.StatusFound, func(t *testing.T, r response) {
			if l := r.header.Get("Location"); l != "/admin/" {
				t.Errorf("Location = %q", l)
			}
		}},
		{"GET", "/nope", http.StatusNotFound, nil},
		{"GET", "/api/v1/status/extra", http.StatusNotFound, nil},
		{"GET", "/api/v2/status", http.StatusNotFound, nil},
		{"GET", "/admin/nope.js", http.StatusNotFound, nil},
		{"POST", "/healthz", http.StatusMethodNotAllowed, func(t *testing.T, r response) {
			if a := r.header.Get("Allow"); !strings.Contains(a, "GET") {
				t.Errorf("Allow = %q", a)
			}
		}},
		{"PUT", "/api/v1/status", http.StatusMethodNotAllowed, nil},
		{"DELETE", "/readyz", http.StatusMethodNotAllowed, nil},
		{"POST", "/admin/", http.StatusMethodNotAllowed, nil},
		{"POST", "/", http.StatusMethodNotAllowed, nil},
		{"HEAD", "/healthz", http.StatusOK, func(t *testing.T, r response) {
			if r.body != "" {
				t.Errorf("HEAD body %q", r.body)
			}
		}},
		{"HEAD", "/api/v1/status", http.StatusOK, nil},
		{"GET", "/healthz", http.StatusOK, func(t *testing.T, r response) {
			if r.body != "ok" || r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("body %q, Cache-Control %q", r.body, r.header.Get("Cache-Control"))
			}
		}},
		{"GET", "/admin/", http.StatusOK, func(t *testing.T, r response) {
			if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
				!strings.Contains(r.body, `src="console.js"`) || !strings.Contains(r.body, "<table") {
				t.Errorf("console page: %s %q", r.header.Get("Content-Type"), r.body)
			}
			if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("CSP = %q", csp)
			}
			// No external assets: nothing is fetched from another origin.
			if strings.Contains(r.body, "http://") || strings.Contains(r.body, "https://") || strings.Contains(r.body, "//cdn") {
				t.Error("console page references an external asset")
			}
		}},
		{"GET", "/admin/console.js", http.StatusOK, func(t *testing.T, r response) {
			if !strings.Contains(r.body, "api/v1/status") || !strings.Contains(r.body, "1000") {
				t.Error("console script does not poll the status API every second")
			}
			if strings.Contains(r.body, "innerHTML") {
				t.Error("console script uses innerHTML")
			}
		}},
		{"GET", "/admin/console.css", http.StatusOK, nil},
	}
	for _, c := range cases {
		r := do(t, ts, c.method, c.path)
		if r.code != c.code {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, r.code, c.code)
			continue
		}
		if c.check != nil {
			t.Run(c.method+" "+c.path, func(t *testing.T) { c.check(t, r) })
		}
	}
}

// TestServeAndShutdown runs the real listener: Listen on loopback, serve,
// answer a probe, shut down, Serve returns nil.
func TestServeAndShutdown(t *testing.T) {
	store := &snapshot.Store{}
	store.Publish(fixture())
	srv, err := New(Options{Address: netip.MustParseAddr("127.0.0.1"), Port: 0, Store: store,
		Now: func() time.Time { return fixedNow }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	res, err := http.Get("http://" + ln.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(b) != "ready" {
		t.Errorf("/readyz = %d %q", res.StatusCode, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after Shutdown = %v, want nil", err)
	}
}
