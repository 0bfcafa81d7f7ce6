package maintenance_test

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// rig is a fixture namespace with the real data path, pairs built by
// running frames through the real program, and a maintenance loop over the
// real flow map driven by a manual clock. Every sample the loop publishes
// is recorded (safe for concurrent use: Run publishes on its goroutine).
type rig struct {
	t    *testing.T
	e    *dt.Env
	clk  *manualClock
	loop *maintenance.Loop
	logs *logtest.Hook

	mu      sync.Mutex
	samples []*maintenance.Sample // published samples, oldest first
}

// newRig starts a loop on a fresh fixture. fo.OnSample, when set, is called
// with every sample after the rig has recorded it; fo.Clock and fo.Log are
// the rig's.
func newRig(t *testing.T, o dt.Options, fo maintenance.Options) *rig {
	t.Helper()
	e := dt.NewEnv(t, o)
	r := &rig{t: t, e: e, clk: newManualClock(e.Now(t))}
	var log *logrus.Logger
	log, r.logs = logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	fo.Clock, fo.Log = r.clk, log
	fo.OnSample = r.recorder(fo.OnSample)
	l, err := maintenance.New(e.DP, fo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r.loop = l
	return r
}

// recorder is an Options.OnSample that records each sample, then hands it
// to next (if set).
func (r *rig) recorder(next func(*maintenance.Sample)) func(*maintenance.Sample) {
	return func(s *maintenance.Sample) {
		r.mu.Lock()
		r.samples = append(r.samples, s)
		r.mu.Unlock()
		if next != nil {
			next(s)
		}
	}
}

// published is the number of samples the loop has published.
func (r *rig) published() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.samples)
}

// latest is the last sample the loop published; nil before the first.
func (r *rig) latest() *maintenance.Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		return nil
	}
	return r.samples[len(r.samples)-1]
}

// paths are the close event and walk paths every rule is tested on: the
// best the host allows, close events through per-CPU queues (ring buffer
// refused), and the walk reading key by key (batch operations refused).
var paths = []struct {
	name string
	opts dt.Options
}{
	{"ring_buffer", dt.Options{}},
	{"per_cpu_queue", dt.Options{Disable: []dataplane.Feature{dataplane.FeatureRingBuf}}},
	{"per_key", dt.Options{Disable: []dataplane.Feature{dataplane.FeatureBatchOps}}},
}

// onEachPath runs f once per path, as a subtest.
func onEachPath(t *testing.T, f func(t *testing.T, o dt.Options)) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) { f(t, p.opts) })
	}
}

// closedAt is when the pair became terminal: its forward entry's frozen
// last-seen time, widened to the full clock.
func (r *rig) closedAt(c *conn) dataplane.Jiffies {
	r.t.Helper()
	return dataplane.Widen(r.e.Now(r.t), c.pair().Fwd.LastSeen)
}

func (r *rig) ticks(d time.Duration) dataplane.Jiffies {
	r.t.Helper()
	j, err := r.e.DP.Ticks(d)
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *rig) cycle() *maintenance.Sample {
	r.t.Helper()
	s, err := r.loop.Cycle(context.Background())
	if err != nil {
		r.t.Fatalf("cycle: %v", err)
	}
	if r.latest() != s {
		r.t.Fatalf("OnSample did not get the sample the cycle returned")
	}
	return s
}

func (r *rig) entries() int { r.t.Helper(); return len(r.e.Flows(r.t)) }

func (r *rig) wantEntries(n int) {
	r.t.Helper()
	if got := r.entries(); got != n {
		r.t.Fatalf("flow map has %d entries, want %d", got, n)
	}
}

// conn is one connection through the rig, from client port port to :80.
type conn struct {
	r    *rig
	port uint16
	syn  uint32 // client ISN
}

// open opens an established connection through the real program: the
// client's SYN, the backend's SYN-ACK and the client's ACK.
func (r *rig) open(port uint16) *conn {
	r.t.Helper()
	c := r.openEmbryonic(port)
	c.send(c.fromBackend(dt.SYN|dt.ACK, 5000, 1001))
	c.send(c.fromClient(dt.ACK, 1001, 5001))
	return c
}

