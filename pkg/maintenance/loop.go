package maintenance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/limits"
)

// TimeWait is how long a pair that saw both FINs is kept after the second
// FIN (seed: the 60-second TCP time-wait interval).
const TimeWait = 60 * time.Second

// The parts of SNATHold.
const (
	// backendTimeWait is how long Linux keeps a TIME_WAIT socket: the
	// kernel's TCP_TIMEWAIT_LEN, 60 s, not tunable.
	backendTimeWait = 60 * time.Second
	// timerWheelSlack is the most the kernel's timer wheel adds to a 60 s
	// timeout at HZ 100..1000 (kernel/time/timer.c, since 4.8): a timer
	// goes into the level whose range holds its delay and fires at the
	// next boundary of that level's granularity after its expiry, up to
	// one granule late. 60 s is 6000 ticks at HZ=100 (level 3: 512-tick
	// granules, 5.12 s), 15000 at HZ=250 (level 3: 2.048 s), 18000 at
	// HZ=300 (level 3: 1.71 s) and 60000 at HZ=1000 (level 4: 4096-tick
	// granules, 4.096 s). The worst is HZ=100's 5.12 s, not HZ=1000's:
	// "up to 1/8 of the timeout" is the bound for a delay at the bottom
	// of a level (8/63 of it), 60 s sits higher in its level at every HZ.
	timerWheelSlack = 5120 * time.Millisecond
	// snatHoldMargin covers what can start the backend's TIME_WAIT later
	// than the pair's close as XLB saw it: the client's FIN lost beyond
	// XLB and retransmitted (the backend enters TIME_WAIT, or restarts its
	// timer, on each FIN it receives; Linux's first retransmission comes
	// 200 ms or more later, doubling), the tick the timer softirq runs in,
	// and the maintenance loop's clock read once per cycle.
	snatHoldMargin = 4880 * time.Millisecond
)

// SNATHold is how long after a pair's close the SNAT port of a pair whose
// backend closed first stays taken toward that backend: 70 s, the
// backend's TIME_WAIT (backendTimeWait) plus the timer wheel's worst
// rounding of it (timerWheelSlack) and a margin (snatHoldMargin). A port
// handed out again while the backend's TIME_WAIT socket for the 4-tuple
// still exists meets that socket: a new client's SYN with older
// timestamps than the old pair's is dropped by PAWS (TcpExtPAWSTimewait)
// and the client waits for a SYN retransmission. The pair itself still
// leaves after TimeWait (seed; the gauges' time-wait count); its reverse
// entry stays as a held entry (dataplane.FlagHold, dataplane.ReapHold)
// for the rest of SNATHold, as does one left by a client that reused its
// port on such a pair.
const SNATHold = backendTimeWait + timerWheelSlack + snatHoldMargin

// Defaults for zero Options fields.
const (
	DefaultInterval     = time.Second
	DefaultOrphanTTL    = limits.DefaultOrphanTTL    // orphan_ttl_secs' default (DESIGN §1), config.DefaultOrphanTTL
	DefaultEmbryonicTTL = limits.DefaultEmbryonicTTL // embryonic_ttl_secs' default (issue 13)
	// DefaultUDPTimeout and DefaultUDPStreamTimeout are
	// flow_table.udp_timeout_secs' and udp_stream_timeout_secs' defaults
	// (issue 31), config.DefaultUDPTimeout and DefaultUDPStreamTimeout.
	DefaultUDPTimeout       = limits.DefaultUdpTimeoutSecs * time.Second
	DefaultUDPStreamTimeout = limits.DefaultUdpStreamTimeoutSecs * time.Second
)

// protoUDP is a flow key's Proto for a UDP pair (IPPROTO_UDP).
const protoUDP = syscall.IPPROTO_UDP

