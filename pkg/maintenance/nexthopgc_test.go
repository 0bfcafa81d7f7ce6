package maintenance_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// gcCall is one call of Options.NextHopGC, with a copy of its bitset and
// the cycle it came in.
type gcCall struct {
	bits      []uint64
	passStart uint32
	cycle     int // cycles run before this call's, by the test's count
}

// gcRecorder is an Options.NextHopGC that records its calls; it fails
// with err while err is set.
type gcRecorder struct {
	calls  []gcCall
	cycles int // the test bumps it before each cycle
	err    error
}

func (g *gcRecorder) hook(referenced []uint64, passStart uint32) error {
	g.calls = append(g.calls, gcCall{bits: slices.Clone(referenced), passStart: passStart, cycle: g.cycles})
	return g.err
}

// referenced is the bitset of the next-hop slots the flow map's entries
// name, as the walk should collect it.
func (r *rig) referenced() []uint64 {
	r.t.Helper()
	bits := make([]uint64, dataplane.MaxNextHops/64)
	for _, v := range r.e.Flows(r.t) {
		if v.Nexthop < uint32(dataplane.MaxNextHops) {
			bits[v.Nexthop/64] |= 1 << (v.Nexthop % 64)
		}
	}
	return bits
}

// setNextHop makes entry k name slot id.
func (r *rig) setNextHop(k dataplane.FlowKey, id uint32) {
	r.t.Helper()
	r.rewrite(k, func(v *dataplane.FlowValue) { v.Nexthop = id })
}

// With a pass per cycle (a small table, a pass length of one cycle) the
// hook is called once per cycle, after the pass, with exactly the slots
// the entries name and the clock of the cycle the pass began in. Slot ids
// beyond the table name nothing.
func TestNextHopGCOncePerPass(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		g := &gcRecorder{}
		r := newRig(t, o, maintenance.Options{Interval: 10 * time.Second, NextHopGC: g.hook})
		a, b := r.open(33000), r.open(33001)
		now := r.e.Now(t)
		fk, rk := r.forge(a.pair(), 34000, 50000, 1<<30, dataplane.FlagSYNACK|dataplane.FlagEstablished, now)
		r.setNextHop(fk, 4097)
		r.setNextHop(rk, uint32(dataplane.MaxNextHops)-1)
		r.setNextHop(b.pair().RevKey, uint32(dataplane.MaxNextHops)+5)
		want := r.referenced()
		if n := popcount(want); n < 3 {
			t.Fatalf("only %d distinct slots named", n)
		}
		for i := range 3 {
			r.clk.Set(now + dataplane.Jiffies(i))
			g.cycles++
			s := r.cycle()
			if s.Walk.PassCycles != 1 || s.Walk.Passes != uint64(i+1) {
				t.Fatalf("cycle %d: walk %+v, want a pass per cycle", i, s.Walk)
			}
			if len(g.calls) != i+1 {
				t.Fatalf("after %d cycles the hook was called %d times", i+1, len(g.calls))
			}
			c := g.calls[i]
			if c.passStart != s.Now.Low32() || !slices.Equal(c.bits, want) {
				t.Fatalf("cycle %d: pass start %d (want %d), bitset %v, want %v", i, c.passStart, s.Now.Low32(), setBits(c.bits), setBits(want))
			}
		}
	})
}