// openEmbryonic sends only the client's SYN: the pair stays embryonic.
func (r *rig) openEmbryonic(port uint16) *conn {
	r.t.Helper()
	c := &conn{r: r, port: port, syn: 1000}
	c.send(c.fromClient(dt.SYN, c.syn, 0))
	return c
}

func (c *conn) client() netip.AddrPort { return dt.Client(c.port) }

func (c *conn) pair() dt.Pair { c.r.t.Helper(); return c.r.e.MustPair(c.r.t, c.client(), 80) }

func (c *conn) fromClient(flags uint8, seq, ack uint32) dt.Segment {
	return c.r.e.FromClient(c.client(), 80, flags, seq, ack, nil)
}

func (c *conn) fromBackend(flags uint8, seq, ack uint32) dt.Segment {
	p := c.pair()
	return c.r.e.FromBackend(p.Backend(), p.SNATPort(), flags, seq, ack, nil)
}

func (c *conn) send(s dt.Segment) {
	c.r.t.Helper()
	in := c.r.e.Front
	if s.Src.Addr() != dt.ClientIP {
		in = c.r.e.BackendIface()
	}
	c.r.e.MustRun(c.r.t, s.Frame(), in, dt.XDPTX)
}

func (c *conn) clientFIN()  { c.send(c.fromClient(dt.FIN|dt.ACK, 1001, 5001)) }
func (c *conn) backendFIN() { c.send(c.fromBackend(dt.FIN|dt.ACK, 5001, 1002)) }
func (c *conn) clientRST()  { c.send(c.fromClient(dt.RST|dt.ACK, 1001, 5001)) }
func (c *conn) backendRST() { c.send(c.fromBackend(dt.RST, 5001, 0)) }

func (c *conn) gone() bool {
	_, ok := c.r.e.LookupPair(c.r.t, c.client(), 80)
	return !ok
}

// lastSeen is the later of the pair's two last-seen times, widened.
func (r *rig) lastSeen(p dt.Pair) dataplane.Jiffies {
	now := r.e.Now(r.t)
	return max(dataplane.Widen(now, p.Fwd.LastSeen), dataplane.Widen(now, p.Rev.LastSeen))
}

func wantSample(t *testing.T, s *maintenance.Sample, active, timewait, resetting uint64) {
	t.Helper()
	if s.Active != active || s.TimeWait != timewait || s.Resetting != resetting {
		t.Fatalf("sample active/timewait/resetting %d/%d/%d, want %d/%d/%d", s.Active, s.TimeWait, s.Resetting, active, timewait, resetting)
	}
}

// A FIN/FIN pair is kept at 59 s and removed at 60 s after the second
// FIN, through its close event.
func TestTimeWaitRemovedAfter60Seconds(t *testing.T) {
	onEachPath(t, testTimeWait)
}

func testTimeWait(t *testing.T, o dt.Options) {
	for _, first := range []string{"client", "backend"} {
		t.Run(first+" closes first", func(t *testing.T) {
			r := newRig(t, o, maintenance.Options{})
			other := r.open(33001) // stays open throughout
			c := r.open(33000)
			if first == "client" {
				c.clientFIN()
				c.backendFIN()
			} else {
				c.backendFIN()
				c.send(c.fromClient(dt.FIN|dt.ACK, 1001, 5002))
			}
			closedAt := r.closedAt(c)

			r.clk.Set(closedAt + r.ticks(59*time.Second))
			s := r.cycle()
			wantSample(t, s, 1, 1, 0)
			// Read: the two pairs' OPEN events and the close.
			if s.CloseEvents.Read != 3 || s.CloseEvents.TimeWaitScheduled != 1 {
				t.Fatalf("close events %+v, want three read, one time-wait scheduled", s.CloseEvents)
			}
			r.wantEntries(4)
			r.clk.Set(closedAt + r.ticks(60*time.Second) - 1)
			r.cycle()
			r.wantEntries(4)

			r.clk.Set(closedAt + r.ticks(60*time.Second))
			s = r.cycle()
			if !c.gone() || other.gone() {
				t.Fatalf("after 60 s: closed pair gone %v, open pair gone %v", c.gone(), other.gone())
			}
			if first == "backend" {
				r.wantEntries(3) // and the held reverse entry (TestSNATHoldAfterTimeWait)
			} else {
				r.wantEntries(2)
			}
			wantSample(t, s, 1, 0, 0)
			want := maintenance.Closed{ClientFIN: 1}
			if first == "backend" {
				want = maintenance.Closed{BackendFIN: 1}
			}
			if s.Removed.TimeWait != 1 || s.Closed != want || s.Orphaned != 0 || s.InvariantRepairs != 0 {
				t.Fatalf("removed %+v closed %+v orphaned %d repairs %d", s.Removed, s.Closed, s.Orphaned, s.InvariantRepairs)
			}
			if s.FlowEntries != 2 {
				t.Fatalf("sample has %d entries, want 2 (after the removal; a held entry counts once its event is read)", s.FlowEntries)
			}
		})
	}
}