// Options configure a Loop. Zero values take the defaults.
type Options struct {
	// OrphanTTL is how long a pair may go without a packet in either
	// direction before it is removed as orphaned (orphan_ttl_secs). The
	// config layer enforces the 300 s minimum; the loop uses what it gets.
	// The walk visits every entry at least once per OrphanTTL/10 (or
	// EmbryonicTTL, when shorter).
	OrphanTTL time.Duration
	// EmbryonicTTL is how long after its SYN a pair that never completed
	// its handshake (the client never ACKed the backend's SYN-ACK) is
	// removed (flow_table.embryonic_ttl_secs; DESIGN §6b, issue 13). The
	// config layer keeps it within 1 s..OrphanTTL; the loop uses what it
	// gets.
	EmbryonicTTL time.Duration
	// UDPTimeout and UDPStreamTimeout are the UDP pairs' idle timeouts
	// without and with a reply (flow_table.udp_timeout_secs,
	// udp_stream_timeout_secs; issue 31). A UDP pair is removed within a
	// cycle of its deadline: its XLB_CLOSE_OPEN event schedules one
	// dataplane.ReapUDP request UDPTimeout after its first datagram, and
	// each re-check that keeps it reschedules the request at the deadline
	// the reaper answers (ReapRequest.Next). The config layer keeps both
	// within 1 s..7 days, UDPStreamTimeout at least UDPTimeout; the loop
	// uses what it gets.
	UDPTimeout, UDPStreamTimeout time.Duration
	// NextHopGC, when set, is handed the next-hop slots the flow map's
	// entries name at the end of a complete walk pass, at most once per
	// pass length: referenced is a bitset of dataplane.MaxNextHops bits
	// (slot id i is bit i%64 of word i/64), valid only during the call;
	// passStart is the data path's clock (jiffies, low 32 bits) when the
	// passes began. A slot neither referenced nor used since passStart is
	// named by no entry (dataplane.FreeNextHops frees those). An error is
	// logged (warning); the next pass tries again.
	NextHopGC func(referenced []uint64, passStart uint32) error
	// RetiredSNATReleased, when set, is handed the retired SNAT spaces
	// (dataplane.RetiredSNAT: SNAT addresses and ports an earlier config
	// handed out) that a complete walk pass found no longer held, whole
	// or in part, as they were before: the loop has narrowed or dropped
	// them in the data path (dataplane.ShrinkRetiredSNAT), so their ports
	// no longer held need not stay reserved on the host. An error is
	// logged (warning).
	RetiredSNATReleased func(released []dataplane.RetiredSNAT) error
	// Interval between cycles of Run. Production uses the default (1 s);
	// other values are for tests.
	Interval time.Duration
	// Clock is the loop's notion of now; default the data path's clock.
	Clock Clock
	// Members returns the members every sample must list (every
	// service's discovered and draining backends, with their backend
	// ids); members with pairs are added. May be nil.
	Members func() []Member
	// OnSample, when set, is called with each published sample, on the
	// goroutine running the cycle (Run's, or Cycle's caller), in cycle
	// order. It is how samples leave the loop; it must not block long.
	OnSample func(*Sample)
	// Log receives repairs (warning) and cycle failures: an error when a
	// spell of failed cycles starts, debug while it lasts (whatever the
	// error text), info when a cycle succeeds again. Per-pair removals
	// only at debug level. Default logrus.StandardLogger().
	Log logrus.FieldLogger
}

