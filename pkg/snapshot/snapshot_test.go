package snapshot

import (
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

var testNow = time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)

// running is a running instance with one routable backend whose latest
// sample ended age ago and describes m.
func running(age time.Duration, m maintenance.Maintenance) *Snapshot {
	return &Snapshot{
		Lifecycle:      Running,
		SampleInterval: time.Second,
		Sample:         &maintenance.Sample{Time: testNow.Add(-age), Cycle: 12, Duration: time.Millisecond, Maintenance: m},
		Backends:       []backend.Status{{ID: 0, Name: "backend-1", State: backend.Routable, Discovered: true}},
	}
}

// Failing maintenance cycles keep the instance ready as long as they keep
// publishing samples; readiness turns dataplane_sample_stale only when the
// samples stop, failing or not.
func TestReadinessWhileMaintenanceFails(t *testing.T) {
	failing := maintenance.Maintenance{Errors: 9, ConsecutiveFailures: 4, FailingSince: testNow.Add(-4 * time.Second), LastError: "maintenance: walk: dataplane: batch read flows: operation not permitted"}
	for _, c := range []struct {
		name   string
		snap   *Snapshot
		reason string
	}{
		{"healthy, fresh", running(400*time.Millisecond, maintenance.Maintenance{}), ""},
		{"failing, fresh", running(400*time.Millisecond, failing), ""},
		{"failing for long, fresh", running(400*time.Millisecond, maintenance.Maintenance{Errors: 1 << 20, ConsecutiveFailures: 1 << 20, FailingSince: testNow.Add(-240 * time.Hour), LastError: "x"}), ""},
		{"healthy, samples stopped", running(6*time.Second, maintenance.Maintenance{}), ReasonDataplaneSampleStale},
		{"failing, samples stopped", running(6*time.Second, failing), ReasonDataplaneSampleStale},
	} {
		t.Run(c.name, func(t *testing.T) {
			ready, reason := c.snap.Readiness(testNow)
			if ready != (c.reason == "") || reason != c.reason {
				t.Errorf("Readiness = %v %q, want reason %q", ready, reason, c.reason)
			}
			if stale := c.snap.SampleStale(testNow); stale != (c.reason == ReasonDataplaneSampleStale) {
				t.Errorf("SampleStale = %v", stale)
			}
		})
	}
}

func TestSampleStale(t *testing.T) {
	if (&Snapshot{Lifecycle: Running, SampleInterval: time.Second}).SampleStale(testNow) {
		t.Error("no sample yet reads as stale")
	}
	s := running(0, maintenance.Maintenance{})
	if d := s.StaleAfter(); d != 5*time.Second {
		t.Fatalf("StaleAfter = %v, want 5s (the floor)", d)
	}
	if running(5*time.Second, maintenance.Maintenance{}).SampleStale(testNow) {
		t.Error("a sample exactly StaleAfter old is stale")
	}
	if !running(5*time.Second+time.Millisecond, maintenance.Maintenance{}).SampleStale(testNow) {
		t.Error("a sample older than StaleAfter is not stale")
	}
}