// A RST pair is removed by the next cycle, through its close event.
func TestResetRemovedOnTheNextCycle(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		for _, side := range []string{"client", "backend"} {
			t.Run(side+" RST", func(t *testing.T) {
				r := newRig(t, o, maintenance.Options{})
				c := r.open(33000)
				s := r.cycle() // a cycle before the RST
				wantSample(t, s, 1, 0, 0)
				if side == "client" {
					c.clientRST()
				} else {
					c.backendRST()
				}
				want := maintenance.Closed{ClientRST: 1}
				if side == "backend" {
					want = maintenance.Closed{BackendRST: 1}
				}
				s = r.cycle()
				r.wantEntries(0)
				wantSample(t, s, 0, 0, 0)
				// Read: the OPEN event (the first cycle) and the RST.
				if s.Removed.Reset != 1 || s.Closed != want || s.Orphaned != 0 || s.CloseEvents.Read != 2 {
					t.Fatalf("removed %+v closed %+v orphaned %d events %+v", s.Removed, s.Closed, s.Orphaned, s.CloseEvents)
				}
			})
		}
	})
}

func TestOrphanRemovedAtTTL(t *testing.T) {
	onEachPath(t, testOrphan)
}

func testOrphan(t *testing.T, o dt.Options) {
	r := newRig(t, o, maintenance.Options{})
	ttl := r.ticks(maintenance.DefaultOrphanTTL)
	c := r.open(33000)
	half := r.open(33001)
	half.clientFIN() // half-closed pairs are not terminal: they can be orphaned
	// Each pair's last packet may fall in a different jiffy.
	first := min(r.lastSeen(c.pair()), r.lastSeen(half.pair()))
	last := max(r.lastSeen(c.pair()), r.lastSeen(half.pair()))

	r.clk.Set(first + ttl - 1)
	s := r.cycle()
	r.wantEntries(4)
	wantSample(t, s, 2, 0, 0)

	r.clk.Set(last + ttl)
	s = r.cycle()
	r.wantEntries(0)
	wantSample(t, s, 0, 0, 0)
	if s.Removed.Orphaned != 2 || s.Orphaned != 2 || s.Closed.Total() != 0 || s.FlowEntries != 0 {
		t.Fatalf("removed %+v orphaned %d closed %+v; want 2 orphans and no closures", s.Removed, s.Orphaned, s.Closed)
	}
	if s = r.cycle(); s.Orphaned != 2 {
		t.Fatalf("orphaned total %d after another cycle", s.Orphaned)
	}
}

// A single ACK in either direction refreshes the pair; a pair whose one
// direction went idle stays, and is removed whole and counted once when the
// other direction goes idle too.
func TestOrphanRefreshedByOneACK(t *testing.T) {
	onEachPath(t, testRefresh)
}

