package maintenance_test

import (
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// A client that reuses its port while the backend holds TIME_WAIT (the
// backend closed first) replaces the pair; the old reverse entry stays
// held, keeping the SNAT port, until SNATHold after the old pair's close,
// and is then removed through its HOLD event. It is never taken for a
// lone entry, even when a packet meets it.
func TestHoldRemovedAfterSNATHold(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		r := newRig(t, o, maintenance.Options{})
		tw := r.ticks(maintenance.SNATHold)
		c := r.open(33000)
		c.backendFIN()
		c.send(c.fromClient(dt.FIN|dt.ACK, 1001, 5002))
		old := c.pair()
		closedAt := r.closedAt(c)
		if old.Fwd.Flags&dataplane.FlagClosedFIN == 0 {
			t.Fatalf("old pair flags %#x: not in time-wait", old.Fwd.Flags)
		}

		// The client reuses its port: a new pair, established.
		c.send(c.fromClient(dt.SYN, 9000, 0))
		fresh := c.pair()
		if fresh.Fwd.Generation == old.Fwd.Generation || fresh.RevKey == old.RevKey {
			t.Fatalf("the SYN did not replace the pair on another SNAT port: old %v gen %d, new %v gen %d",
				old.RevKey, old.Fwd.Generation, fresh.RevKey, fresh.Fwd.Generation)
		}
		c.send(c.fromBackend(dt.SYN|dt.ACK, 7000, 9001))
		c.send(c.fromClient(dt.ACK, 9001, 7001))
		held, err := r.e.DP.LookupFlow(old.RevKey)
		if err != nil || held.Flags&dataplane.FlagHold == 0 || held.Generation != old.Rev.Generation {
			t.Fatalf("old reverse entry %+v (%v): want it held", held, err)
		}

		// A backend packet on the held entry, after an idle spell, is
		// dropped; no cycle repairs the entry as lone.
		r.stamp(old.RevKey, closedAt-2*dataplane.LoneCheckTicks)
		r.e.MustRun(t, r.e.FromBackend(old.Backend(), old.SNATPort(), dt.ACK, 5002, 1002, nil).Frame(), r.e.BackendIface(), dt.XDPDrop)
		r.stamp(old.RevKey, closedAt) // back to the close time the hold runs from

		r.clk.Set(closedAt + tw - 1)
		s := r.cycle()
		if s.CloseEvents.HoldScheduled != 1 || s.Removed != (maintenance.Removed{}) {
			t.Fatalf("before the hold's end: events %+v removed %+v; want the hold scheduled, nothing removed", s.CloseEvents, s.Removed)
		}
		s = r.cycle()
		if s.Removed.Repaired != 0 || s.InvariantRepairs != 0 || s.Lone != 0 {
			t.Fatalf("the held entry was taken for a lone one: removed %+v repairs %d lone %d", s.Removed, s.InvariantRepairs, s.Lone)
		}
		r.wantEntries(3)
		if s.FlowEntries != 3 {
			t.Fatalf("sample counts %d entries, want 3 (a pair and the held entry)", s.FlowEntries)
		}

		r.clk.Set(closedAt + tw)
		s = r.cycle()
		if s.Removed != (maintenance.Removed{Hold: 1}) || s.CloseEvents.HoldScheduled != 0 {
			t.Fatalf("at the hold's end: removed %+v events %+v; want the held entry removed", s.Removed, s.CloseEvents)
		}
		if _, err := r.e.DP.LookupFlow(old.RevKey); err != dataplane.ErrNotFound {
			t.Fatalf("held entry still there: %v", err)
		}
		if p := c.pair(); p.Fwd.Generation != fresh.Fwd.Generation {
			t.Fatalf("new pair generation %d, want %d", p.Fwd.Generation, fresh.Fwd.Generation)
		}
		r.wantEntries(2)
		wantSample(t, s, 1, 0, 0)
		if s.InvariantRepairs != 0 || s.FlowEntries != 2 {
			t.Fatalf("repairs %d entries %d", s.InvariantRepairs, s.FlowEntries)
		}
		for _, e := range r.logs.AllEntries() {
			if e.Level <= logrus.WarnLevel {
				t.Fatalf("logged %s: %s %v", e.Level, e.Message, e.Data)
			}
		}
	})
}