// Loop is the maintenance loop over one data path's flow map. Cycles are
// serialised.
type Loop struct {
	dp   *dataplane.Dataplane
	o    Options
	log  logrus.FieldLogger
	ttl  dataplane.Jiffies // OrphanTTL in jiffies
	tw   dataplane.Jiffies // TimeWait in jiffies
	sh   dataplane.Jiffies // SNATHold in jiffies
	ettl dataplane.Jiffies // EmbryonicTTL in jiffies
	uttl dataplane.Jiffies // UDPTimeout in jiffies
	ustl dataplane.Jiffies // UDPStreamTimeout in jiffies

	mu        sync.Mutex // serialises cycles; guards everything below
	latest    *Sample    // the latest published sample; nil before the first
	events    *dataplane.CloseEvents
	cycle     uint64
	errCount  uint64    // failed cycles since New
	failures  uint64    // consecutive failed cycles: the current spell
	failSince time.Time // end of the spell's first failed cycle
	timewait  schedule  // pairs in time-wait, by the end of their time-wait
	embryonic schedule  // new pairs, by their SYN plus the embryonic TTL
	hold      schedule  // XLB_F_HOLD reverse entries, by their pair's close plus SNATHold
	udp       schedule  // UDP pairs, by the deadline their last re-check answered (first: creation plus UDPTimeout)
	// udpFrom and udpTo delimit the current cycle's requests that came
	// from the udp schedule (reqs[udpFrom:udpTo]): a KEPT answer to one
	// of them goes back in at its Next; the walk's do not (one chain of
	// requests per pair).
	udpFrom, udpTo int
	// adopting holds the UDP pairs scheduled since New until the cycle
	// after the first complete walk pass (nil afterwards): that pass
	// schedules every other UDP pair it finds, the ones a hot upgrade or
	// a restart left in the map (the schedules live in memory), so that
	// every UDP pair has exactly one chain of requests.
	adopting map[pairID]struct{}
	// adoptTail is the cycles adoption lasts after the first pass ends.
	adoptTail   int
	unscheduled uint64 // events the schedules had no room for, since New
	retry       []dataplane.ReapRequest
	lone        map[pairID]struct{} // entries the previous cycle's checks found lone
	walk        *walk
	eventsRead  uint64 // close events read since New
	overwritten uint64 // close events the per-CPU queues overwrote before they were read
	reqs        []dataplane.ReapRequest
	afterDecide func() // test hook: between the decisions and the reaper

	// retired collects the retired SNAT ports the current walk pass finds
	// held; nil: none were retired when the pass began.
	retired *dataplane.RetiredSNATUse
}

// pairID names an entry of one pair generation: its key plus generation.
type pairID struct {
	key dataplane.FlowKey
	gen uint32
}

// New prepares a loop and starts reading the data path's close events. It
// measures the kernel's HZ once (to convert the TTLs to jiffies). Close
// releases the event reader.
func New(dp *dataplane.Dataplane, o Options) (*Loop, error) {
	if dp == nil {
		return nil, errors.New("maintenance: nil data path")
	}
	if o.OrphanTTL <= 0 {
		o.OrphanTTL = DefaultOrphanTTL
	}
	if o.EmbryonicTTL <= 0 {
		o.EmbryonicTTL = DefaultEmbryonicTTL
	}
	if o.UDPTimeout <= 0 {
		o.UDPTimeout = DefaultUDPTimeout
	}
	if o.UDPStreamTimeout <= 0 {
		o.UDPStreamTimeout = max(DefaultUDPStreamTimeout, o.UDPTimeout)
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
	ttl, err := dp.Ticks(o.OrphanTTL)
	if err != nil {
		return nil, fmt.Errorf("maintenance: %w", err)
	}
	tw, err := dp.Ticks(TimeWait)
	if err != nil {
		return nil, fmt.Errorf("maintenance: %w", err)
	}
	sh, err := dp.Ticks(SNATHold)
	if err != nil {
		return nil, fmt.Errorf("maintenance: %w", err)
	}
	ettl, err := dp.Ticks(o.EmbryonicTTL)
	if err != nil {
		return nil, fmt.Errorf("maintenance: %w", err)
	}
	uttl, err := dp.Ticks(o.UDPTimeout)
	if err != nil {
		return nil, fmt.Errorf("maintenance: %w", err)
	}
	ustl, err := dp.Ticks(o.UDPStreamTimeout)
	if err != nil {
		return nil, fmt.Errorf("maintenance: %w", err)
	}
	ev, err := dp.OpenCloseEvents()
	if err != nil {
		return nil, fmt.Errorf("maintenance: %w", err)
	}
	var refs *nextHopRefs
	if o.NextHopGC != nil {
		refs = newNextHopRefs()
	}
	entries := int(dp.FlowCapacity())
	pairs := entries / int(dataplane.EntriesPerPair)
	return &Loop{
		dp: dp, o: o, log: o.Log.WithField("component", "maintenance"), ttl: ttl, tw: tw, sh: sh, ettl: ettl, uttl: uttl, ustl: ustl,
		timewait: newSchedule(pairs), embryonic: newSchedule(pairs), hold: newSchedule(entries), udp: newSchedule(pairs),
		events: ev, lone: map[pairID]struct{}{}, walk: newWalk(dp, passCycles(o), refs),
		adopting: map[pairID]struct{}{}, adoptTail: 1,
	}, nil
}

// passCycles is the number of cycles a walk pass may take: the shorter of
// OrphanTTL/10 and EmbryonicTTL, over the interval. The embryonic bound
// makes a pair whose XLB_CLOSE_OPEN event was lost (a ring buffer full
// during a SYN flood) leave within one more embryonic TTL.
func passCycles(o Options) uint64 {
	return uint64(min(o.OrphanTTL/10, o.EmbryonicTTL) / o.Interval)
}

// Close stops reading close events. The loop must not run afterwards.
func (l *Loop) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events.Close()
}

