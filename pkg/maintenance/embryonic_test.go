package maintenance_test

import (
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// stamp sets an entry's last-seen time to j, as if a packet had gone
// through it then.
func (r *rig) stamp(k dataplane.FlowKey, j dataplane.Jiffies) {
	r.t.Helper()
	r.rewrite(k, func(v *dataplane.FlowValue) { v.LastSeen = j.Low32() })
}

// synAt is when c's pair was created: its forward entry's last-seen time,
// which no packet refreshes while the pair is embryonic.
func (r *rig) synAt(c *conn) dataplane.Jiffies {
	r.t.Helper()
	return dataplane.Widen(r.e.Now(r.t), c.pair().Fwd.LastSeen)
}

// A pair whose client never ACKs the backend's SYN-ACK is removed
// EmbryonicTTL after its SYN, through its OPEN event, although the backend
// retransmitted its SYN-ACK, the client its SYN, and its reverse entry
// looks fresh; an established pair opened just after stays, and its
// deadline is no refusal (Removed.Kept).
func TestEmbryonicPairRemovedAfterTTL(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		r := newRig(t, o, maintenance.Options{})
		ettl := r.ticks(maintenance.DefaultEmbryonicTTL)
		c := r.openEmbryonic(33000)
		synAt := r.synAt(c)
		est := r.open(33001)
		for range 3 {
			r.e.WaitTick(t, r.e.Now(t))
			c.send(c.fromBackend(dt.SYN|dt.ACK, 5000, 1001))
			c.send(c.fromClient(dt.SYN, 1000, 0))
		}
		p := c.pair()
		if p.Fwd.Flags&dataplane.FlagEstablished != 0 || p.Fwd.Flags&dataplane.FlagSYNACK == 0 {
			t.Fatalf("forward flags %#x: want the SYN-ACK seen, not established", p.Fwd.Flags)
		}
		if got := dataplane.Widen(r.e.Now(t), p.Fwd.LastSeen); got != synAt {
			t.Fatalf("retransmissions moved the forward last-seen time from %d to %d", synAt, got)
		}
		r.stamp(p.RevKey, synAt+ettl) // fresh at the deadline: only the SYN's time counts

		r.clk.Set(synAt + ettl - 1)
		s := r.cycle()
		r.wantEntries(4)
		wantSample(t, s, 2, 0, 0)
		if s.CloseEvents.EmbryonicScheduled != 2 || s.Removed != (maintenance.Removed{}) {
			t.Fatalf("before the deadline: events %+v removed %+v; want both pairs scheduled, nothing removed", s.CloseEvents, s.Removed)
		}

		r.clk.Set(synAt + ettl)
		s = r.cycle()
		if !c.gone() || est.gone() {
			t.Fatalf("at the deadline: embryonic pair gone %v, established pair gone %v", c.gone(), est.gone())
		}
		r.wantEntries(2)
		wantSample(t, s, 1, 0, 0)
		if s.Removed != (maintenance.Removed{Embryonic: 1}) || s.EmbryonicExpired != 1 || s.Orphaned != 0 || s.Closed.Total() != 0 {
			t.Fatalf("removed %+v embryonic expired %d orphaned %d closed %+v", s.Removed, s.EmbryonicExpired, s.Orphaned, s.Closed)
		}
		wantActive := uint64(0)
		if est.pair().Fwd.BackendId == p.Fwd.BackendId {
			wantActive = 1
		}
		if b, _ := s.Backend(uint32(p.Fwd.BackendId)); b.Active != wantActive {
			t.Fatalf("backend %d counts %d active pairs, want %d", p.Fwd.BackendId, b.Active, wantActive)
		}

		// Long past the TTL the established pair is still there.
		r.clk.Add(5 * ettl)
		if s = r.cycle(); est.gone() || s.Removed != (maintenance.Removed{}) || s.EmbryonicExpired != 1 || s.CloseEvents.EmbryonicScheduled != 0 {
			t.Fatalf("later: established pair gone %v, removed %+v, embryonic expired %d, events %+v", est.gone(), s.Removed, s.EmbryonicExpired, s.CloseEvents)
		}
	})
}

