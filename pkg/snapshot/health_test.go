package snapshot

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/backend/health"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// Issue 14: a provider that synced once keeps its last set through errors
// (ready); one that never synced makes the instance unready, unless it
// serves a routable set handed over or adopted from its predecessor
// (stale, issue 28: a reload during a Kubernetes API outage).
func TestReadinessProviderSync(t *testing.T) {
	for _, tc := range []struct {
		name          string
		synced, stale bool
		err           string
		want          api.Reason
	}{
		{"synced, healthy", true, false, "", ""},
		{"synced, API unreachable since", true, false, "kubernetes: watch: connection refused", ""},
		{"never synced", false, false, "kubernetes: list: forbidden", api.ReasonBackendProviderUnhealthy},
		{"never synced, no error yet", false, false, "", api.ReasonBackendProviderUnhealthy},
		{"never synced, serving an inherited set", false, true, "kubernetes: list: connection refused", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := running(0, maintenance.Maintenance{})
			s.ProviderSynced, s.ProviderStale, s.ProviderError = tc.synced, tc.stale, tc.err
			if _, reason := s.Readiness(testNow); reason != tc.want {
				t.Fatalf("reason %q, want %q", reason, tc.want)
			}
		})
	}
}

// An unhealthy backend is reported unhealthy whether or not pairs still
// reference it (they are untouched, DESIGN §6b), and does not count as
// routable: with every backend unhealthy, readiness is
// no_routable_backends.
func TestUnhealthyBackendState(t *testing.T) {
	s := running(0, maintenance.Maintenance{})
	s.Sample.Backends = []maintenance.BackendSample{{ID: 0, Active: 3}}
	s.Backends[0].State = backend.Unhealthy
	if st, ok := s.BackendState(s.Backends[0]); !ok || st != api.Unhealthy {
		t.Fatalf("state %q listed %v, want unhealthy", st, ok)
	}
	if _, reason := s.Readiness(testNow); reason != api.ReasonNoRoutableBackends {
		t.Fatalf("every backend unhealthy: reason %q, want %q", reason, api.ReasonNoRoutableBackends)
	}
}

func TestBackendHealth(t *testing.T) {
	if h := BackendHealth(backend.Status{}); h != nil {
		t.Fatalf("without checks: %+v, want nil", h)
	}
	if h := BackendHealth(backend.Status{Health: &backend.Health{}}); h == nil || h.Healthy || h.LastResult != "" || h.LastCheckUnixMs != 0 {
		t.Fatalf("before the first check: %+v, want pending", h)
	}
	at := time.UnixMilli(1_800_000_000_123)
	b := backend.Status{Health: &backend.Health{Known: true, OK: 4, Failed: 3,
		Last: health.Result{OK: false, At: at, Took: 1500 * time.Microsecond, Err: "connect: connection refused"}}}
	want := api.BackendHealth{LastResult: api.HealthCheckFail, LastCheckUnixMs: at.UnixMilli(), LastCheckMs: 1.5,
		LastError: "connect: connection refused", ChecksOKTotal: 4, ChecksFailedTotal: 3}
	if h := BackendHealth(b); h == nil || *h != want {
		t.Fatalf("failing: %+v, want %+v", h, want)
	}
}

// TestDepartedListedWhilePairsOnly (issue 28, the seed's "draining while
// flow entries still reference it"): a backend that left discovery is
// listed draining while a sample counts a pair toward it, and not once
// the sample counts none, though its id stays its own for
// backend.IDReuseQuiet after the last pair (the reuse quiet time is the
// id's, not the status's).
func TestDepartedListedWhilePairsOnly(t *testing.T) {
	ip := netip.MustParseAddr("198.51.100.21")
	m := backend.NewManager(backend.NewStatic(nil), nil, nil, backend.Options{Known: []backend.Known{{ID: 4, IP: ip, Name: "web-4"}}})
	m.NotePairs(testNow.Add(-time.Second), []uint32{4})
	departed := m.Snapshot()
	if len(departed) != 1 || departed[0].State != backend.Departed {
		t.Fatalf("manager %+v, want web-4 departed", departed)
	}
	s := running(0, maintenance.Maintenance{})
	s.Backends = append(s.Backends, departed[0])
	for _, tc := range []struct {
		name   string
		sample maintenance.BackendSample
		listed bool
	}{
		{"an active pair", maintenance.BackendSample{ID: 4, Active: 1}, true},
		{"a pair in time-wait", maintenance.BackendSample{ID: 4, TimeWait: 1}, true},
		{"its last pair gone a second ago", maintenance.BackendSample{ID: 4}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Sample.Backends = []maintenance.BackendSample{tc.sample}
			st, listed := s.BackendState(departed[0])
			if listed != tc.listed || (listed && st != api.Draining) {
				t.Errorf("state %q listed %v, want listed %v (draining)", st, listed, tc.listed)
			}
		})
	}
}
