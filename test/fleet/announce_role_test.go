package fleet

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// fakeStatus is a status API that answers /api/v1/status with Basic auth
// (AdminUser, AdminPassword) and a document whose bgp.announced is what
// announced returns for the n-th request (from 1).
type fakeStatus struct {
	drained   bool
	announced func(n int) []string

	mu       sync.Mutex
	requests int
}

func (s *fakeStatus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u, p, ok := r.BasicAuth(); !ok || u != AdminUser || p != AdminPassword {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.URL.Path != "/api/v1/status" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.requests++
	n := s.requests
	s.mu.Unlock()
	var d api.Document
	d.Listen.IP = VIP.String()
	d.Drained = s.drained
	d.BGP = &api.BGP{
		Peers:     []api.BGPPeer{{Address: RouterBack.String(), ASN: RouterASN, State: "active"}},
		Announced: s.announced(n),
	}
	if len(d.BGP.Announced) > 0 {
		d.BGP.Peers[0].State = "established"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(d)
}

func (s *fakeStatus) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// runAnnounced runs testdata/announced.yml (the role's tasks/announced.yml
// on the controller) against the fake status API at url with the given
// role variables.
func runAnnounced(t *testing.T, url string, vars map[string]any) (string, error) {
	t.Helper()
	requireTools(t, "ansible-playbook")
	all := map[string]any{
		"xlb_admin_url":      url,
		"xlb_admin_username": AdminUser,
		"xlb_admin_password": AdminPassword,
	}
	for k, v := range vars {
		all[k] = v
	}
	return runTestPlaybook(t, "announced.yml", t.TempDir(), all)
}

// TestRoleWaitsForAnnouncement: with xlb_bgp, the role's wait after a
// start, in a verification and after a return (tasks/announced.yml) ends
// only once the status's bgp.announced holds every prefix of
// xlb_bgp.announce ("listen": the listen address /32), polling the status
// API with the admin credentials; a speaker that never announces fails
// the host after xlb_bgp_announce_timeout with the missing prefixes and
// the peers' states; a drained instance is not waited for.
func TestRoleWaitsForAnnouncement(t *testing.T) {
	const other = "203.0.113.0/24"
	bgp := func(announce ...string) map[string]any {
		m := map[string]any{"local_asn": XLBASN, "peers": []map[string]any{{"address": RouterBack.String(), "asn": RouterASN}}}
		if len(announce) > 0 {
			m["announce"] = announce
		}
		return m
	}
	const waitTask = "Wait until the speaker announces the service's prefixes (status bgp.announced)"
	const checkTask = "Check that the speaker announces the service's prefixes"
	for _, c := range []struct {
		name      string
		bgp       map[string]any
		drained   bool
		timeout   int // xlb_bgp_announce_timeout, s
		announced func(n int) []string
		// ok: the run succeeds; minRequests, maxRequests: the status reads.
		ok                       bool
		minRequests, maxRequests int
		msg                      string
	}{
		{
			name:    "the listen address, announced at the 4th read",
			bgp:     bgp(),
			timeout: 30,
			announced: func(n int) []string {
				if n < 4 {
					return nil
				}
				return []string{vipPrefix.String()}
			},
			ok: true, minRequests: 4, maxRequests: 4, msg: "announces " + vipPrefix.String(),
		},
		{
			name:    "every listed prefix, the second one from the 3rd read",
			bgp:     bgp("listen", other),
			timeout: 30,
			announced: func(n int) []string {
				if n < 3 {
					return []string{vipPrefix.String()}
				}
				return []string{vipPrefix.String(), other}
			},
			ok: true, minRequests: 3, maxRequests: 3, msg: "announces " + vipPrefix.String() + ", " + other,
		},
		{
			name:      "never announced: fails after the timeout",
			bgp:       bgp(),
			timeout:   2,
			announced: func(int) []string { return nil },
			// One read at once, then one every second for 2 s.
			ok: false, minRequests: 3, maxRequests: 3,
			msg: "not announcing " + vipPrefix.String() + " to any established BGP peer after 2 s (xlb_bgp_announce_timeout); announced: []; peers: " +
				RouterBack.String() + " active",
		},
		{
			name:      "drained: not waited for",
			bgp:       bgp(),
			drained:   true,
			timeout:   30,
			announced: func(int) []string { return nil },
			ok:        true, minRequests: 1, maxRequests: 1, msg: "drained through the admin API",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := &fakeStatus{drained: c.drained, announced: c.announced}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			out, err := runAnnounced(t, srv.URL, map[string]any{
				"xlb_bgp":                    c.bgp,
				"xlb_bgp_announce_timeout":   c.timeout,
				"xlb_bgp_route_poll_seconds": 1,
			})
			if c.ok != (err == nil) {
				t.Fatalf("announced.yml: %v, want success %v\n%s", err, c.ok, Tail(out, 40))
			}
			if st := TaskStatus(out, waitTask, "localhost"); st != "ok" {
				t.Errorf("%q: %q, want ok\n%s", waitTask, st, Tail(out, 40))
			}
			want := "ok"
			if !c.ok {
				want = "fatal"
			}
			if st := TaskStatus(out, checkTask, "localhost"); st != want {
				t.Errorf("%q: %q, want %s\n%s", checkTask, st, want, Tail(out, 40))
			}
			if n := fake.count(); n < c.minRequests || n > c.maxRequests {
				t.Errorf("%d status reads, want %d to %d", n, c.minRequests, c.maxRequests)
			}
			if !strings.Contains(strings.Join(strings.Fields(out), " "), c.msg) {
				t.Errorf("output lacks %q\n%s", c.msg, Tail(out, 40))
			}
		})
	}
}
