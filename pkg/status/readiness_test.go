package status

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// TestReadyz checks /readyz and the document's readiness for each snapshot
// shape (reasons and their order: snapshot.Snapshot.Readiness, DESIGN §3),
// and that /healthz stays 200 in every one.
func TestReadyz(t *testing.T) {
	cases := []struct {
		name   string
		snap   *snapshot.Snapshot
		reason string // "" = ready
	}{
		{"nothing published", nil, "starting"},
		{"starting", clone(func(s *snapshot.Snapshot) { s.Lifecycle = api.Starting; s.Sample = nil }), "starting"},
		{"shutting down", clone(func(s *snapshot.Snapshot) {
			s.Lifecycle = api.ShuttingDown
			s.ShutdownDeadline = fixedNow.Add(12500 * time.Millisecond)
		}), "shutting_down"},
		{"no sample yet", clone(func(s *snapshot.Snapshot) { s.Sample = nil }), "awaiting_dataplane_sample"},
		{"stale sample", clone(func(s *snapshot.Snapshot) {
			smp := *s.Sample
			smp.Time = fixedNow.Add(-6 * time.Second)
			s.Sample = &smp
		}), "dataplane_sample_stale"},
		{"maintenance failing, sample fresh", clone(func(s *snapshot.Snapshot) {
			smp := *s.Sample
			smp.Maintenance = maintenance.Maintenance{Errors: 5, ConsecutiveFailures: 5, FailingSince: fixedNow.Add(-5 * time.Second), LastError: "maintenance: read clock: EPERM"}
			s.Sample = &smp
		}), ""},
		{"maintenance failing, samples stopped", clone(func(s *snapshot.Snapshot) {
			smp := *s.Sample
			smp.Time = fixedNow.Add(-6 * time.Second)
			smp.Maintenance = maintenance.Maintenance{Errors: 5, ConsecutiveFailures: 5, FailingSince: fixedNow.Add(-11 * time.Second), LastError: "maintenance: read clock: EPERM"}
			s.Sample = &smp
		}), "dataplane_sample_stale"},
		// A hand-off (SIGUSR2) keeps the old process ready; its maintenance
		// loop is stopped on purpose, so an aging sample is not stale.
		{"handing over", clone(func(s *snapshot.Snapshot) { s.Lifecycle = api.HandingOver }), ""},
		{"handing over, maintenance stopped", clone(func(s *snapshot.Snapshot) {
			s.Lifecycle = api.HandingOver
			smp := *s.Sample
			smp.Time = fixedNow.Add(-20 * time.Second)
			s.Sample = &smp
		}), ""},
		{"handing over, provider never synced", clone(func(s *snapshot.Snapshot) {
			s.Lifecycle = api.HandingOver
			s.ProviderSynced, s.ProviderError = false, "kubernetes: list: forbidden"
		}), "backend_provider_unhealthy"},
		{"provider never synced", clone(func(s *snapshot.Snapshot) {
			s.ProviderSynced, s.ProviderError = false, "kubernetes: list: forbidden"
		}), "backend_provider_unhealthy"},
		{"provider synced, then its API unreachable: the last set serves", clone(func(s *snapshot.Snapshot) {
			s.ProviderError = "kubernetes: watch: connection refused"
		}), ""},
		{"no routable backends", clone(func(s *snapshot.Snapshot) {
			bs := append([]backend.Status{}, s.Backends...)
			for i := range bs {
				if bs[i].State == backend.Routable {
					bs[i].State, bs[i].Reason = backend.Unreachable, "no neighbour"
				}
			}
			s.Backends = bs
		}), "no_routable_backends"},
		// SYNs keep being dropped for lack of a next hop and no pair is
		// created (snapshot.FIBHistory.Failing); a created pair ends it.
		{"fib lookups failing", clone(fibReads(0, 0, 0, 0)), "fib_lookup_failing"},
		{"fib lookups failing, then a pair created", clone(fibReads(0, 0, 0, 0, 1)), ""},
		{"fib lookups failing, no routable backends", clone(func(s *snapshot.Snapshot) {
			fibReads(0, 0, 0, 0)(s)
			s.Backends = nil
		}), "no_routable_backends"},
		{"ready", fixture(), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := newTestServer(t, c.snap, "", "")
			r := do(t, ts, "GET", "/readyz")
			wantCode, wantBody := http.StatusServiceUnavailable, c.reason
			if c.reason == "" {
				wantCode, wantBody = http.StatusOK, "ready"
			}
			if r.code != wantCode || r.body != wantBody {
				t.Errorf("/readyz = %d %q, want %d %q", r.code, r.body, wantCode, wantBody)
			}
			if h := do(t, ts, "GET", "/healthz"); h.code != http.StatusOK || h.body != "ok" {
				t.Errorf("/healthz = %d %q, want 200 \"ok\"", h.code, h.body)
			}
			var doc api.Document
			if err := json.Unmarshal([]byte(do(t, ts, "GET", "/api/v1/status").body), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Readiness.Ready != (c.reason == "") || doc.Readiness.Reason != api.Reason(c.reason) {
				t.Errorf("document readiness = %+v, want reason %q", doc.Readiness, c.reason)
			}
		})
	}
}