// When a pass takes several cycles, the hook comes at the end of each
// pass that spans a pass length, with every slot named in the map, and
// with the clock of the pass's first cycle.
func TestNextHopGCAfterMultiCyclePasses(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		o.MaxConnections = 8192
		g := &gcRecorder{}
		r := newRig(t, o, maintenance.Options{Interval: 10 * time.Second, EmbryonicTTL: 30 * time.Second, NextHopGC: g.hook})
		c := r.open(33000)
		now := r.e.Now(t)
		const forged = 6000
		for i := range forged {
			fk, rk := r.forge(c.pair(), uint16(1024+i), uint16(20000+i), uint32(1<<30+i), dataplane.FlagSYNACK|dataplane.FlagEstablished, now)
			r.setNextHop(fk, uint32(i))
			r.setNextHop(rk, uint32(30000+i))
		}
		want := r.referenced()
		var nows []uint32 // clock of each cycle, by cycle
		var passEnds []int
		for i := range 12 {
			r.clk.Set(now + dataplane.Jiffies(i))
			g.cycles++
			s := r.cycle()
			nows = append(nows, s.Now.Low32())
			if len(passEnds) < int(s.Walk.Passes) {
				passEnds = append(passEnds, i+1)
			}
		}
		if len(g.calls) < 3 {
			t.Fatalf("%d calls in 12 cycles (passes ended after cycles %v), want at least 3", len(g.calls), passEnds)
		}
		start := 1 // the cycle the first window began in
		for i, call := range g.calls {
			if !slices.Contains(passEnds, call.cycle) {
				t.Fatalf("call %d after cycle %d, which ended no pass (passes ended after %v)", i, call.cycle, passEnds)
			}
			if call.cycle-start+1 < 3 {
				t.Fatalf("call %d after cycle %d covers cycles %d..%d, shorter than a pass length", i, call.cycle, start, call.cycle)
			}
			if call.passStart != nows[start-1] {
				t.Fatalf("call %d: pass start %d, want %d (cycle %d)", i, call.passStart, nows[start-1], start)
			}
			if !slices.Equal(call.bits, want) {
				t.Fatalf("call %d: %d slots, want %d", i, popcount(call.bits), popcount(want))
			}
			start = call.cycle + 1
		}
	})
}

// A small table is walked whole every cycle, but collected at the pace of
// a pass length: once per 10 cycles at the defaults, over the union of the
// passes, from the first one's clock. A failing hook is logged, does not
// fail the cycle, and is tried again after the next pass length.
func TestNextHopGCPacedByPassLength(t *testing.T) {
	g := &gcRecorder{}
	r := newRig(t, dt.Options{}, maintenance.Options{NextHopGC: g.hook})
	a := r.open(33000)
	now := r.e.Now(t)
	g.err = errors.New("slot table refused")
	var nows []uint32
	for i := range 25 {
		r.clk.Set(now + dataplane.Jiffies(i))
		g.cycles++
		s := r.cycle() // fails the test if the cycle fails
		nows = append(nows, s.Now.Low32())
		if s.Walk.Passes != uint64(i+1) {
			t.Fatalf("cycle %d: %d passes, want a pass per cycle", i+1, s.Walk.Passes)
		}
		if i == 3 {
			r.setNextHop(a.pair().FwdKey, 1234) // within the first window
		}
		if i == 10 {
			g.err = nil
		}
	}
	if len(g.calls) != 2 || g.calls[0].cycle != 10 || g.calls[1].cycle != 20 {
		t.Fatalf("calls after cycles %v, want 10 and 20", callCycles(g.calls))
	}
	if g.calls[0].passStart != nows[0] || g.calls[1].passStart != nows[10] {
		t.Fatalf("pass starts %d, %d; want %d, %d", g.calls[0].passStart, g.calls[1].passStart, nows[0], nows[10])
	}
	if !hasBit(g.calls[0].bits, 1234) || !hasBit(g.calls[1].bits, 1234) {
		t.Fatal("slot 1234, named from the fourth cycle on, missing")
	}
	var warned int
	for _, e := range r.logs.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "next-hop") {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("%d warnings about the failed collection, want 1", warned)
	}
}

func callCycles(calls []gcCall) []int {
	out := make([]int, len(calls))
	for i, c := range calls {
		out[i] = c.cycle
	}
	return out
}

func hasBit(bits []uint64, i uint32) bool { return bits[i/64]&(1<<(i%64)) != 0 }

func popcount(bits []uint64) int { return len(setBits(bits)) }

// setBits lists the set bits' indices.
func setBits(bits []uint64) []uint32 {
	var out []uint32
	for w, x := range bits {
		for b := range 64 {
			if x&(1<<b) != 0 {
				out = append(out, uint32(w*64+b))
			}
		}
	}
	return out
}
