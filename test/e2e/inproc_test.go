package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/instance"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/test/lab"
)

// inprocXLB is an XLB instance inside the test process: the real data path
// attached natively in the lab's XLB namespace and the real maintenance
// loop, whose clock is the data path's plus an offset the test can grow (to
// jump past time-wait or the orphan TTL without waiting). Tests that need
// to look inside (flow map, samples, counters) use it instead of the
// daemon. Everything is stopped, detached and closed in t.Cleanup.
type inprocXLB struct {
	DP    *dataplane.Dataplane
	Clock *offsetClock

	mu      sync.Mutex
	samples []*maintenance.Sample // every published sample, oldest first (the last maxSamples)
}

// maxSamples bounds the samples an inprocXLB keeps.
const maxSamples = 1 << 14

// inprocOptions shape an inprocXLB. Zero values take the defaults noted.
type inprocOptions struct {
	Interval  time.Duration       // maintenance interval, default 50 ms
	OrphanTTL time.Duration       // default maintenance.DefaultOrphanTTL
	Disable   []dataplane.Feature // optional kernel features to turn off (fallback paths)
}

// startInproc brings an instance up in l's XLB namespace through
// pkg/instance, as the daemon does, with the config the daemon tests run
// (labConfig: listen 192.0.2.10:80 to backends :8080, SNAT 192.0.2.10
// one-arm or 198.51.100.1 two-arm, range 40000-59999, native XDP), and runs
// the maintenance loop on a clock the test controls.
func startInproc(t *testing.T, l *lab.Lab, o inprocOptions) *inprocXLB {
	t.Helper()
	if o.Interval == 0 {
		o.Interval = 50 * time.Millisecond
	}
	// the config the daemon tests run, parsed as the daemon parses it
	cfg, _, err := config.Parse([]byte(labConfig(l, "")), "inproc xlb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	log.SetOutput(&testLogWriter{t: t})
	// The daemon's bring-up (pkg/instance), in the lab's XLB namespace:
	// journalled sysctls, managed neighbours, backend discovery running.
	var inst *instance.Instance
	err = l.XLB.Do(func() error {
		var err error
		inst, err = instance.Start(context.Background(), cfg, instance.Options{Log: log, JournalDir: t.TempDir(), Disable: o.Disable, Unpinned: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.XLB.Do(inst.Stop); err != nil {
			t.Errorf("inproc: stop the instance: %v", err)
		}
	})
	dp := inst.DP
	x := &inprocXLB{DP: dp}
	for _, b := range inst.Backends.Snapshot() {
		if b.State != backend.Routable {
			t.Fatalf("inproc: backend %s is %s after the instance synced: %s", b.IP, b.State, b.Reason)
		}
	}

	x.Clock = newOffsetClock(maintenance.KernelClock(dp))
	loop, err := maintenance.New(dp, maintenance.Options{
		OrphanTTL: o.OrphanTTL, Interval: o.Interval, Clock: x.Clock, Log: log,
		Members:  inst.Members,
		OnSample: x.record,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		loop.Close()
		log.SetOutput(discard{})
	})
	return x
}

// Advance jumps the loop's clock forward by d.
func (x *inprocXLB) Advance(t *testing.T, d time.Duration) {
	t.Helper()
	j, err := x.DP.Ticks(d)
	if err != nil {
		t.Fatal(err)
	}
	x.Clock.Add(j)
}

// WaitSample polls the published samples until one started after this call
// satisfies ok, or fails the test after timeout (generous: the machine is
// shared and noisy). It returns that sample.
func (x *inprocXLB) WaitSample(t *testing.T, timeout time.Duration, what string, ok func(*maintenance.Sample) bool) *maintenance.Sample {
	t.Helper()
	var after uint64
	if s := x.Latest(); s != nil {
		after = s.Cycle
	}
	deadline := time.Now().Add(timeout)
	var last *maintenance.Sample
	for time.Now().Before(deadline) {
		if s := x.Latest(); s != nil && s.Cycle > after {
			last = s
			if ok(s) {
				return s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if last == nil {
		t.Fatalf("inproc: no maintenance sample within %v", timeout)
	}
	t.Fatalf("inproc: %s: not reached within %v; last sample: cycle %d entries %d active %d timewait %d resetting %d closed %+v orphaned %d repairs %d lone %d invariant %d",
		what, timeout, last.Cycle, last.FlowEntries, last.Active, last.TimeWait, last.Resetting, last.Closed,
		last.Orphaned, last.InvariantRepairs, last.Lone, last.Counters.InvariantViolations)
	return nil
}

// record keeps a published sample (Options.OnSample).
func (x *inprocXLB) record(s *maintenance.Sample) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.samples) == maxSamples {
		x.samples = append(x.samples[:0], x.samples[maxSamples/2:]...)
	}
	x.samples = append(x.samples, s)
}

// Latest returns the last published sample, nil before the first.
func (x *inprocXLB) Latest() *maintenance.Sample {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.samples) == 0 {
		return nil
	}
	return x.samples[len(x.samples)-1]
}

// cycleStart is when s's cycle started (wall clock, monotonic reading).
func cycleStart(s *maintenance.Sample) time.Time { return s.Time.Add(-s.Duration) }

// WaitCycleAfter waits for the first successful cycle that started after
// t0 and returns its sample, or fails the test after timeout. Every sample
// is recorded, so no cycle is skipped however slowly this polls.
func (x *inprocXLB) WaitCycleAfter(t *testing.T, t0 time.Time, timeout time.Duration) *maintenance.Sample {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		x.mu.Lock()
		for _, s := range x.samples {
			if !s.Maintenance.Failing() && cycleStart(s).After(t0) {
				x.mu.Unlock()
				return s
			}
		}
		x.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("inproc: no successful maintenance cycle started within %v", timeout)
	return nil
}

// Samples returns the recorded samples of successful cycles first..last
// (inclusive), in order.
func (x *inprocXLB) Samples(first, last uint64) []*maintenance.Sample {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*maintenance.Sample
	for _, s := range x.samples {
		if !s.Maintenance.Failing() && s.Cycle >= first && s.Cycle <= last {
			out = append(out, s)
		}
	}
	return out
}

// FlowMapEntries counts the entries actually in the flow map, reading it
// whole through the data path's own walk: not a sample's figure, which is
// derived from counters. Meant for a quiet map (no traffic).
func (x *inprocXLB) FlowMapEntries(t *testing.T) int {
	t.Helper()
	w := x.DP.NewFlowWalk(4096)
	total := 0
	for {
		n, end, err := w.Next()
		if err != nil {
			t.Fatalf("inproc: read the flow map: %v", err)
		}
		total += n
		if end {
			return total
		}
	}
}

// FlowMapDump describes up to limit entries of the flow map, for failure
// messages.
func (x *inprocXLB) FlowMapDump(limit int) string {
	w := x.DP.NewFlowWalk(limit)
	n, _, err := w.Next()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range n {
		v := &w.Values[i]
		fmt.Fprintf(&b, "\n  %s gen %d flags %#x last_seen %d backend %d", w.Keys[i], v.Generation, v.Flags, v.LastSeen, v.BackendId)
	}
	return b.String()
}

// testLogWriter sends the loop's log lines to the test log.
type testLogWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