// TestShutdownSecondsLeft: the shutdown block appears only while shutting
// down and rounds the remaining window up.
func TestShutdownSecondsLeft(t *testing.T) {
	if d := Build(fixture(), fixedNow); d.Shutdown != nil {
		t.Errorf("running: shutdown = %+v, want nil", d.Shutdown)
	}
	s := clone(func(s *snapshot.Snapshot) {
		s.Lifecycle = api.ShuttingDown
		s.ShutdownDeadline = fixedNow.Add(12500 * time.Millisecond)
	})
	d := Build(s, fixedNow)
	if d.Shutdown == nil || d.Shutdown.SecondsLeft != 13 || d.Shutdown.DeadlineUnixMs != fixedNow.UnixMilli()+12500 {
		t.Errorf("shutdown = %+v, want 13 s left", d.Shutdown)
	}
	for _, b := range d.Backends {
		if b.AvailableForNewConnections {
			t.Errorf("backend %s available for new connections while shutting down", b.Name)
		}
	}
	if d := Build(s, fixedNow.Add(time.Minute)); d.Shutdown.SecondsLeft != 0 {
		t.Errorf("after the deadline: seconds_left = %d, want 0", d.Shutdown.SecondsLeft)
	}
}

// fibReads returns an edit that feeds the snapshot one counter read per
// argument: each adds 10 SYNs dropped for lack of a next hop and the given
// number of pairs created.
func fibReads(created ...uint64) func(*snapshot.Snapshot) {
	return func(s *snapshot.Snapshot) {
		c := s.Sample.Counters
		for _, n := range created {
			c.FIBMiss += 10
			c.PairsCreated += n
			s.SetCounters(c, nil)
		}
	}
}