// Held entries whose HOLD event never arrived are found by the walk: one
// is removed once SNATHold has passed since its pair's close, never
// checked as lone before; one idle for the orphan TTL is removed as held,
// not repaired as lone.
func TestWalkRemovesHeldEntries(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		r := newRig(t, o, maintenance.Options{})
		tw, ttl := r.ticks(maintenance.SNATHold), r.ticks(maintenance.DefaultOrphanTTL)
		c := r.open(33000)
		now := r.e.Now(t)
		hold := func(port, snat uint16, gen uint32, closed dataplane.Jiffies) dataplane.FlowKey {
			fk, rk := r.forge(c.pair(), port, snat, gen, 0, closed)
			r.e.DeleteFlow(t, fk)
			r.rewrite(rk, func(v *dataplane.FlowValue) { v.Flags |= dataplane.FlagHold })
			return rk
		}
		recent := hold(34000, 50000, 1<<30, now)
		ancient := hold(34001, 50001, 1<<30+1, now-ttl)

		r.clk.Set(now + tw - 1)
		s := r.cycle()
		if s.Removed != (maintenance.Removed{Hold: 1}) || s.Lone != 0 {
			t.Fatalf("removed %+v lone %d; want the entry held for the orphan TTL removed as held", s.Removed, s.Lone)
		}
		if _, err := r.e.DP.LookupFlow(ancient); err != dataplane.ErrNotFound {
			t.Fatalf("old held entry still there: %v", err)
		}
		for range 3 {
			if s = r.cycle(); s.Removed != (maintenance.Removed{}) || s.Lone != 0 {
				t.Fatalf("before its hold's end: removed %+v lone %d", s.Removed, s.Lone)
			}
		}
		r.clk.Set(now + tw)
		if s = r.cycle(); s.Removed != (maintenance.Removed{Hold: 1}) || s.InvariantRepairs != 0 {
			t.Fatalf("at its hold's end: removed %+v repairs %d", s.Removed, s.InvariantRepairs)
		}
		if _, err := r.e.DP.LookupFlow(recent); err != dataplane.ErrNotFound {
			t.Fatalf("held entry still there: %v", err)
		}
		r.wantEntries(2)
	})
}

// A pair whose backend closed first leaves after its 60 s time-wait
// (TimeWait: the seed's interval; the gauges count it out then), but its
// reverse entry stays held, keeping the SNAT port, until SNATHold after
// the close: the backend's TIME_WAIT socket may outlive 60 s by the timer
// wheel's rounding. The held entry is counted in the sample's flow
// entries once its HOLD event is read, in no pair gauge, and is removed
// as a hold, never as a lone entry.
func TestSNATHoldAfterTimeWait(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		r := newRig(t, o, maintenance.Options{})
		tw, sh := r.ticks(maintenance.TimeWait), r.ticks(maintenance.SNATHold)
		if sh <= tw {
			t.Fatalf("SNATHold %d ticks, not longer than the time-wait's %d", sh, tw)
		}
		c := r.open(33000)
		c.backendFIN()
		c.send(c.fromClient(dt.FIN|dt.ACK, 1001, 5002))
		old := c.pair()
		closedAt := r.closedAt(c)

		r.clk.Set(closedAt + tw)
		s := r.cycle()
		if !c.gone() || s.Removed != (maintenance.Removed{TimeWait: 1}) {
			t.Fatalf("at the time-wait's end: pair gone %v, removed %+v; want the pair removed", c.gone(), s.Removed)
		}
		wantSample(t, s, 0, 0, 0)
		held, err := r.e.DP.LookupFlow(old.RevKey)
		if err != nil || held.Flags&dataplane.FlagHold == 0 || held.Generation != old.Rev.Generation || dataplane.Widen(closedAt, held.LastSeen) != closedAt {
			t.Fatalf("reverse entry %+v (%v): want it held from the close at %d", held, err, closedAt)
		}
		r.wantEntries(1)

		r.clk.Set(closedAt + sh - 1)
		s = r.cycle()
		if s.CloseEvents.HoldScheduled != 1 || s.FlowEntries != 1 || s.Removed != (maintenance.Removed{}) {
			t.Fatalf("before the hold's end: events %+v entries %d removed %+v; want the hold scheduled and counted", s.CloseEvents, s.FlowEntries, s.Removed)
		}
		wantSample(t, s, 0, 0, 0)
		if s = r.cycle(); s.Removed != (maintenance.Removed{}) || s.Lone != 0 || s.InvariantRepairs != 0 {
			t.Fatalf("the held entry was removed early or taken for a lone one: removed %+v lone %d repairs %d", s.Removed, s.Lone, s.InvariantRepairs)
		}
		r.wantEntries(1)

		r.clk.Set(closedAt + sh)
		s = r.cycle()
		if s.Removed != (maintenance.Removed{Hold: 1}) || s.CloseEvents.HoldScheduled != 0 || s.FlowEntries != 0 {
			t.Fatalf("at the hold's end: removed %+v events %+v entries %d; want the held entry removed", s.Removed, s.CloseEvents, s.FlowEntries)
		}
		r.wantEntries(0)
		if s.Closed != (maintenance.Closed{BackendFIN: 1}) || s.InvariantRepairs != 0 {
			t.Fatalf("closed %+v repairs %d", s.Closed, s.InvariantRepairs)
		}
	})
}