func testRefresh(t *testing.T, o dt.Options) {
	for _, dir := range []string{"client", "backend"} {
		t.Run("ACK from "+dir, func(t *testing.T) {
			r := newRig(t, o, maintenance.Options{})
			ttl := r.ticks(maintenance.DefaultOrphanTTL)
			c := r.open(33000)
			p0 := c.pair()
			stale := r.lastSeen(p0)
			r.e.WaitTick(t, stale)
			if dir == "client" {
				c.send(c.fromClient(dt.ACK, 1001, 5001))
			} else {
				c.send(c.fromBackend(dt.ACK, 5001, 1001))
			}
			p1 := c.pair()
			fresh, other, otherBefore := p1.Fwd.LastSeen, p1.Rev.LastSeen, p0.Rev.LastSeen
			if dir == "backend" {
				fresh, other, otherBefore = other, fresh, p0.Fwd.LastSeen
			}
			if dataplane.Widen(r.e.Now(t), fresh) <= stale || other != otherBefore {
				t.Fatalf("last_seen after the ACK: refreshed %d (before at most %d), other %d (before %d)", fresh, stale, other, otherBefore)
			}

			// The other direction is idle for the TTL; this one is not.
			r.clk.Set(stale + ttl)
			s := r.cycle()
			r.wantEntries(2)
			wantSample(t, s, 1, 0, 0)
			if s.Orphaned != 0 {
				t.Fatalf("orphaned %d with one direction active", s.Orphaned)
			}
			r.clk.Set(dataplane.Widen(r.e.Now(t), fresh) + ttl - 1)
			r.cycle()
			r.wantEntries(2)

			// Now both are: the pair goes whole, counted once.
			r.clk.Set(dataplane.Widen(r.e.Now(t), fresh) + ttl)
			s = r.cycle()
			r.wantEntries(0)
			if s.Removed.Orphaned != 1 || s.Orphaned != 1 || s.InvariantRepairs != 0 {
				t.Fatalf("removed %+v orphaned %d repairs %d; want one orphan", s.Removed, s.Orphaned, s.InvariantRepairs)
			}
			r.clk.Add(ttl)
			if s = r.cycle(); s.Orphaned != 1 || s.InvariantRepairs != 0 {
				t.Fatalf("after another cycle orphaned %d repairs %d", s.Orphaned, s.InvariantRepairs)
			}
		})
	}
}

// rewrite changes entry k in the map with change.
func (r *rig) rewrite(k dataplane.FlowKey, change func(*dataplane.FlowValue)) {
	r.t.Helper()
	v := r.e.DeleteFlow(r.t, k)
	change(&v)
	if err := r.e.DP.PutFlow(k, v); err != nil {
		r.t.Fatal(err)
	}
}

// ageEntry moves an entry's last-seen time ticks into the past, as if it
// had been idle that long.
func (r *rig) ageEntry(k dataplane.FlowKey, ticks dataplane.Jiffies) {
	r.t.Helper()
	r.rewrite(k, func(v *dataplane.FlowValue) { v.LastSeen -= uint32(ticks) })
}

// Lone entries that see packets are reported by the data path and
// repaired by the next cycle's second look: a forward entry without its
// reverse entry, a reverse entry without its forward entry, and two
// entries of different generations on the same pair's keys.
func TestHalfPairsRepairedOnSecondCycle(t *testing.T) {
	onEachPath(t, testHalfPairs)
}