// TestReadyzServices: with several services /readyz is 200 when every
// serving service is ready; an instance-wide reason is answered bare (the
// Ansible role compares the body with draining), the services' own as
// "service NAME: REASON" joined by "; " (DESIGN §9); a removed (draining)
// service does not count. /readyz?service=NAME answers for one service
// with a bare reason, 404 for a name no service has; a top-level file's
// one service answers by its instance name.
func TestReadyzServices(t *testing.T) {
	unroutable := func(svc int) func(*snapshot.Snapshot) {
		return func(s *snapshot.Snapshot) {
			svcs := append([]snapshot.Service{}, s.Services...)
			bs := append([]backend.Status{}, svcs[svc].Backends...)
			for i := range bs {
				if bs[i].State == backend.Routable {
					bs[i].State, bs[i].Reason = backend.Unreachable, "no neighbour"
				}
			}
			svcs[svc].Backends = bs
			s.Services = svcs
		}
	}
	neverSynced := func(svc int) func(*snapshot.Snapshot) {
		return func(s *snapshot.Snapshot) {
			svcs := append([]snapshot.Service{}, s.Services...)
			svcs[svc].ProviderSynced, svcs[svc].ProviderError = false, "kubernetes: list: forbidden"
			s.Services = svcs
		}
	}
	edit := func(fs ...func(*snapshot.Snapshot)) *snapshot.Snapshot {
		s := fixtureServices()
		for _, f := range fs {
			f(s)
		}
		return s
	}
	type probe struct {
		path string
		code int
		body string
	}
	cases := []struct {
		name   string
		snap   *snapshot.Snapshot
		probes []probe
	}{
		{"every service ready", edit(), []probe{
			{"/readyz", 200, "ready"},
			{"/readyz?service=web", 200, "ready"},
			{"/readyz?service=api", 200, "ready"},
			{"/readyz?service=old", 503, "removed"},
			{"/readyz?service=nope", 404, `no service "nope"`},
			{"/readyz?service=", 404, `no service ""`},
		}},
		{"one service without routable backends", edit(unroutable(1)), []probe{
			{"/readyz", 503, "service api: no_routable_backends"},
			{"/readyz?service=web", 200, "ready"},
			{"/readyz?service=api", 503, "no_routable_backends"},
		}},
		{"two services unready, in service order", edit(unroutable(1), neverSynced(0)), []probe{
			{"/readyz", 503, "service web: backend_provider_unhealthy; service api: no_routable_backends"},
			{"/readyz?service=web", 503, "backend_provider_unhealthy"},
		}},
		{"the removed service's last backend does not count", edit(unroutable(2)), []probe{
			{"/readyz", 200, "ready"},
		}},
		{"drained: bare, for every service", edit(unroutable(1), func(s *snapshot.Snapshot) { s.Drained = true }), []probe{
			{"/readyz", 503, "draining"},
			{"/readyz?service=web", 503, "draining"},
			{"/readyz?service=old", 503, "draining"},
			{"/readyz?service=nope", 404, `no service "nope"`},
		}},
		{"shutting down: bare", edit(func(s *snapshot.Snapshot) { s.Lifecycle = api.ShuttingDown }), []probe{
			{"/readyz", 503, "shutting_down"},
			{"/readyz?service=api", 503, "shutting_down"},
		}},
		{"fib lookups failing: bare, after the services' own", edit(fibReads(0, 0, 0, 0)), []probe{
			{"/readyz", 503, "fib_lookup_failing"},
			{"/readyz?service=web", 503, "fib_lookup_failing"},
		}},
		{"fib lookups failing and a service unready", edit(fibReads(0, 0, 0, 0), unroutable(0)), []probe{
			{"/readyz", 503, "service web: no_routable_backends"},
			{"/readyz?service=api", 503, "fib_lookup_failing"},
		}},
		{"a services: file with one service names it", edit(func(s *snapshot.Snapshot) { s.Services = s.Services[:1] }, unroutable(0)), []probe{
			{"/readyz", 503, "service web: no_routable_backends"},
		}},
		{"a top-level file's one service: bare, as before", clone(func(s *snapshot.Snapshot) { s.Backends = nil }), []probe{
			{"/readyz", 503, "no_routable_backends"},
			{"/readyz?service=web-lb", 503, "no_routable_backends"},
			{"/readyz?service=web", 404, `no service "web"`},
		}},
		{"nothing published", nil, []probe{
			{"/readyz?service=web", 503, "starting"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := newTestServer(t, c.snap, "", "")
			for _, p := range c.probes {
				if r := do(t, ts, "GET", p.path); r.code != p.code || r.body != p.body {
					t.Errorf("%s = %d %q, want %d %q", p.path, r.code, r.body, p.code, p.body)
				}
			}
			if c.snap == nil {
				return
			}
			// The document says the same.
			d := Build(c.snap, fixedNow)
			want := do(t, ts, "GET", "/readyz")
			if d.Readiness.Ready != (want.code == 200) || (!d.Readiness.Ready && string(d.Readiness.Reason) != want.body) {
				t.Errorf("document readiness %+v, /readyz %d %q", d.Readiness, want.code, want.body)
			}
			for _, svc := range d.Services {
				r := do(t, ts, "GET", "/readyz?service="+svc.Name)
				if svc.Readiness.Ready != (r.code == 200) || (!svc.Readiness.Ready && string(svc.Readiness.Reason) != r.body) {
					t.Errorf("service %s: document readiness %+v, /readyz?service= %d %q", svc.Name, svc.Readiness, r.code, r.body)
				}
			}
		})
	}
}
