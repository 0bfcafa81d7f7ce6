package snapshot

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/status/api"
)

var testNow = time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)

// running is a running instance with one routable backend whose latest
// sample ended age ago and describes m.
func running(age time.Duration, m maintenance.Maintenance) *Snapshot {
	return &Snapshot{
		Lifecycle:      api.Running,
		ProviderSynced: true,
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
		reason api.Reason
	}{
		{"healthy, fresh", running(400*time.Millisecond, maintenance.Maintenance{}), ""},
		{"failing, fresh", running(400*time.Millisecond, failing), ""},
		{"failing for long, fresh", running(400*time.Millisecond, maintenance.Maintenance{Errors: 1 << 20, ConsecutiveFailures: 1 << 20, FailingSince: testNow.Add(-240 * time.Hour), LastError: "x"}), ""},
		{"healthy, samples stopped", running(6*time.Second, maintenance.Maintenance{}), api.ReasonDataplaneSampleStale},
		{"failing, samples stopped", running(6*time.Second, failing), api.ReasonDataplaneSampleStale},
	} {
		t.Run(c.name, func(t *testing.T) {
			ready, reason := c.snap.Readiness(testNow)
			if ready != (c.reason == "") || reason != c.reason {
				t.Errorf("Readiness = %v %q, want reason %q", ready, reason, c.reason)
			}
			if stale := c.snap.SampleStale(testNow); stale != (c.reason == api.ReasonDataplaneSampleStale) {
				t.Errorf("SampleStale = %v", stale)
			}
		})
	}
}

func TestSampleStale(t *testing.T) {
	if (&Snapshot{Lifecycle: api.Running, SampleInterval: time.Second}).SampleStale(testNow) {
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

// AddSample keeps the counters of every cycle that read them and the
// duration of every successful cycle; a failed cycle that could not read
// the counters leaves the last ones and says so.
func TestAddSample(t *testing.T) {
	var s Snapshot
	ok1 := &maintenance.Sample{Cycle: 1, Duration: 3 * time.Millisecond, Counters: dataplane.Counters{ShutdownResets: 1}}
	s.AddSample(ok1)
	if s.Sample != ok1 || s.Counters == nil || s.Counters.ShutdownResets != 1 || s.CountersError != "" {
		t.Fatalf("after a successful cycle: sample %p counters %+v error %q", s.Sample, s.Counters, s.CountersError)
	}
	failed := maintenance.Maintenance{Errors: 1, ConsecutiveFailures: 1, FailingSince: testNow, LastError: "maintenance: read clock: EPERM"}
	fresh := &maintenance.Sample{Cycle: 1, Duration: 20 * time.Millisecond, Maintenance: failed, Counters: dataplane.Counters{ShutdownResets: 2}}
	s.AddSample(fresh)
	if s.Counters.ShutdownResets != 2 || s.CountersError != "" {
		t.Errorf("failed cycle with fresh counters: %+v %q", s.Counters, s.CountersError)
	}
	stale := &maintenance.Sample{Cycle: 1, Duration: 30 * time.Millisecond, Maintenance: failed, CountersStale: true, Counters: dataplane.Counters{ShutdownResets: 2}}
	s.AddSample(stale)
	if s.Counters.ShutdownResets != 2 || !strings.Contains(s.CountersError, failed.LastError) {
		t.Errorf("failed cycle with stale counters: %+v %q", s.Counters, s.CountersError)
	}
	s.AddSample(&maintenance.Sample{Cycle: 2, Duration: 2 * time.Second, Counters: dataplane.Counters{ShutdownResets: 3}})
	if s.CountersError != "" || s.Counters.ShutdownResets != 3 {
		t.Errorf("after recovery: %+v %q", s.Counters, s.CountersError)
	}
	h := s.MaintenanceDurations
	if h.Count != 2 || math.Abs(h.Sum-2.003) > 1e-9 {
		t.Errorf("histogram count %d sum %v, want the 2 successful cycles, 2.003 s", h.Count, h.Sum)
	}
	b := h.Buckets()
	for le, want := range map[float64]uint64{.001: 0, .0025: 0, .005: 1, 1: 1, 2.5: 2, 10: 2} {
		if b[le] != want {
			t.Errorf("bucket le=%v: %d, want %d", le, b[le], want)
		}
	}
	if len(b) != 14 {
		t.Errorf("%d buckets, want 14", len(b))
	}
}

// A published histogram never changes when a later snapshot observes more.
func TestDurationHistogramIsAValue(t *testing.T) {
	var st Store
	st.Update(func(s *Snapshot) { s.AddSample(&maintenance.Sample{Duration: time.Millisecond}) })
	first := st.Load()
	st.Update(func(s *Snapshot) { s.AddSample(&maintenance.Sample{Duration: time.Millisecond}) })
	if first.MaintenanceDurations.Count != 1 || first.MaintenanceDurations.Buckets()[.001] != 1 {
		t.Errorf("the first snapshot's histogram changed: %+v", first.MaintenanceDurations)
	}
	if got := st.Load().MaintenanceDurations.Buckets()[.001]; got != 2 {
		t.Errorf("latest bucket le=0.001: %d, want 2", got)
	}
	// Above the last bound: counted, in no finite bucket.
	h := DurationHistogram{}.Observe(time.Minute)
	if h.Count != 1 || h.Buckets()[10] != 0 {
		t.Errorf("60 s: count %d, le=10 %d", h.Count, h.Buckets()[10])
	}
}

// SetCounters replaces the counters on a successful read and keeps the
// last ones on a failed read.
func TestSetCounters(t *testing.T) {
	var s Snapshot
	s.SetCounters(dataplane.Counters{}, errors.New("map gone"))
	if s.Counters != nil || s.CountersError != "map gone" {
		t.Errorf("failed first read: %+v %q", s.Counters, s.CountersError)
	}
	s.SetCounters(dataplane.Counters{ShutdownResets: 7}, nil)
	s.SetCounters(dataplane.Counters{}, errors.New("map gone"))
	if s.Counters == nil || s.Counters.ShutdownResets != 7 || s.CountersError != "map gone" {
		t.Errorf("failed read after a good one: %+v %q", s.Counters, s.CountersError)
	}
	s.SetCounters(dataplane.Counters{ShutdownResets: 8}, nil)
	if s.Counters.ShutdownResets != 8 || s.CountersError != "" {
		t.Errorf("good read: %+v %q", s.Counters, s.CountersError)
	}
}