func testHalfPairs(t *testing.T, o dt.Options) {
	r := newRig(t, o, maintenance.Options{})
	noRev := r.open(33000)
	noFwd := r.open(33001)
	foreign := r.open(33002)
	intact := r.open(33003)
	idle := dataplane.Jiffies(2 * dataplane.LoneCheckTicks)

	np := noRev.pair()
	r.e.DeleteFlow(t, np.RevKey)
	r.ageEntry(np.FwdKey, idle)
	noRev.send(noRev.fromClient(dt.ACK, 1001, 5001))

	fp0 := noFwd.pair()
	r.e.DeleteFlow(t, fp0.FwdKey)
	r.ageEntry(fp0.RevKey, idle)
	r.e.MustRun(t, r.e.FromBackend(fp0.Backend(), fp0.SNATPort(), dt.ACK, 5001, 1001, nil).Frame(), r.e.BackendIface(), dt.XDPTX)

	// The reverse entry of "foreign" is swapped for one of another
	// generation: both entries are lone.
	fp := foreign.pair()
	v := r.e.DeleteFlow(t, fp.RevKey)
	v.Generation += 1000
	v.LastSeen -= uint32(idle)
	if err := r.e.DP.PutFlow(fp.RevKey, v); err != nil {
		t.Fatal(err)
	}
	r.ageEntry(fp.FwdKey, idle)
	foreign.send(foreign.fromClient(dt.ACK, 1001, 5001))
	r.e.MustRun(t, r.e.FromBackend(fp.Backend(), fp.SNATPort(), dt.ACK, 5001, 1001, nil).Frame(), r.e.BackendIface(), dt.XDPTX)

	// A packet on an intact pair idle as long reports nothing.
	r.ageEntry(intact.pair().FwdKey, idle)
	intact.send(intact.fromClient(dt.ACK, 1001, 5001))

	s := r.cycle()
	r.wantEntries(6)
	if s.InvariantRepairs != 0 || s.Removed.Repaired != 0 || s.Lone != 4 {
		t.Fatalf("first cycle: repairs %d removed %+v lone %d; want nothing removed, 4 lone", s.InvariantRepairs, s.Removed, s.Lone)
	}

	s = r.cycle()
	r.wantEntries(2)
	if s.InvariantRepairs != 4 || s.Removed.Repaired != 4 || s.Lone != 0 || s.Orphaned != 0 {
		t.Fatalf("second cycle: repairs %d removed %+v lone %d orphaned %d", s.InvariantRepairs, s.Removed, s.Lone, s.Orphaned)
	}
	if intact.gone() {
		t.Fatal("intact pair removed")
	}
	intact.pair()
	var warned []string
	for _, e := range r.logs.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warned = append(warned, e.Data["key"].(string))
		}
	}
	for _, k := range []dataplane.FlowKey{np.FwdKey, fp0.RevKey, fp.FwdKey, fp.RevKey} {
		if !slices.Contains(warned, k.String()) {
			t.Fatalf("no warning names repaired key %v (warnings: %v)", k, warned)
		}
	}

	s = r.cycle()
	if s.InvariantRepairs != 4 || s.Removed.Repaired != 0 {
		t.Fatalf("third cycle: repairs %d removed %+v", s.InvariantRepairs, s.Removed)
	}
}

// Lone entries that see no packets are found by the walk once idle for
// the orphan TTL: a lone forward entry as an orphan (repaired at once),
// a lone reverse entry by a check and the next cycle's second look.
func TestIdleHalfPairsFoundByWalk(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		r := newRig(t, o, maintenance.Options{})
		ttl := r.ticks(maintenance.DefaultOrphanTTL)
		noRev := r.open(33000)
		noFwd := r.open(33001)
		intact := r.open(33002)
		np, fp := noRev.pair(), noFwd.pair()
		// The two pairs may be stamped a tick apart (a loaded machine):
		// neither lone entry is idle for the TTL until the earlier stamp
		// is; both are from the later one on.
		first := min(r.lastSeen(np), r.lastSeen(fp))
		seen := max(r.lastSeen(np), r.lastSeen(fp))
		r.e.DeleteFlow(t, np.RevKey)
		r.e.DeleteFlow(t, fp.FwdKey)

		r.clk.Set(first + ttl - 1)
		if s := r.cycle(); s.Lone != 0 || s.Removed != (maintenance.Removed{}) {
			t.Fatalf("before the TTL: lone %d removed %+v", s.Lone, s.Removed)
		}
		r.wantEntries(4)
		// keep the intact pair busy
		r.e.WaitTick(t, seen)
		intact.send(intact.fromClient(dt.ACK, 1001, 5001))
		r.clk.Set(seen + ttl)
		s := r.cycle()
		if s.Removed.Repaired != 1 || s.Lone != 1 {
			t.Fatalf("at the TTL: removed %+v lone %d; want the lone forward entry repaired, the reverse one found", s.Removed, s.Lone)
		}
		s = r.cycle()
		if s.Removed.Repaired != 1 || s.InvariantRepairs != 2 || s.Lone != 0 {
			t.Fatalf("next cycle: removed %+v repairs %d lone %d", s.Removed, s.InvariantRepairs, s.Lone)
		}
		r.wantEntries(2)
		if intact.gone() {
			t.Fatal("intact pair removed")
		}
		wantSample(t, s, 1, 0, 0)
	})
}

