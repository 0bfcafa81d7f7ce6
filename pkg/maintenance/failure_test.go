package maintenance_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// flakyClock is the rig's manual clock, failing while fail holds an error:
// a cycle then fails at its first step, deterministically.
type flakyClock struct {
	*manualClock
	fail atomic.Pointer[error]
}

func (c *flakyClock) Now() (dataplane.Jiffies, error) {
	if e := c.fail.Load(); e != nil {
		return 0, *e
	}
	return c.manualClock.Now()
}

// failWith makes every reading fail with err until heal.
func (c *flakyClock) failWith(err error) { c.fail.Store(&err) }
func (c *flakyClock) heal()              { c.fail.Store(nil) }

// flakyRig is a rig whose loop reads a flakyClock (the rig records its
// samples as usual).
type flakyRig struct {
	*rig
	fc *flakyClock
}

func newFlakyRig(t *testing.T, fo maintenance.Options) *flakyRig {
	t.Helper()
	r := newRig(t, dt.Options{}, maintenance.Options{})
	fr := &flakyRig{rig: r, fc: &flakyClock{manualClock: r.clk}}
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	fo.Clock, fo.Log = fr.fc, log
	fo.OnSample = r.recorder(fo.OnSample)
	l, err := maintenance.New(r.e.DP, fo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r.loop, r.logs = l, hook
	return fr
}

// failedCycle runs a cycle that must fail with cause and returns the
// sample it published (nil when it published none).
func (r *flakyRig) failedCycle(cause error) *maintenance.Sample {
	r.t.Helper()
	before := r.published()
	s, err := r.loop.Cycle(context.Background())
	if !errors.Is(err, cause) || s != nil {
		r.t.Fatalf("failing cycle returned %v, %v; want nil and an error wrapping %v", s, err, cause)
	}
	switch n := r.published(); n {
	case before:
		return nil
	case before + 1:
		return r.latest()
	default:
		r.t.Fatalf("one cycle published %d samples", n-before)
	}
	return nil
}

// logs returns the loop's log entries at level whose message starts with
// prefix.
func (r *flakyRig) logsAt(level logrus.Level, prefix string) []*logrus.Entry {
	var out []*logrus.Entry
	for _, e := range r.logs.AllEntries() {
		if e.Level == level && strings.HasPrefix(e.Message, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func backendIDs(s *maintenance.Sample) []uint32 {
	ids := make([]uint32, len(s.Backends))
	for i, b := range s.Backends {
		ids[i] = b.ID
	}
	return ids
}

// A failed cycle publishes a sample with the last good pair figures, fresh
// counters and the spell described; a success clears the spell; each spell
// is logged once at error level whatever its error texts, and its end once
// at info level.
func TestFailedCycleStillPublishes(t *testing.T) {
	r := newFlakyRig(t, maintenance.Options{})
	r.open(33000)
	good := r.cycle()
	if good.Cycle != 1 || good.Active != 1 || good.Opened != 1 || good.Maintenance.Failing() || good.Maintenance != (maintenance.Maintenance{}) {
		t.Fatalf("first cycle: cycle %d active %d opened %d failing %v maintenance %+v", good.Cycle, good.Active, good.Opened, good.Maintenance.Failing(), good.Maintenance)
	}
	r.open(33001) // seen by the data-path counters at once, by the pair figures only in a successful cycle

	refused := errors.New("clock refused")
	r.fc.failWith(refused)
	f1 := r.failedCycle(refused)
	if f1 == nil {
		t.Fatal("a failed cycle after a successful one published no sample")
	}
	if !f1.Maintenance.Failing() || f1.Cycle != 1 || f1.Active != 1 || f1.FlowEntries != good.FlowEntries || f1.Now != good.Now ||
		!slices.Equal(backendIDs(f1), backendIDs(good)) {
		t.Fatalf("failed sample: failing %v cycle %d active %d entries %d; want the first cycle's pair figures", f1.Maintenance.Failing(), f1.Cycle, f1.Active, f1.FlowEntries)
	}
	if f1.CountersStale || f1.Counters.PairsCreated != 2 || f1.Opened != 1 {
		t.Fatalf("failed sample: counters stale %v, pairs created %d, opened %d; want fresh counters (2 pairs created) and the carried opened count (1)",
			f1.CountersStale, f1.Counters.PairsCreated, f1.Opened)
	}
	m := f1.Maintenance
	if m.Errors != 1 || m.ConsecutiveFailures != 1 || !m.Failing() || !m.FailingSince.Equal(f1.Time) || !strings.Contains(m.LastError, "clock refused") {
		t.Fatalf("first failure: maintenance %+v (sample time %v)", m, f1.Time)
	}
	if f1.Time.Before(good.Time) || f1.Duration <= 0 {
		t.Fatalf("failed sample time %v (previous %v), duration %v", f1.Time, good.Time, f1.Duration)
	}

	other := errors.New("clock refused for another reason")
	r.fc.failWith(other)
	f2 := r.failedCycle(other)
	m = f2.Maintenance
	if m.Errors != 2 || m.ConsecutiveFailures != 2 || !m.FailingSince.Equal(f1.Time) || !strings.Contains(m.LastError, "another reason") || f2.Cycle != 1 {
		t.Fatalf("second failure: maintenance %+v cycle %d; want the spell of the first failure continued", m, f2.Cycle)
	}
	if errs := r.logsAt(logrus.ErrorLevel, ""); len(errs) != 1 || !errors.Is(errs[0].Data[logrus.ErrorKey].(error), refused) {
		t.Fatalf("error-level logs during one spell: %d (%v), want exactly one naming the first error", len(errs), errs)
	}
	if again := r.logsAt(logrus.DebugLevel, "maintenance cycle failed again"); len(again) != 1 {
		t.Fatalf("%d debug logs for the second failure, want 1", len(again))
	}

	r.fc.heal()
	ok := r.cycle()
	if ok.Cycle != 2 || ok.Active != 2 || ok.Opened != 2 || ok.Maintenance.Failing() || ok.Maintenance != (maintenance.Maintenance{Errors: 2}) {
		t.Fatalf("recovery: cycle %d active %d failing %v maintenance %+v; want cycle 2, 2 active, errors 2 and no spell", ok.Cycle, ok.Active, ok.Maintenance.Failing(), ok.Maintenance)
	}
	infos := r.logsAt(logrus.InfoLevel, "maintenance cycles succeed again")
	if len(infos) != 1 || infos[0].Data["failed_cycles"] != uint64(2) {
		t.Fatalf("recovery logs: %v, want one naming 2 failed cycles", infos)
	}
	r.cycle()
	if n := len(r.logsAt(logrus.InfoLevel, "maintenance cycles succeed again")); n != 1 {
		t.Fatalf("%d recovery logs after a second success, want 1", n)
	}

	// A new spell is logged again, once.
	r.fc.failWith(refused)
	f3 := r.failedCycle(refused)
	if m := f3.Maintenance; m.Errors != 3 || m.ConsecutiveFailures != 1 || !m.FailingSince.Equal(f3.Time) {
		t.Fatalf("new spell: maintenance %+v", m)
	}
	if n := len(r.logsAt(logrus.ErrorLevel, "")); n != 2 {
		t.Fatalf("%d error-level logs after two spells, want 2", n)
	}
	// Published samples never change.
	if good.Maintenance != (maintenance.Maintenance{}) || f1.Maintenance.ConsecutiveFailures != 1 || f1.Cycle != 1 {
		t.Fatal("a published sample changed")
	}
}

// Before any cycle succeeded there are no figures to carry: the failure is
// counted and logged, nothing is published, and the first success reports
// the error count.
func TestFailureBeforeFirstSuccess(t *testing.T) {
	r := newFlakyRig(t, maintenance.Options{})
	refused := errors.New("clock refused")
	r.fc.failWith(refused)
	if s := r.failedCycle(refused); s != nil || r.published() != 0 {
		t.Fatalf("a failed first cycle published %+v", s)
	}
	if n := len(r.logsAt(logrus.ErrorLevel, "")); n != 1 {
		t.Fatalf("%d error-level logs, want 1", n)
	}
	r.fc.heal()
	s := r.cycle()
	if s.Cycle != 1 || s.Maintenance != (maintenance.Maintenance{Errors: 1}) {
		t.Fatalf("first success: cycle %d maintenance %+v", s.Cycle, s.Maintenance)
	}
	if n := len(r.logsAt(logrus.InfoLevel, "maintenance cycles succeed again")); n != 1 {
		t.Fatalf("%d recovery logs, want 1", n)
	}
}

// A cycle abandoned because its context ended is the loop stopping, not a
// maintenance failure: nothing is counted, logged or published.
func TestAbandonedCycleIsNotAFailure(t *testing.T) {
	r := newFlakyRig(t, maintenance.Options{})
	r.open(33000)
	good := r.cycle()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.loop.Cycle(ctx); err == nil {
		t.Fatal("cycle with a cancelled context succeeded")
	}
	if r.latest() != good || r.published() != 1 {
		t.Fatal("an abandoned cycle published a sample")
	}
	if n := len(r.logsAt(logrus.ErrorLevel, "")); n != 0 {
		t.Fatalf("an abandoned cycle logged %d errors", n)
	}
	if s := r.cycle(); s.Maintenance != (maintenance.Maintenance{}) {
		t.Fatalf("after an abandoned cycle: maintenance %+v, want nothing counted", s.Maintenance)
	}
}

// Run keeps publishing samples while its cycles fail (so their age stays
// small), and fresh figures return when cycles succeed again.
func TestRunPublishesWhileCyclesFail(t *testing.T) {
	r := newFlakyRig(t, maintenance.Options{Interval: 5 * time.Millisecond})
	r.open(33000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.loop.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return after cancel")
			}
		})
	}
	defer stop()
	waitFor := func(what string, ok func(*maintenance.Sample) bool) *maintenance.Sample {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if s := r.latest(); s != nil && ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("no sample within 30 s where %s (latest %+v)", what, r.latest())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	first := waitFor("a cycle succeeded", func(s *maintenance.Sample) bool { return s.Cycle >= 1 })

	r.fc.failWith(errors.New("clock refused"))
	failing := waitFor("3 cycles failed in a row", func(s *maintenance.Sample) bool { return s.Maintenance.ConsecutiveFailures >= 3 })
	if !failing.Maintenance.Failing() || failing.Active != 1 || !failing.Time.After(first.Time) {
		t.Fatalf("failing sample: failing %v active %d time %v (first %v)", failing.Maintenance.Failing(), failing.Active, failing.Time, first.Time)
	}
	r.fc.heal()
	ok := waitFor("cycles succeed again", func(s *maintenance.Sample) bool { return !s.Maintenance.Failing() && s.Cycle > failing.Cycle })
	if ok.Maintenance.Errors < 3 || ok.Maintenance.Failing() || ok.Active != 1 {
		t.Fatalf("after recovery: maintenance %+v active %d", ok.Maintenance, ok.Active)
	}
	stop()
	if n := len(r.logsAt(logrus.ErrorLevel, "")); n != 1 {
		t.Fatalf("%d error-level logs for one spell, want 1", n)
	}
	if n := len(r.logsAt(logrus.InfoLevel, "maintenance cycles succeed again")); n != 1 {
		t.Fatalf("%d recovery logs, want 1", n)
	}
}