// Embryonic pairs whose OPEN event never arrived (written straight into
// the map: a ring buffer full during a SYN flood) are found by the walk
// once EmbryonicTTL has passed since their SYN; an established one
// written the same way stays. A pass never takes longer than the TTL.
func TestLostOpenEventsCaughtByWalk(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		r := newRig(t, o, maintenance.Options{})
		ettl := r.ticks(maintenance.DefaultEmbryonicTTL)
		c := r.open(33000)
		now := r.e.Now(t)
		syn, _ := r.forge(c.pair(), 34000, 50000, 1<<30, 0, now)
		synack, _ := r.forge(c.pair(), 34001, 50001, 1<<30+1, dataplane.FlagSYNACK, now)
		est, _ := r.forge(c.pair(), 34002, 50002, 1<<30+2, dataplane.FlagSYNACK|dataplane.FlagEstablished, now)

		r.clk.Set(now + ettl - 1)
		s := r.cycle()
		if s.Walk.PassCycles != 10 {
			t.Fatalf("pass cycles %d, want 10 (the 10 s embryonic TTL at one cycle a second)", s.Walk.PassCycles)
		}
		if s.Removed != (maintenance.Removed{}) || s.CloseEvents.Read != 1 { // the live pair's OPEN
			t.Fatalf("before the TTL: removed %+v, events %+v", s.Removed, s.CloseEvents)
		}
		r.wantEntries(8)

		r.clk.Set(now + ettl)
		s = r.cycle()
		if s.Removed != (maintenance.Removed{Embryonic: 2}) || s.EmbryonicExpired != 2 {
			t.Fatalf("at the TTL: removed %+v, embryonic expired %d; want the two forged embryonic pairs", s.Removed, s.EmbryonicExpired)
		}
		for _, k := range []dataplane.FlowKey{syn, synack} {
			if _, err := r.e.DP.LookupFlow(k); err != dataplane.ErrNotFound {
				t.Fatalf("embryonic pair %v still there: %v", k, err)
			}
		}
		if _, err := r.e.DP.LookupFlow(est); err != nil {
			t.Fatalf("established forged pair: %v", err)
		}
		r.wantEntries(4)
	})
}

// The walk's pass is the shorter of OrphanTTL/10 and EmbryonicTTL.
func TestWalkPassLength(t *testing.T) {
	for _, c := range []struct {
		o    maintenance.Options
		want uint64
	}{
		{maintenance.Options{}, 10},
		{maintenance.Options{EmbryonicTTL: 60 * time.Second}, 30},
		{maintenance.Options{EmbryonicTTL: 5 * time.Second}, 5},
		{maintenance.Options{OrphanTTL: 600 * time.Second, EmbryonicTTL: 120 * time.Second}, 60},
		{maintenance.Options{Interval: 10 * time.Second, EmbryonicTTL: 5 * time.Second}, 1},
	} {
		r := newRig(t, dt.Options{}, c.o)
		if s := r.cycle(); s.Walk.PassCycles != c.want {
			t.Fatalf("%+v: pass cycles %d, want %d", c.o, s.Walk.PassCycles, c.want)
		}
	}
}

// A flood of new pairs cannot grow the embryonic schedule beyond the
// pairs the table holds: pairs opened and reset round after round leave
// their OPEN events behind, the schedule stops at the table's size and
// counts the rest, and the walk removes the embryonic pairs whose events
// found no room.
func TestEmbryonicScheduleBoundedByTable(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		o.MaxConnections = 16
		r := newRig(t, o, maintenance.Options{})
		ettl := r.ticks(maintenance.DefaultEmbryonicTTL)
		const rounds, perRound = 6, 12
		var last []*conn
		for round := range rounds {
			last = last[:0]
			for i := range perRound {
				last = append(last, r.openEmbryonic(uint16(20000+round*perRound+i)))
			}
			if round == rounds-1 {
				break
			}
			for _, c := range last { // the backend refuses: RST answering the SYN
				c.send(c.fromBackend(dt.RST|dt.ACK, 0, 1001))
			}
			s := r.cycle()
			if s.Removed.Reset != perRound {
				t.Fatalf("round %d: removed %+v, want %d resets", round, s.Removed, perRound)
			}
			if s.CloseEvents.EmbryonicScheduled > 16 {
				t.Fatalf("round %d: %d pairs scheduled, more than the table's 16", round, s.CloseEvents.EmbryonicScheduled)
			}
		}
		s := r.cycle()
		if s.CloseEvents.EmbryonicScheduled != 16 || s.CloseEvents.Unscheduled != rounds*perRound-16 {
			t.Fatalf("events %+v: want 16 scheduled and %d left to the walk", s.CloseEvents, rounds*perRound-16)
		}
		r.wantEntries(2 * perRound)

		r.clk.Set(r.e.Now(t) + ettl)
		s = r.cycle()
		if s.Removed.Embryonic != perRound || s.CloseEvents.EmbryonicScheduled != 0 {
			t.Fatalf("after the TTL: removed %+v, events %+v; want the %d live embryonic pairs removed by the walk", s.Removed, s.CloseEvents, perRound)
		}
		for _, c := range last {
			if !c.gone() {
				t.Fatalf("embryonic pair of port %d still there", c.port)
			}
		}
		r.wantEntries(0)
		wantSample(t, s, 0, 0, 0)
	})
}
