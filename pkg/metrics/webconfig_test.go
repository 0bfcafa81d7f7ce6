package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/webtest"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/weblisten"
)

// A web config file's basic_auth_users guard /metrics and the landing page.
func TestWebConfigUsers(t *testing.T) {
	f, err := weblisten.Open(webtest.UsersFile(t, "prometheus", "scr4pe"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	srv, err := New(Options{Store: &store, WebConfig: f, Now: func() time.Time { return fixtureNow }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, p := range []string{"/metrics", "/"} {
		for _, c := range []struct {
			user, pass string
			want       int
		}{{"", "", 401}, {"prometheus", "wrong", 401}, {"prometheus", "scr4pe", 200}} {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+p, nil)
			if c.user != "" {
				req.SetBasicAuth(c.user, c.pass)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("GET %s as %q/%q = %d, want %d", p, c.user, c.pass, resp.StatusCode, c.want)
			}
		}
	}
}