// Run runs a cycle immediately and then every Interval until ctx is
// cancelled. A cycle's work is bounded (its close events, its due
// deadlines and one slice of the walk), so cycles keep their pace; one
// that overruns the interval is followed by a pause of a tenth of it.
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
		t.Reset(max(l.o.Interval-time.Since(start), l.o.Interval/10))
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Cycle runs one maintenance cycle and publishes its sample
// (Options.OnSample). On success it returns that sample.
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
		}).Info("maintenance cycles succeed again")
		l.failures, l.failSince = 0, time.Time{}
	}
	s.Time, s.Duration = end, end.Sub(start)
	s.Maintenance = Maintenance{Errors: l.errCount, ConsecutiveFailures: l.failures}
	if err != nil {
		s.Maintenance.FailingSince, s.Maintenance.LastError = l.failSince, err.Error()
	}
	l.latest = s
	if l.o.OnSample != nil {
		l.o.OnSample(s)
	}
	if err != nil {
		return nil, err
	}
	l.log.WithFields(logrus.Fields{
		"cycle": s.Cycle, "active": s.Active, "timewait": s.TimeWait, "resetting": s.Resetting,
		"removed_timewait": rm.TimeWait, "removed_reset": rm.Reset, "removed_orphaned": rm.Orphaned,
		"removed_embryonic": rm.Embryonic, "removed_hold": rm.Hold, "removed_udp": rm.UDP,
		"repaired": rm.Repaired, "kept": rm.Kept, "walked": s.Walk.Visited, "duration": s.Duration,
	}).Debug("maintenance cycle")
	return s, nil
}

// logFailure logs a failed cycle: at error level for the first of a spell,
// at debug for the others, even when the error text changes.
func (l *Loop) logFailure(err error) {
	log := l.log.WithError(err).WithFields(logrus.Fields{"consecutive_failures": l.failures, "errors_total": l.errCount})
	if l.failures == 1 {
		log.Error("maintenance cycle failed; the data path keeps forwarding, but pairs are not cleaned up and figures stay at the last successful cycle until a cycle succeeds")
		return
	}
	log.Debug("maintenance cycle failed again")
}

// carry builds the sample of a failed cycle from the latest published one
// (nil before the first success): its pair and connection figures, what
// the cycle removed before failing, and the data path's counters if they
// can be read now. Time, Duration and Maintenance are set by Cycle.
func (l *Loop) carry(rm Removed) *Sample {
	prev := l.latest
	if prev == nil {
		return nil
	}
	s := *prev // Backends is shared: samples are immutable
	s.Removed = rm
	if c, err := l.dp.Counters(); err == nil {
		s.Counters, s.CountersStale = c, false
	} else {
		s.CountersStale = true
	}
	return &s
}

