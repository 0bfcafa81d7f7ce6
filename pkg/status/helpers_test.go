package status

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

// newTestServer serves s (nil: nothing published) at fixedNow.
func newTestServer(t *testing.T, s *snapshot.Snapshot, user, pass string) *httptest.Server {
	t.Helper()
	store := &snapshot.Store{}
	if s != nil {
		store.Publish(s)
	}
	srv, err := New(Options{Store: store, Username: user, Password: pass, Now: func() time.Time { return fixedNow }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

type response struct {
	code   int
	header http.Header
	body   string
}

// do sends one request without following redirects.
func do(t *testing.T, ts *httptest.Server, method, path string, auth ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, string(b)}
}

// wantServed serves snap (nil: nothing published) and checks the JSON
// values at the given paths (lookup's syntax) of /api/v1/status; name
// prefixes the errors.
func wantServed(t *testing.T, name string, snap *snapshot.Snapshot, want map[string]any) {
	t.Helper()
	ts := newTestServer(t, snap, "", "")
	var v any
	if err := json.Unmarshal([]byte(do(t, ts, "GET", "/api/v1/status").body), &v); err != nil {
		t.Fatal(err)
	}
	for path, w := range want {
		if got, ok := lookup(v, path); !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %s = %v (present %v), want %v", name, path, got, ok, w)
		}
	}
}