// A lone entry replaced by an entry of another generation between two
// looks is not repaired: lone means lone twice with the same generation.
func TestLoneEntryNeedsSameGenerationTwice(t *testing.T) {
	r := newRig(t, dt.Options{}, maintenance.Options{})
	ttl := r.ticks(maintenance.DefaultOrphanTTL)
	c := r.open(33000)
	p := c.pair()
	r.e.DeleteFlow(t, p.FwdKey)
	r.clk.Set(r.lastSeen(p) + ttl)
	if s := r.cycle(); s.Lone != 1 {
		t.Fatalf("lone %d, want 1", s.Lone)
	}
	v := r.e.DeleteFlow(t, p.RevKey)
	v.Generation += 7
	if err := r.e.DP.PutFlow(p.RevKey, v); err != nil {
		t.Fatal(err)
	}
	s := r.cycle()
	if s.Removed.Repaired != 0 || s.Lone != 1 {
		t.Fatalf("removed %+v lone %d; want the new generation's first sighting", s.Removed, s.Lone)
	}
	if s = r.cycle(); s.Removed.Repaired != 1 {
		t.Fatalf("removed %+v, want the entry repaired on its second sighting", s.Removed)
	}
	r.wantEntries(0)
}

// A fresh pair that takes the tuple of a pair the loop decided to remove,
// between the loop's decision and the reaper, survives intact.
func TestFreshPairBetweenReadAndDeleteSurvives(t *testing.T) {
	type variant struct {
		name string
		opts dt.Options
		rst  bool
	}
	for _, v := range []variant{
		{"time-wait", dt.Options{}, false},
		{"RST", dt.Options{}, true},
		// One backend, one SNAT port: the fresh pair gets the very same
		// reverse key as the pair it replaces.
		{"time-wait, same reverse key", dt.Options{SNATPortLo: 40000, SNATPortHi: 40000, Backends: dt.OneArmBackends[:1]}, false},
		{"RST, same reverse key", dt.Options{SNATPortLo: 40000, SNATPortHi: 40000, Backends: dt.OneArmBackends[:1]}, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v.opts, maintenance.Options{})
			c := r.open(33000)
			if v.rst {
				c.clientRST()
			} else {
				c.clientFIN()
				c.backendFIN()
				r.clk.Set(r.closedAt(c) + r.ticks(maintenance.TimeWait))
			}
			old := c.pair()
			before := r.e.Counters(t)
			fired := false
			maintenance.SetAfterDecide(r.loop, func() {
				if !fired {
					fired = true
					c.send(c.fromClient(dt.SYN, 777000, 0))
				}
			})
			s := r.cycle()
			fresh := c.pair() // fails if either entry is missing
			if fresh.Fwd.Generation == old.Fwd.Generation || fresh.Rev.Generation != fresh.Fwd.Generation {
				t.Fatalf("generations old %d, now %d/%d", old.Fwd.Generation, fresh.Fwd.Generation, fresh.Rev.Generation)
			}
			if v.opts.SNATPortHi == 40000 && fresh.RevKey != old.RevKey {
				t.Fatalf("fresh reverse key %v, expected the old one %v", fresh.RevKey, old.RevKey)
			}
			if fresh.Fwd.Flags != 0 {
				t.Fatalf("fresh pair flags %#x", fresh.Fwd.Flags)
			}
			// Established, it outlives the embryonic TTL the clock may
			// already be past.
			c.send(c.fromBackend(dt.SYN|dt.ACK, 5000, 777001))
			c.send(c.fromClient(dt.ACK, 777001, 5001))
			after := r.e.Counters(t)
			if after.PairsReplaced-before.PairsReplaced != 1 {
				t.Fatalf("the hook's SYN did not replace the pair")
			}
			if s.Removed != (maintenance.Removed{}) {
				t.Fatalf("removed %+v; want nothing removed", s.Removed)
			}
			r.wantEntries(2)
			for range 3 {
				if s = r.cycle(); s.Removed != (maintenance.Removed{}) || s.InvariantRepairs != 0 || s.Lone != 0 {
					t.Fatalf("later cycle removed %+v repairs %d lone %d", s.Removed, s.InvariantRepairs, s.Lone)
				}
			}
			if p := c.pair(); p.Fwd.Generation != fresh.Fwd.Generation || s.Active != 1 {
				t.Fatalf("fresh pair generation %d (want %d), active %d", p.Fwd.Generation, fresh.Fwd.Generation, s.Active)
			}
		})
	}
}

