package maintenance_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// forge writes a pair that the data path never saw (no counters, no close
// event): a copy of p on client port port and SNAT port snat, with the
// given generation, forward flags and last-seen time on both entries.
func (r *rig) forge(p dt.Pair, port, snat uint16, gen, flags uint32, seen dataplane.Jiffies) (fk, rk dataplane.FlowKey) {
	r.t.Helper()
	fk, fv, rk, rv := p.FwdKey, p.Fwd, p.RevKey, p.Rev
	fk.SportBe = be16(port)
	rv.DportBe = fk.SportBe
	rk.DportBe = be16(snat)
	fv.SportBe = rk.DportBe
	fv.Generation, rv.Generation = gen, gen
	fv.Flags, rv.Flags = flags, 0
	fv.LastSeen, rv.LastSeen = seen.Low32(), seen.Low32()
	if fv.Peer(fk) != rk || rv.Peer(rk) != fk {
		r.t.Fatalf("forged pair not linked: %v/%v", fv.Peer(fk), rv.Peer(rk))
	}
	for _, e := range []struct {
		k dataplane.FlowKey
		v dataplane.FlowValue
	}{{fk, fv}, {rk, rv}} {
		if err := r.e.DP.PutFlow(e.k, e.v); err != nil {
			r.t.Fatal(err)
		}
	}
	return fk, rk
}

// be16 is port p as a __be16 field holds it.
func be16(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

// A packet that arrives between the loop's decision and the removal keeps
// its pair: the reaper re-checks the last-seen times in the kernel.
func TestPacketAfterDecisionKeepsPair(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		for _, dir := range []string{"client", "backend"} {
			t.Run("ACK from "+dir, func(t *testing.T) {
				r := newRig(t, o, maintenance.Options{})
				ttl := r.ticks(maintenance.DefaultOrphanTTL)
				c := r.open(33000)
				seen := r.lastSeen(c.pair())
				r.e.WaitTick(t, seen)
				r.clk.Set(seen + ttl) // idle for the TTL: the walk decides "orphan"
				fired := false
				maintenance.SetAfterDecide(r.loop, func() {
					if fired {
						return
					}
					fired = true
					if dir == "client" {
						c.send(c.fromClient(dt.ACK, 1001, 5001))
					} else {
						c.send(c.fromBackend(dt.ACK, 5001, 1001))
					}
				})
				s := r.cycle()
				if !fired {
					t.Fatal("the hook did not run")
				}
				r.wantEntries(2)
				if s.Removed.Orphaned != 0 || s.Removed.Kept != 1 || s.Orphaned != 0 {
					t.Fatalf("removed %+v orphaned %d; want the orphan decision refused once", s.Removed, s.Orphaned)
				}
				wantSample(t, s, 1, 0, 0)
				// Idle again for the TTL from the ACK: now it goes.
				r.clk.Set(r.lastSeen(c.pair()) + ttl)
				if s = r.cycle(); s.Removed.Orphaned != 1 || !c.gone() {
					t.Fatalf("removed %+v, pair gone %v", s.Removed, c.gone())
				}
			})
		}
	})
}

// Terminal pairs whose close event never arrived (here: written straight
// into the map) are found by the walk: a reset pair on the cycle that
// visits it, a time-wait pair once its time-wait is over.
func TestWalkFindsPairsWithoutCloseEvents(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		r := newRig(t, o, maintenance.Options{})
		c := r.open(33000)
		now := r.e.Now(t)
		rst, _ := r.forge(c.pair(), 34000, 50000, 1<<30, dataplane.FlagRSTClient|dataplane.FlagClosedRST, now)
		fin, finRev := r.forge(c.pair(), 34001, 50001, 1<<30+1, dataplane.FlagFINClient|dataplane.FlagFINBackend|dataplane.FlagClosedFIN, now)
		// the client closed first: no SNAT hold after the time-wait
		r.rewrite(finRev, func(v *dataplane.FlowValue) { v.Flags |= dataplane.FlagPortFreed })
		r.clk.Set(now)
		s := r.cycle()
		if s.Removed.Reset != 1 || s.CloseEvents.Read != 1 { // the live pair's OPEN
			t.Fatalf("removed %+v events %+v; want the reset pair removed without an event", s.Removed, s.CloseEvents)
		}
		if _, err := r.e.DP.LookupFlow(rst); err != dataplane.ErrNotFound {
			t.Fatalf("reset pair still there: %v", err)
		}
		r.clk.Set(now + r.ticks(maintenance.TimeWait) - 1)
		if s = r.cycle(); s.Removed.TimeWait != 0 {
			t.Fatalf("time-wait pair removed early: %+v", s.Removed)
		}
		r.clk.Set(now + r.ticks(maintenance.TimeWait))
		if s = r.cycle(); s.Removed.TimeWait != 1 {
			t.Fatalf("removed %+v; want the time-wait pair", s.Removed)
		}
		if _, err := r.e.DP.LookupFlow(fin); err != dataplane.ErrNotFound {
			t.Fatalf("time-wait pair still there: %v", err)
		}
		r.wantEntries(2)
		if c.gone() {
			t.Fatal("the live pair was removed")
		}
	})
}

// The walk reads a slice per cycle and visits every entry at least once
// per OrphanTTL/10 (here shorter than the EmbryonicTTL): with a 10 s
// interval, the 300 s TTL and a 30 s embryonic TTL a pass may take 3
// cycles, so once a pass has measured the table, 6,000 pairs
// (12,000 entries) are read in slices of about 4,000 and every pass ends
// within 3 cycles. (The forged pairs are unknown to the counters: the first
// pass sizes itself from the map's capacity, the next ones from the last.)
func TestWalkSlicesAndCompletesPasses(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		o.MaxConnections = 8192
		r := newRig(t, o, maintenance.Options{Interval: 10 * time.Second, EmbryonicTTL: 30 * time.Second})
		c := r.open(33000)
		now := r.e.Now(t)
		const forged = 6000
		for i := range forged {
			r.forge(c.pair(), uint16(1024+i), uint16(20000+i), uint32(1<<30+i), 0, now)
		}
		r.clk.Set(now)
		entries := uint64(2 * (forged + 1))
		for i := 0; r.cycle().Walk.Passes == 0; i++ {
			if i == 30 {
				t.Fatal("no complete pass in 30 cycles")
			}
		}
		passes := uint64(1)
		for cycle := 1; cycle <= 9; cycle++ {
			s := r.cycle()
			if s.Walk.PassCycles != 3 {
				t.Fatalf("pass cycles %d, want 3", s.Walk.PassCycles)
			}
			if s.Walk.Passes > passes {
				passes = s.Walk.Passes
				if s.Walk.LastPassEntries != entries || s.Walk.LastPassCycles > 3 {
					t.Fatalf("cycle %d: pass read %d entries in %d cycles, want %d in at most 3", cycle, s.Walk.LastPassEntries, s.Walk.LastPassCycles, entries)
				}
			}
			if s.Walk.Visited >= entries {
				t.Fatalf("cycle %d: %d visited in an unfinished pass", cycle, s.Walk.Visited)
			}
			if s.Removed != (maintenance.Removed{}) || s.Lone != 0 {
				t.Fatalf("cycle %d: removed %+v lone %d", cycle, s.Removed, s.Lone)
			}
		}
		if passes < 4 {
			t.Fatalf("%d more passes in 9 cycles, want at least 3", passes-1)
		}
	})
}
