package status

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/internal/webtest"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/weblisten"
)

// A web config file's basic_auth_users guard the API, the console and
// the commands; the probes stay open. admin.auth beside them is refused.
func TestWebConfigUsers(t *testing.T) {
	store := &snapshot.Store{}
	store.Publish(fixture())
	f, err := weblisten.Open(webtest.UsersFile(t, "operator", "s3cret"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &drainRecorder{}
	srv, err := New(Options{Store: store, WebConfig: f, Drain: rec.drain})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := do(t, ts, "GET", p); r.code == http.StatusUnauthorized {
			t.Errorf("probe %s without credentials = 401, want it open", p)
		}
	}
	for _, p := range []string{"/api/v1/status", "/admin/"} {
		if r := do(t, ts, "GET", p); r.code != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic") {
			t.Errorf("GET %s without credentials = %d (WWW-Authenticate %q), want 401", p, r.code, r.header.Get("WWW-Authenticate"))
		}
		if r := do(t, ts, "GET", p, "operator", "s3cret"); r.code != http.StatusOK {
			t.Errorf("GET %s with the file's user = %d, want 200", p, r.code)
		}
	}
	if r := do(t, ts, "POST", "/api/v1/drain"); r.code != http.StatusUnauthorized {
		t.Errorf("POST /api/v1/drain without credentials = %d, want 401", r.code)
	}
	// The file's user is the drain's requester (issue 28).
	if r := do(t, ts, "POST", "/api/v1/drain", "operator", "s3cret"); r.code != http.StatusOK {
		t.Errorf("POST /api/v1/drain with the file's user = %d, want 200", r.code)
	}
	if c := rec.take(); len(c) != 1 || c[0].by.User != "operator" || c[0].by.Socket {
		t.Errorf("Drain calls %+v, want one by the HTTP user operator", c)
	}
	if _, err := New(Options{Store: store, WebConfig: f, Username: "operator", Password: "x"}); err == nil || !strings.Contains(err.Error(), "basic_auth_users") {
		t.Errorf("admin.auth with file users: err = %v", err)
	}
}