func TestSample(t *testing.T) {
	var got []*maintenance.Sample
	r := newRig(t, dt.Options{MaxConnections: 64}, maintenance.Options{
		Members: func() []maintenance.Member {
			return []maintenance.Member{{ID: 0}, {ID: 1, Backend: 1}, {ID: 2, Backend: 2}, {ID: 7, Backend: 7}}
		},
		OnSample: func(s *maintenance.Sample) { got = append(got, s) },
	})
	if r.published() != 0 {
		t.Fatal("a sample was published before the first cycle")
	}
	cs := []*conn{r.open(33000), r.open(33001), r.open(33002), r.open(33003)} // backends 0, 1, 2, 0
	cs[1].clientFIN()
	cs[1].backendFIN()
	cs[2].backendRST()
	s := r.cycle()
	if len(got) != 1 || got[0] != s || s.Cycle != 1 {
		t.Fatalf("OnSample got %d samples, cycle %d", len(got), s.Cycle)
	}
	if s.FlowEntries != 6 || s.FlowCapacity != 128 {
		t.Fatalf("entries %d capacity %d, want 6 (the RST pair removed) and 128", s.FlowEntries, s.FlowCapacity)
	}
	wantSample(t, s, 2, 1, 0)
	if s.Opened != 4 || s.Closed != (maintenance.Closed{ClientFIN: 1, BackendRST: 1}) || s.Counters.PairsCreated != 4 {
		t.Fatalf("opened %d closed %+v", s.Opened, s.Closed)
	}
	ids := make([]uint32, len(s.Backends))
	for i, b := range s.Backends {
		ids[i] = b.ID
	}
	if !slices.Equal(ids, []uint32{0, 1, 2, 7}) {
		t.Fatalf("backend ids %v", ids)
	}
	type counts struct{ active, tw, opened uint64 }
	want := map[uint32]counts{0: {2, 0, 2}, 1: {0, 1, 1}, 2: {0, 0, 1}, 7: {0, 0, 0}}
	for id, w := range want {
		b, ok := s.Backend(id)
		if !ok || (counts{b.Active, b.TimeWait, b.Stats.Opened}) != w {
			t.Fatalf("backend %d: %+v, want %+v", id, b, w)
		}
		// every pair went through its handshake (rig.open): one each
		if b.Handshake.Count != w.opened {
			t.Fatalf("backend %d: handshakes %+v, want %d", id, b.Handshake, w.opened)
		}
	}
	if b, _ := s.Backend(0); b.Stats.SentPackets != 4 || b.Stats.SentBytes == 0 {
		t.Fatalf("backend 0 stats %+v: want the two SYNs and the two handshake ACKs", b.Stats)
	}
	if _, ok := s.Backend(3); ok {
		t.Fatal("backend 3 listed")
	}
	if s.Time.IsZero() || s.Duration <= 0 || s.Now == 0 {
		t.Fatalf("time %v duration %v now %d", s.Time, s.Duration, s.Now)
	}
	s2 := r.cycle()
	if s2.Cycle != 2 || s.TimeWait != 1 || s.Cycle != 1 {
		t.Fatal("a published sample changed")
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	r := newRig(t, dt.Options{}, maintenance.Options{Interval: 5 * time.Millisecond})
	r.open(33000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.loop.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s := r.latest(); s != nil && s.Cycle >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run published fewer than 3 samples in 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	r.wantEntries(2)
}

func TestCycleHonoursCancelledContext(t *testing.T) {
	r := newRig(t, dt.Options{}, maintenance.Options{})
	r.open(33000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.loop.Cycle(ctx); err == nil {
		t.Fatal("cycle with a cancelled context succeeded")
	}
	if r.published() != 0 {
		t.Fatal("a failed cycle published a sample")
	}
}
