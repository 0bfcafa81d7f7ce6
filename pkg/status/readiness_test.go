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