// maintain is the body of a cycle: gather the requests (close events, due
// deadlines, last cycle's lone entries, this cycle's slice of the walk),
// have the reaper apply them, and build the sample of a successful cycle
// (Time, Duration and Maintenance are set by Cycle). Removals are recorded
// in rm as they happen, so a cycle that fails after some can still report
// them. Called with l.mu held.
func (l *Loop) maintain(ctx context.Context, rm *Removed) (*Sample, error) {
	now, err := l.o.Clock.Now()
	if err != nil {
		return nil, fmt.Errorf("maintenance: read clock: %w", err)
	}
	reqs := append(l.reqs[:0], l.retry...)
	l.retry = l.retry[:0]
	l.udpFrom, l.udpTo = 0, 0

	// 1. Close events: resets now; time-waits, new pairs and holds into
	// their schedules, a time-wait's timestamp hold now (ReapTSHold); lone
	// sightings to the next cycle (a second look, one cycle later).
	var sighted []pairID
	read, over, err := l.events.Drain(func(ev *dataplane.CloseEvent) {
		switch dataplane.CloseKind(ev.Kind) {
		case dataplane.CloseRST:
			reqs = append(reqs, dataplane.ReapRequest{Key: ev.Key, Generation: ev.Generation, Op: dataplane.ReapReset})
		case dataplane.CloseFIN:
			l.schedule(&l.timewait, now, ev, l.tw)
			// a backend-first close with timestamps: its port may be reused (bpf/snat.h)
			reqs = append(reqs, dataplane.ReapRequest{Key: ev.Key, Generation: ev.Generation, Op: dataplane.ReapTSHold})
		case dataplane.CloseOpen:
			if ev.Key.Proto == protoUDP {
				l.scheduleUDP(pairID{ev.Key, ev.Generation}, dataplane.Widen(now, ev.Time)+l.uttl)
				break
			}
			l.schedule(&l.embryonic, now, ev, l.ettl)
		case dataplane.CloseHold:
			l.schedule(&l.hold, now, ev, l.sh)
		case dataplane.CloseLone:
			sighted = append(sighted, pairID{ev.Key, ev.Generation})
		}
	})
	l.eventsRead += read
	l.overwritten += over
	if err != nil {
		l.reqs = reqs
		l.requeue(now, reqs)
		return nil, err
	}
	// 2. Deadlines that fall now: time-waits that end, embryonic TTLs that
	// run out, holds that end, UDP pairs to re-check.
	l.udpFrom = len(reqs)
	l.udp.popDue(now, func(d due) {
		reqs = append(reqs, dataplane.ReapRequest{Key: d.key, Generation: d.gen, Op: dataplane.ReapUDP})
	})
	l.udpTo = len(reqs)
	for _, sc := range []struct {
		s  *schedule
		op dataplane.ReapOp
	}{{&l.timewait, dataplane.ReapTimeWait}, {&l.embryonic, dataplane.ReapEmbryonic}, {&l.hold, dataplane.ReapHold}} {
		sc.s.popDue(now, func(d due) {
			reqs = append(reqs, dataplane.ReapRequest{Key: d.key, Generation: d.gen, Op: sc.op})
		})
	}
	// 3. Entries the previous cycle found lone: removed if still lone.
	for id := range l.lone {
		reqs = append(reqs, dataplane.ReapRequest{Key: id.key, Generation: id.gen, Op: dataplane.ReapLone})
	}
	clear(l.lone)
	for _, id := range sighted {
		l.lone[id] = struct{}{}
	}
	// 4. This cycle's slice of the walk.
	if l.walk.cycles == 0 {
		l.retired = l.dp.BeginRetiredSNATUse() // a pass begins
	}
	passes := l.walk.status.Passes
	err = l.walk.step(ctx, now, l.walkEstimate(), func(k *dataplane.FlowKey, v *dataplane.FlowValue) {
		l.retired.Visit(k, v)
		if l.adopting != nil {
			l.adopt(now, k, v)
		}
		if op, ok := l.decide(now, k, v); ok {
			reqs = append(reqs, dataplane.ReapRequest{Key: *k, Generation: v.Generation, Op: op})
		}
	})
	if err != nil {
		l.reqs = reqs
		l.requeue(now, reqs)
		return nil, err
	}
	if l.adopting != nil && l.walk.status.Passes > 0 {
		// The first pass is over. One more cycle reads the events of the
		// pairs its last slice found, then adoption ends.
		if l.adoptTail == 0 {
			l.adopting = nil
		}
		l.adoptTail--
	}
	if l.walk.status.Passes != passes {
		l.shrinkRetiredSNAT()
	}
	if l.afterDecide != nil {
		l.afterDecide()
	}
	// 5. The reaper re-checks and removes.
	if err := l.dp.Reap(reqs, dataplane.ReapClock{Now: now, TimeWait: l.tw, OrphanTTL: l.ttl, EmbryonicTTL: l.ettl, SNATHold: l.sh,
		UDPTimeout: l.uttl, UDPStreamTimeout: l.ustl}); err != nil {
		l.reqs = reqs
		l.requeue(now, reqs)
		return nil, fmt.Errorf("maintenance: %w", err)
	}
	l.reqs = reqs
	for i := range reqs {
		l.account(&reqs[i], rm)
	}
	for i := l.udpFrom; i < l.udpTo; i++ {
		if r := &reqs[i]; r.Result == dataplane.ReapKept {
			// not due yet: back in at the deadline the pair has now
			l.reschedule(pairID{r.Key, r.Generation}, max(dataplane.Widen(now, r.Next), now+1))
		}
	}
	l.collectNextHops()

	// 6. Figures.
	counters, err := l.dp.Counters()
	if err != nil {
		return nil, fmt.Errorf("maintenance: %w", err)
	}
	g, err := readGauges(l.dp, l.o.Members)
	if err != nil {
		return nil, err
	}
	l.cycle++
	pairs := g.active + g.timewait + g.resetting
	s := &Sample{
		Cycle:            l.cycle,
		Now:              now,
		FlowEntries:      uint64(dataplane.EntriesPerPair)*(pairs+g.udpActive) + uint64(l.hold.Len()),
		FlowCapacity:     uint64(l.dp.FlowCapacity()),
		Active:           g.active,
		TimeWait:         g.timewait,
		Resetting:        g.resetting,
		Backends:         g.per,
		Counters:         counters,
		Opened:           counters.PairsCreated,
		Closed:           closedOf(counters),
		Orphaned:         g.orphaned,
		EmbryonicExpired: g.embryonic,
		InvariantRepairs: g.repairs,
		UDP: UDPSample{
			Active: g.udpActive, Unreplied: g.udpUnreplied, Opened: counters.UDPPairsCreated,
			ExpiredUnreplied: g.udpExpUnreplied, ExpiredReplied: g.udpExpReplied,
			OverCap: counters.UDPOverCap, NoBackend: counters.UDPNoBackend, FragsPassed: counters.UDPFragsPassed,
		},
		Services: g.services,
		Lone:     uint64(len(l.lone)),
		Removed:  *rm,
		Walk:     l.walk.status,
		CloseEvents: CloseEvents{
			Path: l.events.Path(), Read: l.eventsRead,
			Lost:              counters.CloseEventsLost + l.overwritten,
			TimeWaitScheduled: uint64(l.timewait.Len()), EmbryonicScheduled: uint64(l.embryonic.Len()),
			HoldScheduled: uint64(l.hold.Len()), UDPScheduled: uint64(l.udp.Len()), Unscheduled: l.unscheduled,
		},
	}
	return s, nil
}

