package status

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

// drainServer serves fixture() with Drain recording its calls and
// answering err.
func drainServer(t *testing.T, user, pass string, drain func(bool) error) *httptest.Server {
	t.Helper()
	store := &snapshot.Store{}
	store.Publish(fixture())
	srv, err := New(Options{Store: store, Username: user, Password: pass, Now: func() time.Time { return fixedNow }, Drain: drain})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// POST /api/v1/drain and /api/v1/undrain (DESIGN §6a) call Drain and
// answer the new state; other methods are 405; with auth configured they
// need it like the API; a browser's cross-origin POST is refused, so a
// web page cannot drain the instance through the operator's browser.
func TestDrainRoutes(t *testing.T) {
	var mu sync.Mutex
	var calls []bool
	record := func(on bool) error { mu.Lock(); defer mu.Unlock(); calls = append(calls, on); return nil }

	ts := drainServer(t, "", "", record)
	if r := do(t, ts, "POST", "/api/v1/drain"); r.code != http.StatusOK || r.body != "{\"drained\":true}\n" || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("POST drain: %d %q %q", r.code, r.body, r.header.Get("Content-Type"))
	}
	if r := do(t, ts, "POST", "/api/v1/undrain"); r.code != http.StatusOK || r.body != "{\"drained\":false}\n" {
		t.Fatalf("POST undrain: %d %q", r.code, r.body)
	}
	if r := do(t, ts, "GET", "/api/v1/drain"); r.code != http.StatusMethodNotAllowed {
		t.Fatalf("GET drain: %d, want 405", r.code)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/api/v1/drain", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin browser POST: %d, want 403", res.StatusCode)
	}
	if !slices.Equal(calls, []bool{true, false}) {
		t.Fatalf("Drain calls %v, want [true false] (nothing for the refused requests)", calls)
	}

	calls = nil
	authed := drainServer(t, "operator", "s3cret", record)
	if r := do(t, authed, "POST", "/api/v1/drain"); r.code != http.StatusUnauthorized {
		t.Fatalf("POST drain without credentials: %d, want 401", r.code)
	}
	if r := do(t, authed, "POST", "/api/v1/drain", "operator", "s3cret"); r.code != http.StatusOK {
		t.Fatalf("POST drain with credentials: %d", r.code)
	}
	if !slices.Equal(calls, []bool{true}) {
		t.Fatalf("Drain calls %v, want [true]", calls)
	}

	refused := drainServer(t, "", "", func(bool) error { return errors.New("the instance is shutting down") })
	if r := do(t, refused, "POST", "/api/v1/drain"); r.code != http.StatusConflict || r.body != "the instance is shutting down" {
		t.Fatalf("refused drain: %d %q, want 409 with the reason", r.code, r.body)
	}
	none := newTestServer(t, fixture(), "", "")
	if r := do(t, none, "POST", "/api/v1/drain"); r.code != http.StatusServiceUnavailable {
		t.Fatalf("no Drain: %d, want 503", r.code)
	}
}

// A drained instance answers /readyz 503 "draining", and the document
// says drained.
func TestDrainedReadiness(t *testing.T) {
	s := fixture()
	s.Drained = true
	ts := newTestServer(t, s, "", "")
	if r := do(t, ts, "GET", "/readyz"); r.code != http.StatusServiceUnavailable || r.body != "draining" {
		t.Fatalf("readyz: %d %q, want 503 draining", r.code, r.body)
	}
	if doc := Build(s, fixedNow); !doc.Drained || doc.Readiness.Ready || doc.Readiness.Reason != "draining" {
		t.Fatalf("document drained %v readiness %+v", doc.Drained, doc.Readiness)
	}
}
