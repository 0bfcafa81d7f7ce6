package snapshot

import (
	"fmt"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// fibSample is a fresh maintenance sample whose counters read miss SYNs
// dropped for lack of a next hop and created pairs.
func fibSample(miss, created uint64) *maintenance.Sample {
	return &maintenance.Sample{Time: testNow.Add(-100 * time.Millisecond), Cycle: 1, Duration: time.Millisecond,
		Counters: dataplane.Counters{FIBMiss: miss, PairsCreated: created}}
}

// reads is a sequence of counter reads: {FIBMiss, PairsCreated}.
type reads [][2]uint64

// readiness feeds the reads, one maintenance sample each, to a running
// instance with a routable backend and returns the reason after each.
func readiness(rs reads) []api.Reason {
	s := running(0, maintenance.Maintenance{})
	var out []api.Reason
	for _, r := range rs {
		s.AddSample(fibSample(r[0], r[1]))
		_, reason := s.Readiness(testNow)
		out = append(out, reason)
	}
	return out
}

// The rule of FIBHistory.Failing on synthetic samples: each case lists the
// reads and the reason expected after each one ("" ready, F
// fib_lookup_failing).
func TestFIBLookupFailing(t *testing.T) {
	const F = api.ReasonFIBLookupFailing
	for _, c := range []struct {
		name  string
		reads reads
		want  []api.Reason
	}{
		{"healthy: pairs created, no misses",
			reads{{0, 10}, {0, 20}, {0, 30}, {0, 40}, {0, 50}}, []api.Reason{"", "", "", "", ""}},
		{"every SYN dropped: failing once the window is full",
			reads{{0, 100}, {5, 100}, {10, 100}, {15, 100}, {20, 100}}, []api.Reason{"", "", "", F, F}},
		{"too few reads to judge",
			reads{{0, 100}, {5, 100}, {10, 100}}, []api.Reason{"", "", ""}},
		{"a pair created: ready at once, and for the whole window",
			reads{{0, 100}, {5, 100}, {10, 100}, {15, 100}, {20, 101}, {25, 101}, {30, 101}, {35, 101}},
			[]api.Reason{"", "", "", F, "", "", "", F}},
		{"misses stop: ready at once",
			reads{{0, 100}, {5, 100}, {10, 100}, {15, 100}, {15, 100}, {15, 100}}, []api.Reason{"", "", "", F, "", ""}},
		{"one lost SYN (a neighbour being resolved) is not failing",
			reads{{0, 100}, {0, 100}, {0, 100}, {1, 100}, {1, 100}, {1, 100}}, []api.Reason{"", "", "", "", "", ""}},
		{"misses in two of three intervals, the latest included",
			reads{{0, 100}, {3, 100}, {3, 100}, {6, 100}}, []api.Reason{"", "", "", F}},
		{"misses in two intervals, but not the latest",
			reads{{0, 100}, {3, 100}, {6, 100}, {6, 100}}, []api.Reason{"", "", "", ""}},
		{"misses while pairs are created (one backend unreachable, others fine)",
			reads{{0, 100}, {5, 110}, {10, 120}, {15, 130}, {20, 140}}, []api.Reason{"", "", "", "", ""}},
		{"counters that go backwards (a new flow map) are not failing",
			reads{{50, 100}, {55, 100}, {60, 100}, {0, 0}, {5, 0}, {10, 0}}, []api.Reason{"", "", "", "", "", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := readiness(c.reads); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("reasons %q, want %q", got, c.want)
			}
		})
	}
}

// Other reasons come first; counter reads outside the maintenance loop
// (the shutdown window) and failed cycles that could not read the counters
// feed the history as they feed Counters.
func TestFIBLookupFailingOrderAndSources(t *testing.T) {
	s := running(0, maintenance.Maintenance{})
	for i := range uint64(FIBWindow + 1) {
		s.AddSample(fibSample(10*i, 7))
	}
	if _, r := s.Readiness(testNow); r != api.ReasonFIBLookupFailing {
		t.Fatalf("reason %q", r)
	}
	noBackends := *s
	noBackends.Backends = nil
	if _, r := noBackends.Readiness(testNow); r != api.ReasonNoRoutableBackends {
		t.Errorf("without routable backends: %q, want no_routable_backends first", r)
	}
	stale := *s
	stale.Sample = fibSample(40, 7)
	stale.Sample.Time = testNow.Add(-time.Minute)
	if _, r := stale.Readiness(testNow); r != api.ReasonDataplaneSampleStale {
		t.Errorf("stale sample: %q", r)
	}

	// A failed cycle that could not read the counters adds nothing.
	failed := fibSample(0, 0)
	failed.CountersStale = true
	failed.Maintenance = maintenance.Maintenance{Errors: 1, ConsecutiveFailures: 1, LastError: "x"}
	s.AddSample(failed)
	if _, r := s.Readiness(testNow); r != api.ReasonFIBLookupFailing {
		t.Errorf("after a stale-counter cycle: %q, want still failing", r)
	}
	// A read in the shutdown window with a pair created counts.
	s.SetCounters(dataplane.Counters{FIBMiss: 50, PairsCreated: 8}, nil)
	if _, r := s.Readiness(testNow); r != "" {
		t.Errorf("after SetCounters with a new pair: %q, want ready", r)
	}
}
