// Package flow is XLB's maintenance loop (DESIGN §5, seed "Orderly close and
// reset" and "Inactive connection cleanup"). Once per interval it reads the
// whole flow map with batch lookups and
//
//   - removes a pair that saw both FINs once 60 s have passed since the
//     second FIN (time-wait; closed_at is stamped by the data path);
//   - removes a pair that saw a RST on the cycle after the one that first
//     saw the RST;
//   - removes a non-terminal pair with no packet in either direction for
//     the orphan TTL and counts it as orphaned;
//   - removes a lone entry (counterpart missing or of another generation)
//     found lone in two consecutive cycles and counts an invariant repair;
//   - publishes one immutable Sample.
//
// A cycle that fails (a map or counter read refused, the clock unreadable)
// still publishes a Sample once a cycle has succeeded: it carries the last
// good pair figures and says how maintenance is failing (Sample.Maintenance),
// so a sample's age tells whether the loop runs, not whether it succeeds.
// The data path forwards regardless; what stops while cycles fail is
// cleanup (time-wait, RST and orphan removal, repairs) and fresh figures.
//
// A pair is always removed whole, forward entry first, with an atomic
// lookup-and-delete whose generation is compared with the one the decision
// was made on: an entry that a fresh pair took in the meantime is put back
// untouched. Closures are counted by the data path when a pair becomes
// terminal; the loop counts only orphans and repairs. Only this package
// deletes flow entries.
//
// Time is the data path's clock (jiffies) read through a Clock, so tests
// can move it instead of sleeping for minutes.
package flow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// TimeWait is how long a pair that saw both FINs is kept after the second
// FIN (seed: the 60-second TCP time-wait interval).
const TimeWait = 60 * time.Second

// Defaults for zero Options fields.
const (
	DefaultInterval  = time.Second
	DefaultOrphanTTL = 300 * time.Second
	DefaultBatchSize = 4096
)

// Options configure a Loop. Zero values take the defaults.
type Options struct {
	// OrphanTTL is how long a pair may go without a packet in either
	// direction before it is removed as orphaned (orphan_ttl_secs). The
	// config layer enforces the 300 s minimum; the loop uses what it gets.
	OrphanTTL time.Duration
	// Interval between cycles of Run. Production uses the default (1 s);
	// other values are for tests.
	Interval time.Duration
	// Clock is the loop's notion of now; default the data path's clock.
	Clock Clock
	// BackendIDs returns the backend ids every sample must list (the
	// discovered backends); ids seen in flows are added. May be nil.
	BackendIDs func() []uint32
	// OnSample, when set, is called with each published sample, on the
	// loop's goroutine, after Latest returns it. It must not block long.
	OnSample func(*Sample)
	// Log receives repairs (warning) and cycle failures: an error when a
	// spell of failed cycles starts, debug while it lasts (whatever the
	// error text), info when a cycle succeeds again. Per-pair removals
	// only at debug level. Default logrus.StandardLogger().
	Log logrus.FieldLogger
	// BatchSize is the number of entries per BPF_MAP_LOOKUP_BATCH call.
	BatchSize int
}

// Loop is the maintenance loop over one data path's flow map. Cycles are
// serialised; Latest may be called from any goroutine.
type Loop struct {
	dp  *dataplane.Dataplane
	o   Options
	log logrus.FieldLogger
	ttl dataplane.Jiffies // OrphanTTL in jiffies
	tw  dataplane.Jiffies // TimeWait in jiffies

	latest atomic.Pointer[Sample]

	mu        sync.Mutex // serialises cycles; guards everything below
	cycle     uint64
	orphaned  uint64
	repairs   uint64
	errCount  uint64                         // failed cycles since New
	failures  uint64                         // consecutive failed cycles: the current spell
	failSince time.Time                      // end of the spell's first failed cycle
	rstSeen   map[pairID]struct{}            // RST pairs seen by the previous cycle
	lone      map[pairID]dataplane.FlowValue // lone entries found by the previous cycle
	suspect   cellSet                        // cells the previous cycle could not decode
	sw        sweep
	afterRead func() // test hook: between the map read and the deletes
}