// schedule puts the request an event announces into s, due wait after the
// event's time; a full schedule leaves the pair to the walk.
func (l *Loop) schedule(s *schedule, now dataplane.Jiffies, ev *dataplane.CloseEvent, wait dataplane.Jiffies) {
	if !s.add(due{deadline: dataplane.Widen(now, ev.Time) + wait, key: ev.Key, gen: ev.Generation}) {
		l.unscheduled++
	}
}

// scheduleUDP puts a new UDP pair's first re-check into the udp schedule
// at deadline, once per pair: during adoption a pair the walk adopted
// first, or whose event came twice, is not scheduled again. A full
// schedule leaves the pair to the walk.
func (l *Loop) scheduleUDP(id pairID, deadline dataplane.Jiffies) {
	if l.adopting != nil {
		if _, dup := l.adopting[id]; dup {
			return
		}
		l.adopting[id] = struct{}{}
	}
	l.reschedule(id, deadline)
}

// reschedule puts a UDP pair's next re-check into the udp schedule.
func (l *Loop) reschedule(id pairID, deadline dataplane.Jiffies) {
	if !l.udp.add(due{deadline: deadline, key: id.key, gen: id.gen}) {
		l.unscheduled++
	}
}

// adopt schedules a UDP pair found by the walk during adoption (the
// first complete pass after New, and the cycle after it) that no event
// scheduled: its first re-check is due its state's timeout after its
// forward entry's last datagram (the reaper looks at the reverse entry's
// too, and answers the later deadline).
func (l *Loop) adopt(now dataplane.Jiffies, k *dataplane.FlowKey, v *dataplane.FlowValue) {
	if k.Direction() != dataplane.DirClient || v.Flags&dataplane.FlagUDP == 0 {
		return
	}
	l.scheduleUDP(pairID{*k, v.Generation}, dataplane.Widen(now, v.LastSeen)+l.udpTTL(v))
}