// pairID names an entry of one pair generation: its key plus generation.
type pairID struct {
	key dataplane.FlowKey
	gen uint32
}

// New prepares a loop. It measures the kernel's HZ once (to convert the
// TTLs to jiffies) and does not touch the flow map.
func New(dp *dataplane.Dataplane, o Options) (*Loop, error) {
	if dp == nil {
		return nil, errors.New("flow: nil data path")
	}
	if o.OrphanTTL <= 0 {
		o.OrphanTTL = DefaultOrphanTTL
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Clock == nil {
		o.Clock = KernelClock(dp)
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	ttl, err := dp.Ticks(o.OrphanTTL)
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	tw, err := dp.Ticks(TimeWait)
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	l := &Loop{
		dp: dp, o: o, log: o.Log.WithField("component", "flow"), ttl: ttl, tw: tw,
		rstSeen: map[pairID]struct{}{}, lone: map[pairID]dataplane.FlowValue{},
		suspect: newCellSet(),
	}
	l.sw.init(o.BatchSize)
	return l, nil
}

// Latest returns the most recent sample, or nil before the first cycle
// succeeded. After that it is the latest cycle's, failed or not.
func (l *Loop) Latest() *Sample { return l.latest.Load() }

// Run runs a cycle immediately and then every Interval until ctx is
// cancelled. A cycle that costs more than a quarter of Interval spaces the
// next one out to three times its own duration, so maintenance never takes
// more than a quarter of one CPU however large the flow map grows (a cycle
// over 1,000,000 pairs costs about 0.8 s on a virtualised 2-core host).
//
// A failed cycle does not stop Run: Cycle has logged it (once per spell)
// and published its sample, and the next cycle comes at the usual time.
// Run returns nil once ctx is cancelled.
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		start := time.Now()
		_, _ = l.Cycle(ctx) // failures are logged, counted and published by Cycle
		wait := nextWait(l.o.Interval, time.Since(start))
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// nextWait is the pause after a cycle that took took: the interval minus the
// cycle, or three times the cycle when it is longer than a quarter of the
// interval (at most 25% duty).
func nextWait(interval, took time.Duration) time.Duration {
	if took*4 > interval {
		return 3 * took
	}
	return interval - took
}

// Cycle runs one maintenance cycle and publishes its sample (Latest,
// Options.OnSample). On success it returns that sample.
//
// On failure it returns the error and no sample, but still publishes a
// sample for the failed cycle (see Sample: the last good pair figures,
// counters read afresh if possible, Maintenance describing the spell),
// counts the failure and logs it once per spell. Before any cycle has
// succeeded there are no figures to carry: the failure is counted and
// logged but nothing is published. A cycle abandoned because ctx ended is
// not a failure: it is neither counted, logged nor published.
func (l *Loop) Cycle(ctx context.Context) (*Sample, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := time.Now()
	var rm Removed
	s, err := l.maintain(ctx, &rm)
	if err != nil && ctx.Err() != nil {
		return nil, err // abandoned: the loop is stopping
	}
	end := time.Now()
	if err != nil {
		l.errCount++
		l.failures++
		if l.failures == 1 {
			l.failSince = end
		}
		l.logFailure(err)
		if s = l.carry(rm); s == nil {
			return nil, err
		}
	} else if l.failures > 0 {
		l.log.WithFields(logrus.Fields{
			"failed_cycles": l.failures, "failing_for": end.Sub(l.failSince).Round(time.Millisecond), "errors_total": l.errCount,
		}).Info("flow maintenance cycles succeed again")
		l.failures, l.failSince = 0, time.Time{}
	}
	s.Time, s.Duration = end, end.Sub(start)
	s.Maintenance = Maintenance{Errors: l.errCount, ConsecutiveFailures: l.failures}
	if err != nil {
		s.Maintenance.FailingSince, s.Maintenance.LastError = l.failSince, err.Error()
	}
	l.latest.Store(s)
	if l.o.OnSample != nil {
		l.o.OnSample(s)
	}
	if err != nil {
		return nil, err
	}
	l.log.WithFields(logrus.Fields{
		"cycle": s.Cycle, "entries": s.FlowEntries, "active": s.Active, "timewait": s.TimeWait,
		"resetting": s.Resetting, "removed_timewait": rm.TimeWait, "removed_reset": rm.Reset,
		"removed_orphaned": rm.Orphaned, "repaired": rm.Repaired, "duration": s.Duration,
	}).Debug("flow maintenance cycle")
	return s, nil
}

// logFailure logs a failed cycle: at error level for the first of a spell,
// at debug for the others, even when the error text changes.
func (l *Loop) logFailure(err error) {
	log := l.log.WithError(err).WithFields(logrus.Fields{"consecutive_failures": l.failures, "errors_total": l.errCount})
	if l.failures == 1 {
		log.Error("flow maintenance cycle failed; the data path keeps forwarding, but pairs are not cleaned up and figures stay at the last successful cycle until a cycle succeeds")
		return
	}
	log.Debug("flow maintenance cycle failed again")
}

// carry builds the sample of a failed cycle from the latest published one
// (nil before the first success): its pair and connection figures, the
// loop's current totals, what the cycle removed before failing, and the
// data path's counters if they can be read now. Time, Duration and
// Maintenance are set by Cycle.
func (l *Loop) carry(rm Removed) *Sample {
	prev := l.latest.Load()
	if prev == nil {
		return nil
	}
	s := *prev // Backends is shared: samples are immutable
	s.Removed = rm
	s.Orphaned, s.InvariantRepairs = l.orphaned, l.repairs
	if c, err := l.dp.Counters(); err == nil {
		s.Counters, s.CountersStale = c, false
	} else {
		s.CountersStale = true
	}
	return &s
}

// maintain is the body of a cycle: read, decide, remove, and build the
// sample of a successful cycle (Time, Duration and Maintenance are set by
// Cycle). Removals are recorded in rm as they happen, so a cycle that
// fails after some can still report them. Called with l.mu held.
func (l *Loop) maintain(ctx context.Context, rm *Removed) (*Sample, error) {
	now, err := l.o.Clock.Now()
	if err != nil {
		return nil, fmt.Errorf("flow: read clock: %w", err)
	}
	sw := &l.sw
	sw.reset(now, l.ttl, l.tw, l.rstSeen, l.suspect)
	if err := sw.read(ctx, l.dp); err != nil {
		return nil, err
	}
	counters, err := l.dp.Counters()
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	if l.afterRead != nil {
		l.afterRead()
	}

	lone, suspect := l.findLone()
	for _, it := range sw.intents {
		if _, ok := lone[pairID{it.key, it.gen}]; ok {
			continue // a lone forward entry is repaired, not removed as a pair
		}
		if !l.removePair(it, rm) {
			continue
		}
		switch it.why {
		case whyTimeWait:
			rm.TimeWait++
			sw.uncount(it.backend, &sw.timewait)
		case whyReset:
			rm.Reset++
			sw.resetting -= min(sw.resetting, 1)
		case whyOrphan:
			rm.Orphaned++
			l.orphaned++
			sw.uncount(it.backend, &sw.active)
		}
	}
	for id, v := range lone {
		if _, ok := l.lone[id]; !ok {
			continue // first sighting: wait a cycle
		}
		repaired, handled := l.repair(id, v, rm)
		if repaired {
			l.repairs++
		}
		if handled {
			delete(lone, id)
		}
	}
	l.lone, l.suspect = lone, suspect
	l.rstSeen, sw.nextRst = sw.nextRst, l.rstSeen

	stats, err := l.backendStats()
	if err != nil {
		return nil, err
	}
	l.cycle++
	s := &Sample{
		Cycle:            l.cycle,
		Now:              now,
		FlowEntries:      sw.entries - min(sw.entries, sw.removed),
		FlowCapacity:     uint64(l.dp.FlowCapacity()),
		Active:           sw.active.total,
		TimeWait:         sw.timewait.total,
		Resetting:        sw.resetting,
		Backends:         stats,
		Counters:         counters,
		Opened:           counters.PairsCreated,
		Closed:           closedOf(counters),
		Orphaned:         l.orphaned,
		InvariantRepairs: l.repairs,
		Lone:             uint64(len(lone)),
		Removed:          *rm,
	}
	return s, nil
}

// backendStats builds the per-backend part of the sample.
func (l *Loop) backendStats() ([]BackendSample, error) {
	sw := &l.sw
	if l.o.BackendIDs != nil {
		for _, id := range l.o.BackendIDs() {
			if id < dataplane.MaxBackends {
				sw.seen.add(id)
			}
		}
	}
	ids := sw.seen.list()
	stats, err := l.dp.BackendStats(ids)
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	out := make([]BackendSample, len(ids))
	for i, id := range ids {
		out[i] = BackendSample{ID: id, Active: sw.active.per[id], TimeWait: sw.timewait.per[id], Stats: stats[id]}
	}
	return out, nil
}

// removePair removes the pair whose forward entry it names, forward entry
// first (so its SNAT port, the reverse key, cannot be handed to a new pair
// while the old forward entry still points at it). Each entry is taken with
// an atomic lookup-and-delete; one whose generation is not the decided one
// belongs to a fresh pair and is put back. Reports whether the decided
// pair's forward entry was removed.
func (l *Loop) removePair(it intent, rm *Removed) bool {
	v, err := l.dp.TakeFlow(it.key)
	if errors.Is(err, dataplane.ErrNotFound) {
		return false // the data path replaced or removed it
	}
	if err != nil {
		l.log.WithError(err).WithField("key", it.key.String()).Error("flow: remove pair")
		return false
	}
	if v.Generation != it.gen {
		l.restore(it.key, v, rm)
		return false
	}
	l.sw.removed++
	pv, err := l.dp.TakeFlow(v.Peer)
	switch {
	case errors.Is(err, dataplane.ErrNotFound):
	case err != nil:
		l.log.WithError(err).WithField("key", v.Peer.String()).Error("flow: remove pair: reverse entry")
	case pv.Generation != it.gen:
		l.restore(v.Peer, pv, rm)
	default:
		l.sw.removed++
	}
	l.log.WithFields(logrus.Fields{"key": it.key.String(), "generation": it.gen, "reason": it.why.String()}).Debug("flow: pair removed")
	return true
}

// restore puts back an entry taken by mistake: a fresh pair took the tuple
// between the read and the delete.
func (l *Loop) restore(k dataplane.FlowKey, v dataplane.FlowValue, rm *Removed) {
	rm.Restored++
	if err := l.dp.PutFlow(k, v); err != nil {
		// Yet another pair took the tuple meanwhile: the entry we hold is
		// lost and its counterpart will be repaired as a lone entry.
		l.log.WithError(err).WithFields(logrus.Fields{"key": k.String(), "generation": v.Generation}).
			Warn("flow: could not restore an entry of a fresh pair")
	}
}

// repair removes an entry that was lone in this cycle and the previous one.
// The counterpart was re-checked with a point lookup this cycle (findLone).
// handled is false only when the delete failed and should be retried.
func (l *Loop) repair(id pairID, v dataplane.FlowValue, rm *Removed) (repaired, handled bool) {
	got, err := l.dp.TakeFlow(id.key)
	if errors.Is(err, dataplane.ErrNotFound) {
		return false, true
	}
	if err != nil {
		l.log.WithError(err).WithField("key", id.key.String()).Error("flow: repair lone entry")
		return false, false
	}
	if got.Generation != id.gen {
		l.restore(id.key, got, rm)
		return false, true
	}
	rm.Repaired++
	l.sw.removed++
	l.log.WithFields(logrus.Fields{
		"key": id.key.String(), "generation": id.gen, "peer": v.Peer.String(), "backend": v.BackendId,
	}).Warn("flow: removed a lone flow entry (pair invariant violation)")
	return true, true
}