// udpTTL is a UDP entry's timeout: UDPStreamTimeout once the backend
// answered, else UDPTimeout.
func (l *Loop) udpTTL(v *dataplane.FlowValue) dataplane.Jiffies {
	if v.Flags&dataplane.FlagUDPReplied != 0 {
		return l.ustl
	}
	return l.uttl
}

// walkEstimate is the number of entries the walk expects in the map: the
// latest sample's (two per pair, plus held entries), or the last complete
// pass's count if larger (lone entries, pairs the counters do not know
// of). Until a pass has completed it is the map's capacity, so a table
// adopted full is still walked within a pass's cycles.
func (l *Loop) walkEstimate() uint64 {
	est := l.walk.status.LastPassEntries
	if l.walk.status.Passes == 0 {
		est = uint64(l.dp.FlowCapacity())
	}
	if prev := l.latest; prev != nil {
		est = max(est, prev.FlowEntries)
	}
	return est
}

// decide is the walk's request for one entry, if any. Forward entries
// carry the pair's state: a reset pair is removed now, a time-wait pair
// once its time-wait is over, an embryonic pair (live, never established)
// once the embryonic TTL has passed since its SYN (all three normally
// through their events; the walk catches the ones whose event was lost),
// an established live pair idle for the orphan TTL is an orphan candidate
// (the reaper checks the reverse entry's last-seen time too, and repairs
// the pair if it is lone). A held reverse entry (XLB_F_HOLD: lone on
// purpose, keeping its SNAT port through the backend's TIME_WAIT) is
// removed once SNATHold has passed since its pair closed, and is
// never checked as lone. A UDP pair's forward entry idle for its state's
// timeout gets a ReapUDP (the reaper checks the reverse entry's last
// datagram too): the net for a pair whose event was lost or found its
// schedule full; such a request is not rescheduled when kept, the walk
// comes back. Any other reverse entry idle for the orphan TTL
// is checked for its counterpart: a live pair's forward entry handles the
// pair, so only a lone one is removed. Lone entries that see packets are
// reported by the data path (dataplane.CloseLone); the walk finds the idle
// ones.
func (l *Loop) decide(now dataplane.Jiffies, k *dataplane.FlowKey, v *dataplane.FlowValue) (dataplane.ReapOp, bool) {
	age := dataplane.Age(now, v.LastSeen)
	if k.Direction() != dataplane.DirClient {
		if v.Flags&dataplane.FlagHold != 0 {
			return dataplane.ReapHold, age >= l.sh
		}
		return dataplane.ReapCheck, age >= l.ttl
	}
	switch {
	case v.Flags&dataplane.FlagUDP != 0:
		return dataplane.ReapUDP, age >= l.udpTTL(v)
	case v.Flags&dataplane.FlagClosedRST != 0:
		return dataplane.ReapReset, true
	case v.Flags&dataplane.FlagClosedFIN != 0:
		return dataplane.ReapTimeWait, age >= l.tw
	case v.Flags&dataplane.FlagEstablished == 0:
		return dataplane.ReapEmbryonic, age >= l.ettl
	}
	return dataplane.ReapOrphan, age >= l.ttl
}

// requeue keeps a failed cycle's removals (not its checks) for the next
// one. The udp schedule's requests go back into it, due now, so that
// their pairs keep their one chain of requests.
func (l *Loop) requeue(now dataplane.Jiffies, reqs []dataplane.ReapRequest) {
	for i, r := range reqs {
		switch {
		case i >= l.udpFrom && i < l.udpTo:
			l.reschedule(pairID{r.Key, r.Generation}, now)
		case r.Op != dataplane.ReapCheck:
			r.Result, r.Next = 0, 0
			l.retry = append(l.retry, r)
		}
	}
	l.udpFrom, l.udpTo = 0, 0
}

// account records one answered request.
func (l *Loop) account(r *dataplane.ReapRequest, rm *Removed) {
	switch r.Result {
	case dataplane.Reaped:
		switch r.Op {
		case dataplane.ReapReset:
			rm.Reset++
		case dataplane.ReapTimeWait:
			rm.TimeWait++
		case dataplane.ReapOrphan:
			rm.Orphaned++
		case dataplane.ReapEmbryonic:
			rm.Embryonic++
		case dataplane.ReapHold:
			rm.Hold++
		case dataplane.ReapUDP:
			rm.UDP++
		case dataplane.ReapLone:
			rm.Repaired++
			l.log.WithFields(logrus.Fields{"key": r.Key.String(), "generation": r.Generation}).
				Warn("maintenance: removed a lone flow entry (pair invariant violation)")
			return
		}
		l.log.WithFields(logrus.Fields{"key": r.Key.String(), "generation": r.Generation, "reason": r.Op.String()}).Debug("maintenance: pair removed")
	case dataplane.ReapRepaired:
		rm.Repaired++
		l.log.WithFields(logrus.Fields{"key": r.Key.String(), "generation": r.Generation}).
			Warn("maintenance: removed a lone flow entry (pair invariant violation)")
	case dataplane.ReapKept:
		// A packet moved the pair on after the decision (or, for a
		// time-wait, the entry's stamp is a little later than its
		// event's): it stays, and the walk looks at it again. A pair
		// found established at its embryonic deadline is the usual
		// outcome, not a refusal.
		// So is a UDP pair that saw a datagram since: its request comes
		// back at the deadline the reaper answered.
		if r.Op != dataplane.ReapCheck && r.Op != dataplane.ReapEmbryonic && r.Op != dataplane.ReapTSHold && r.Op != dataplane.ReapUDP {
			rm.Kept++
		}
	case dataplane.ReapLoneFound:
		l.lone[pairID{r.Key, r.Generation}] = struct{}{}
	}
}

// shrinkRetiredSNAT narrows the retired SNAT spaces to what the pass that
// just ended found held (dataplane.ShrinkRetiredSNAT) and hands what it
// released to Options.RetiredSNATReleased. A failure is logged, not a
// cycle failure: the spaces stay retired and the next pass tries again.
func (l *Loop) shrinkRetiredSNAT() {
	u := l.retired
	l.retired = nil
	released, err := l.dp.ShrinkRetiredSNAT(u)
	if err != nil {
		l.log.WithError(err).Warn("maintenance: cannot narrow the retired SNAT spaces; they stay recognised until a later pass")
		return
	}
	if len(released) == 0 {
		return
	}
	l.log.WithFields(logrus.Fields{"released": released, "retired": l.dp.RetiredSNAT()}).
		Info("retired SNAT ports no longer held by any connection pair are released")
	if l.o.RetiredSNATReleased != nil {
		if err := l.o.RetiredSNATReleased(released); err != nil {
			l.log.WithError(err).Warn("maintenance: releasing the retired SNAT ports on the host failed")
		}
	}
}
