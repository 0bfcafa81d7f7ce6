package dataplane_test

import (
	"fmt"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// The reaper (bpf/xlb.c xlb_reap, run through Dataplane.Reap) is the only
// way the maintenance loop removes flow entries. Each request is re-checked
// against the live entry: its generation, its close state and both
// entries' last-seen times, judged by a clock the caller passes, so these
// tests move time by choosing ReapClock.Now rather than by waiting.

const (
	timeWait  = dataplane.Jiffies(500)
	orphanTTL = dataplane.Jiffies(1000)
)

func fwdReq(p dt.Pair, op dataplane.ReapOp) dataplane.ReapRequest {
	return dataplane.ReapRequest{Key: p.FwdKey, Generation: p.Fwd.Generation, Op: op}
}

func revReq(p dt.Pair, op dataplane.ReapOp) dataplane.ReapRequest {
	return dataplane.ReapRequest{Key: p.RevKey, Generation: p.Rev.Generation, Op: op}
}

func staleReq(p dt.Pair, op dataplane.ReapOp) dataplane.ReapRequest {
	r := fwdReq(p, op)
	r.Generation += 1000
	return r
}

// clockAt is a reaper clock reading now.
func clockAt(now dataplane.Jiffies) dataplane.ReapClock {
	return dataplane.ReapClock{Now: now, TimeWait: timeWait, OrphanTTL: orphanTTL, SNATHold: snatHold}
}

func resultName(r dataplane.ReapResult) string {
	switch r {
	case dataplane.Reaped:
		return "reaped"
	case dataplane.ReapKept:
		return "kept"
	case dataplane.ReapGone:
		return "gone"
	case dataplane.ReapIntact:
		return "intact"
	case dataplane.ReapLoneFound:
		return "lone_found"
	case dataplane.ReapRepaired:
		return "repaired"
	}
	return fmt.Sprintf("result(%d)", r)
}

// reapWant runs one request and checks its result.
func reapWant(t *testing.T, e *dt.Env, c dataplane.ReapClock, r dataplane.ReapRequest, want dataplane.ReapResult) {
	t.Helper()
	reqs := []dataplane.ReapRequest{r}
	if err := e.DP.Reap(reqs, c); err != nil {
		t.Fatal(err)
	}
	if reqs[0].Result != want {
		t.Fatalf("op %d on %v gen %d at %d: %s, want %s", r.Op, r.Key, r.Generation, c.Now, resultName(reqs[0].Result), resultName(want))
	}
}

// present reports whether the map holds k with generation gen.
func present(t *testing.T, e *dt.Env, k dataplane.FlowKey, gen uint32) bool {
	t.Helper()
	v, err := e.DP.LookupFlow(k)
	if err == dataplane.ErrNotFound {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v.Generation == gen
}

// wantPair checks that both entries of p are (or are not) in the map.
func wantPair(t *testing.T, e *dt.Env, p dt.Pair, there bool) {
	t.Helper()
	f, r := present(t, e, p.FwdKey, p.Fwd.Generation), present(t, e, p.RevKey, p.Rev.Generation)
	if f != there || r != there {
		t.Fatalf("pair %v: forward present %v, reverse present %v; want %v", p.FwdKey, f, r, there)
	}
}

// wantReaped checks every backend's reaper counts against want (absent: zero).
func wantReaped(t *testing.T, e *dt.Env, want map[int]dataplane.ReapedCounts) {
	t.Helper()
	got, err := e.DP.AllReapedCounts()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != int(dataplane.MaxBackends) {
		t.Fatalf("%d reaped counts, want %d", len(got), dataplane.MaxBackends)
	}
	for id, g := range got {
		if g != want[id] {
			t.Fatalf("backend %d reaped %+v, want %+v", id, g, want[id])
		}
	}
}

// lastTouch is the later last_seen of p's two entries, widened against now.
func lastTouch(now dataplane.Jiffies, p dt.Pair) dataplane.Jiffies {
	return max(dataplane.Widen(now, p.Fwd.LastSeen), dataplane.Widen(now, p.Rev.LastSeen))
}

// ReapReset removes a pair reset by a RST, both entries, and nothing else:
// live and time-wait pairs, reverse keys and stale generations are left.
func TestReapReset(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	rst, live, fin, lone := open(t, e, 33000), open(t, e, 33001), open(t, e, 33002), open(t, e, 33003)
	rst.reset(t)
	fin.finish(t)
	lone.backend(t, dt.RST)
	e.DeleteFlow(t, lone.p.RevKey)
	c := clockAt(e.Now(t))
	rp := rst.now(t)

	reapWant(t, e, c, staleReq(rp, dataplane.ReapReset), dataplane.ReapGone)
	reapWant(t, e, c, revReq(rp, dataplane.ReapReset), dataplane.ReapKept) // pairs go through their forward entry
	reapWant(t, e, c, fwdReq(live.p, dataplane.ReapReset), dataplane.ReapKept)
	reapWant(t, e, c, fwdReq(fin.p, dataplane.ReapReset), dataplane.ReapKept)
	reapWant(t, e, c, fwdReq(fin.p, dataplane.ReapReset), dataplane.ReapKept) // not even much later
	wantReaped(t, e, nil)
	wantPair(t, e, rp, true)

	reapWant(t, e, c, fwdReq(rp, dataplane.ReapReset), dataplane.Reaped)
	wantPair(t, e, rp, false)
	wantPair(t, e, live.p, true)
	wantPair(t, e, fin.p, true)
	reapWant(t, e, c, fwdReq(rp, dataplane.ReapReset), dataplane.ReapGone)
	wantReaped(t, e, map[int]dataplane.ReapedCounts{rst.id(): {Reset: 1}})

	// A reset pair already missing its reverse entry: removed as a repair,
	// counted as a lone entry of a reset pair.
	reapWant(t, e, c, fwdReq(lone.p, dataplane.ReapReset), dataplane.ReapRepaired)
	if present(t, e, lone.p.FwdKey, lone.p.Fwd.Generation) {
		t.Fatal("repaired forward entry still present")
	}
	if lone.id() != rst.id() {
		t.Fatalf("backends %d and %d, want the same (round robin over 3)", lone.id(), rst.id())
	}
	wantReaped(t, e, map[int]dataplane.ReapedCounts{rst.id(): {Reset: 1, LoneReset: 1}})
	if n := len(e.Flows(t)); n != 4 {
		t.Fatalf("%d entries left, want 4 (the live and time-wait pairs)", n)
	}
}

// ReapTimeWait removes a pair closed by both FINs once TimeWait has passed
// since the second FIN (the forward entry's frozen last_seen), to the tick.
func TestReapTimeWait(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	fin, rst, live, half := open(t, e, 33000), open(t, e, 33001), open(t, e, 33002), open(t, e, 33003)
	fin.finish(t)
	rst.reset(t)
	half.client(t, dt.FIN|dt.ACK)
	fp := fin.now(t)
	closedAt := dataplane.Widen(e.Now(t), fp.Fwd.LastSeen)
	// Late packets of the time-wait pair, a tick later, do not restart it.
	e.WaitTick(t, e.Now(t))
	fin.client(t, dt.ACK)
	fin.backend(t, dt.FIN|dt.ACK)
	if p := fin.now(t); p.Fwd.LastSeen != fp.Fwd.LastSeen || dataplane.Widen(e.Now(t), p.Rev.LastSeen) <= closedAt {
		t.Fatalf("after late packets: forward last_seen %d (closed at %d), reverse %d", p.Fwd.LastSeen, fp.Fwd.LastSeen, p.Rev.LastSeen)
	}

	far := clockAt(closedAt + 100*timeWait)
	reapWant(t, e, far, fwdReq(rst.p, dataplane.ReapTimeWait), dataplane.ReapKept)
	reapWant(t, e, far, fwdReq(live.p, dataplane.ReapTimeWait), dataplane.ReapKept)
	reapWant(t, e, far, fwdReq(half.p, dataplane.ReapTimeWait), dataplane.ReapKept)
	reapWant(t, e, far, revReq(fp, dataplane.ReapTimeWait), dataplane.ReapKept)
	reapWant(t, e, far, staleReq(fp, dataplane.ReapTimeWait), dataplane.ReapGone)

	reapWant(t, e, clockAt(closedAt), fwdReq(fp, dataplane.ReapTimeWait), dataplane.ReapKept)
	reapWant(t, e, clockAt(closedAt+timeWait-1), fwdReq(fp, dataplane.ReapTimeWait), dataplane.ReapKept)
	wantPair(t, e, fp, true)
	wantReaped(t, e, nil)
	reapWant(t, e, clockAt(closedAt+timeWait), fwdReq(fp, dataplane.ReapTimeWait), dataplane.Reaped)
	wantPair(t, e, fp, false)
	wantReaped(t, e, map[int]dataplane.ReapedCounts{fin.id(): {TimeWait: 1}})
	for _, k := range []*conn{rst, live, half} {
		wantPair(t, e, k.p, true)
	}

	// A clock behind the close (the loop read it before the FIN arrived)
	// never reaps.
	fin2 := open(t, e, 33004)
	fin2.finish(t)
	p2 := fin2.now(t)
	closed2 := dataplane.Widen(e.Now(t), p2.Fwd.LastSeen)
	reapWant(t, e, clockAt(closed2-1), fwdReq(p2, dataplane.ReapTimeWait), dataplane.ReapKept)
	reapWant(t, e, clockAt(closed2-timeWait), fwdReq(p2, dataplane.ReapTimeWait), dataplane.ReapKept)
	wantPair(t, e, p2, true)
	reapWant(t, e, clockAt(closed2+timeWait), fwdReq(p2, dataplane.ReapTimeWait), dataplane.Reaped)
	want := map[int]dataplane.ReapedCounts{fin.id(): {TimeWait: 1}}
	r := want[fin2.id()]
	r.TimeWait++
	want[fin2.id()] = r
	wantReaped(t, e, want)
}

// ReapOrphan removes a live pair once neither entry saw a packet for
// OrphanTTL, to the tick; a packet either way keeps it, and terminal pairs
// are never orphans.
func TestReapOrphan(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	idle, half, cliKeep, backKeep, rst, fin, lone := open(t, e, 33000), open(t, e, 33001), open(t, e, 33002),
		open(t, e, 33003), open(t, e, 33004), open(t, e, 33005), open(t, e, 33006)
	half.backend(t, dt.FIN|dt.ACK)
	rst.backend(t, dt.RST)
	fin.finish(t)
	e.DeleteFlow(t, lone.p.RevKey)
	for _, k := range []*conn{idle, half, cliKeep, backKeep, rst, fin} {
		k.p = k.now(t)
	}

	// Exactly at the TTL after the idle pair's last packet, not a tick before.
	t0 := lastTouch(e.Now(t), idle.p)
	reapWant(t, e, clockAt(t0+orphanTTL-1), fwdReq(idle.p, dataplane.ReapOrphan), dataplane.ReapKept)
	wantPair(t, e, idle.p, true)
	reapWant(t, e, clockAt(t0+orphanTTL), revReq(idle.p, dataplane.ReapOrphan), dataplane.ReapKept)
	reapWant(t, e, clockAt(t0+orphanTTL), staleReq(idle.p, dataplane.ReapOrphan), dataplane.ReapGone)
	reapWant(t, e, clockAt(t0+orphanTTL), fwdReq(idle.p, dataplane.ReapOrphan), dataplane.Reaped)
	wantPair(t, e, idle.p, false)
	wantReaped(t, e, map[int]dataplane.ReapedCounts{idle.id(): {Orphaned: 1}})

	// Now is chosen first, then one packet goes through each kept pair,
	// one client to backend, one the other way: either entry's last_seen
	// keeps the pair.
	now := e.Now(t)
	for _, k := range []*conn{half, cliKeep, backKeep, rst, fin} {
		now = max(now, lastTouch(now, k.p))
	}
	c := clockAt(now + orphanTTL)
	e.WaitTick(t, now)
	cliKeep.client(t, dt.ACK)
	backKeep.backend(t, dt.ACK)
	if p := backKeep.now(t); p.Fwd.LastSeen != backKeep.p.Fwd.LastSeen {
		t.Fatalf("a backend packet moved the forward entry's last_seen")
	}
	reapWant(t, e, c, fwdReq(cliKeep.p, dataplane.ReapOrphan), dataplane.ReapKept)
	reapWant(t, e, c, fwdReq(backKeep.p, dataplane.ReapOrphan), dataplane.ReapKept)
	// terminal pairs are the time-wait and reset rules' business
	far := clockAt(now + 100*orphanTTL)
	reapWant(t, e, far, fwdReq(rst.p, dataplane.ReapOrphan), dataplane.ReapKept)
	reapWant(t, e, far, fwdReq(fin.p, dataplane.ReapOrphan), dataplane.ReapKept)
	// a half-closed pair is live: it goes when idle
	reapWant(t, e, c, fwdReq(half.p, dataplane.ReapOrphan), dataplane.Reaped)
	for _, k := range []*conn{cliKeep, backKeep, rst, fin} {
		wantPair(t, e, k.p, true)
	}
	wantPair(t, e, half.p, false)

	// The kept pairs go once idle for the TTL after their last packet.
	later := clockAt(max(lastTouch(e.Now(t), cliKeep.now(t)), lastTouch(e.Now(t), backKeep.now(t))) + orphanTTL)
	reapWant(t, e, later, fwdReq(cliKeep.p, dataplane.ReapOrphan), dataplane.Reaped)
	reapWant(t, e, later, fwdReq(backKeep.p, dataplane.ReapOrphan), dataplane.Reaped)

	// A lone idle forward entry: removed as a repair, counted as lone.
	reapWant(t, e, far, fwdReq(lone.p, dataplane.ReapOrphan), dataplane.ReapRepaired)
	if present(t, e, lone.p.FwdKey, lone.p.Fwd.Generation) {
		t.Fatal("repaired forward entry still present")
	}

	want := map[int]dataplane.ReapedCounts{}
	add := func(k *conn, f func(*dataplane.ReapedCounts)) {
		r := want[k.id()]
		f(&r)
		want[k.id()] = r
	}
	for _, k := range []*conn{idle, half, cliKeep, backKeep} {
		add(k, func(r *dataplane.ReapedCounts) { r.Orphaned++ })
	}
	add(lone, func(r *dataplane.ReapedCounts) { r.LoneActive++ })
	wantReaped(t, e, want)
	if n := len(e.Flows(t)); n != 4 {
		t.Fatalf("%d entries left, want 4 (the terminal pairs)", n)
	}
}

// ReapCheck only reports; ReapLone removes an entry whose counterpart is
// missing or another pair's, in either direction, and counts it by what its
// pair was. Counts read in batches and key by key.
func TestReapCheckAndLone(t *testing.T) {
	for _, disable := range [][]dataplane.Feature{nil, {dataplane.FeatureBatchOps}} {
		t.Run(fmt.Sprintf("disable=%v", disable), func(t *testing.T) {
			testReapCheckAndLone(t, dt.NewEnv(t, dt.Options{Disable: disable}))
		})
	}
}

func testReapCheckAndLone(t *testing.T, e *dt.Env) {
	c := clockAt(e.Now(t))
	intact, loneFwd, loneRev, loneRst, loneFin, foreign := open(t, e, 33000), open(t, e, 33001), open(t, e, 33002),
		open(t, e, 33003), open(t, e, 33004), open(t, e, 33005)
	loneRst.reset(t)
	loneFin.finish(t)
	e.DeleteFlow(t, loneFwd.p.RevKey)
	e.DeleteFlow(t, loneRev.p.FwdKey)
	e.DeleteFlow(t, loneRst.p.RevKey)
	e.DeleteFlow(t, loneFin.p.RevKey)
	// another pair's entry at the reverse key
	fv := e.DeleteFlow(t, foreign.p.RevKey)
	fv.Generation += 1000
	if err := e.DP.PutFlow(foreign.p.RevKey, fv); err != nil {
		t.Fatal(err)
	}
	foreignRev := dataplane.ReapRequest{Key: foreign.p.RevKey, Generation: fv.Generation}

	check := func(r dataplane.ReapRequest, want dataplane.ReapResult) {
		t.Helper()
		r.Op = dataplane.ReapCheck
		reapWant(t, e, c, r, want)
	}
	check(fwdReq(intact.p, 0), dataplane.ReapIntact)
	check(revReq(intact.p, 0), dataplane.ReapIntact)
	check(fwdReq(loneFwd.p, 0), dataplane.ReapLoneFound)
	check(revReq(loneRev.p, 0), dataplane.ReapLoneFound)
	check(fwdReq(loneRst.p, 0), dataplane.ReapLoneFound)
	check(fwdReq(loneFin.p, 0), dataplane.ReapLoneFound)
	check(fwdReq(foreign.p, 0), dataplane.ReapLoneFound)
	check(foreignRev, dataplane.ReapLoneFound)
	check(staleReq(intact.p, 0), dataplane.ReapGone)
	check(revReq(loneFwd.p, 0), dataplane.ReapGone)
	if n := len(e.Flows(t)); n != 8 {
		t.Fatalf("%d entries after checks, want 8: a check removes nothing", n)
	}
	wantReaped(t, e, nil)

	lone := func(r dataplane.ReapRequest, want dataplane.ReapResult) {
		t.Helper()
		r.Op = dataplane.ReapLone
		reapWant(t, e, c, r, want)
	}
	lone(fwdReq(intact.p, 0), dataplane.ReapIntact)
	lone(revReq(intact.p, 0), dataplane.ReapIntact)
	wantPair(t, e, intact.p, true)
	lone(staleReq(loneFwd.p, 0), dataplane.ReapGone)
	lone(fwdReq(loneFwd.p, 0), dataplane.Reaped)
	lone(fwdReq(loneFwd.p, 0), dataplane.ReapGone)
	lone(revReq(loneRev.p, 0), dataplane.Reaped)
	lone(fwdReq(loneRst.p, 0), dataplane.Reaped)
	lone(fwdReq(loneFin.p, 0), dataplane.Reaped)
	lone(fwdReq(foreign.p, 0), dataplane.Reaped)
	lone(foreignRev, dataplane.Reaped)
	flows := e.Flows(t)
	if len(flows) != 2 || !present(t, e, intact.p.FwdKey, intact.p.Fwd.Generation) {
		t.Fatalf("entries left %v, want only the intact pair", flows)
	}

	want := map[int]dataplane.ReapedCounts{}
	add := func(id int, f func(*dataplane.ReapedCounts)) {
		r := want[id]
		f(&r)
		want[id] = r
	}
	add(loneFwd.id(), func(r *dataplane.ReapedCounts) { r.LoneActive++ })
	add(loneRev.id(), func(r *dataplane.ReapedCounts) { r.LoneReverse++ })
	add(loneRst.id(), func(r *dataplane.ReapedCounts) { r.LoneReset++ })
	add(loneFin.id(), func(r *dataplane.ReapedCounts) { r.LoneTimeWait++ })
	add(foreign.id(), func(r *dataplane.ReapedCounts) { r.LoneActive++ })
	add(int(fv.BackendId), func(r *dataplane.ReapedCounts) { r.LoneReverse++ })
	wantReaped(t, e, want)
	var total uint64
	for _, r := range want {
		total += r.Lone()
	}
	if total != 6 {
		t.Fatalf("lone total %d, want 6", total)
	}
}

// A request list longer than one run of the reaper is processed whole,
// each result in its request's place.
func TestReapMoreThanOneBatch(t *testing.T) {
	const pairs = 1250 // two requests each: 2500 > ReapBatch
	if 2*pairs <= dataplane.ReapBatch {
		t.Fatalf("ReapBatch %d: make the test bigger", dataplane.ReapBatch)
	}
	e := dt.NewEnv(t, dt.Options{MaxConnections: 4096, SNATPortLo: 40000, SNATPortHi: 49999})
	port := func(i int) uint16 { return uint16(20000 + i) }
	live := func(i int) bool { return i%10 == 7 }
	err := e.Do(func() error {
		for i := range pairs {
			c := dt.Client(port(i))
			if act, _, err := e.RunHere(synFrom(e, c, 80).Frame(), e.Front); err != nil || act != dt.XDPTX {
				return fmt.Errorf("SYN %d: %s %v", i, dt.ActionName(act), err)
			}
			if live(i) {
				continue
			}
			if act, _, err := e.RunHere(e.FromClient(c, 80, dt.RST|dt.ACK, 1001, 1, nil).Frame(), e.Front); err != nil || act != dt.XDPTX {
				return fmt.Errorf("RST %d: %s %v", i, dt.ActionName(act), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]dataplane.ReapRequest, 0, 2*pairs)
	want := make([]dataplane.ReapResult, 0, 2*pairs)
	resets := map[int]dataplane.ReapedCounts{}
	for i := range pairs {
		p := e.MustPair(t, dt.Client(port(i)), 80)
		reqs = append(reqs, revReq(p, dataplane.ReapCheck), fwdReq(p, dataplane.ReapReset))
		if live(i) {
			want = append(want, dataplane.ReapIntact, dataplane.ReapKept)
			continue
		}
		want = append(want, dataplane.ReapIntact, dataplane.Reaped)
		r := resets[int(p.Fwd.BackendId)]
		r.Reset++
		resets[int(p.Fwd.BackendId)] = r
	}
	if err := e.DP.Reap(reqs, clockAt(e.Now(t))); err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if r.Result != want[i] {
			t.Fatalf("request %d of %d (op %d on %v): %s, want %s", i, len(reqs), r.Op, r.Key, resultName(r.Result), resultName(want[i]))
		}
	}
	wantReaped(t, e, resets)
	flows := e.Flows(t)
	if len(flows) != 2*pairs/10 {
		t.Fatalf("%d entries left, want %d (the live pairs)", len(flows), 2*pairs/10)
	}
	for k, v := range flows {
		if k.Direction() == dataplane.DirClient && (dataplane.Terminal(v.Flags) || !live(int(k.Src().Port())-20000)) {
			t.Fatalf("entry %v flags %#x left", k, v.Flags)
		}
	}
	// The same list again: everything reset is gone.
	if err := e.DP.Reap(reqs, clockAt(e.Now(t))); err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		w := want[i]
		if w != dataplane.ReapKept && !live(i/2) {
			w = dataplane.ReapGone
		}
		if r.Result != w {
			t.Fatalf("second run, request %d: %s, want %s", i, resultName(r.Result), resultName(w))
		}
	}
}

// The gauges the maintenance loop derives from the counters alone
// (bpf/layout.h enum xlb_reaped_reason) match a recount of the map after a
// mix of closes, replacements and reaps.
func TestReapGaugesMatchRecount(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	var conns []*conn
	for i := range 18 {
		k := open(t, e, uint16(33000+i))
		conns = append(conns, k)
		switch i % 6 {
		case 1, 2:
			k.finish(t)
		case 3, 4:
			k.reset(t)
		case 5:
			k.client(t, dt.FIN|dt.ACK)
		}
	}
	// replace a few terminal pairs
	for _, i := range []int{1, 3, 8} {
		e.MustRun(t, synFrom(e, conns[i].c, 80).Frame(), e.Front, dt.XDPTX)
	}
	// lose the reverse entries of a live, a time-wait and a reset pair:
	// their forward entries account for them when the reaper removes them
	for _, i := range []int{6, 7, 9} {
		e.DeleteFlow(t, conns[i].now(t).RevKey)
	}
	// two connection attempts the backends never answered: the first goes
	// as embryonic, the second stays (an active pair until it does)
	var attempts []dt.Pair
	for _, port := range []uint16{33018, 33019} {
		e.MustRun(t, synFrom(e, dt.Client(port), 80).Frame(), e.Front, dt.XDPTX)
		attempts = append(attempts, e.MustPair(t, dt.Client(port), 80))
	}
	now := e.Now(t)
	reqs := []dataplane.ReapRequest{fwdReq(attempts[0], dataplane.ReapEmbryonic)}
	for i, k := range conns {
		p, ok := e.LookupPair(t, k.c, 80)
		if !ok {
			t.Fatalf("pair %d missing", i)
		}
		switch {
		case i == 6 || i == 7:
			reqs = append(reqs, fwdReq(p, dataplane.ReapLone))
		case i == 9:
			reqs = append(reqs, fwdReq(p, dataplane.ReapReset))
		case i < 6: // everything that may go, goes (none of them is embryonic)
			reqs = append(reqs, fwdReq(p, dataplane.ReapEmbryonic), fwdReq(p, dataplane.ReapReset), fwdReq(p, dataplane.ReapTimeWait),
				fwdReq(p, dataplane.ReapOrphan))
		case i%6 == 2:
			reqs = append(reqs, fwdReq(p, dataplane.ReapTimeWait))
		case i%6 == 4:
			reqs = append(reqs, fwdReq(p, dataplane.ReapReset))
		}
	}
	c := reapClock(now + 10*orphanTTL)
	if err := e.DP.Reap(reqs, c); err != nil {
		t.Fatal(err)
	}
	results := map[dataplane.ReapResult]int{}
	for _, r := range reqs {
		results[r.Result]++
	}
	// reaped: orphans 0, 1, 3, 5; time-wait 2, 14; resets 4, 10, 16;
	// lone 6, 7; embryonic 18; repaired 9
	if results[dataplane.Reaped] != 12 || results[dataplane.ReapRepaired] != 1 {
		t.Fatalf("results %v, want 12 reaped and 1 repaired", results)
	}

	stats, _, reaped := backendCells(t, e)
	type gauges struct{ active, timeWait, resetting int64 }
	fromCounters := map[int]gauges{}
	for id := range int(dataplane.MaxBackends) {
		s, r := stats[id], reaped[id]
		g := gauges{
			active:    int64(s.Opened - s.ClosedFIN - s.ClosedRST - r.Orphaned - r.LoneActive - r.LoneReverse - r.Embryonic),
			timeWait:  int64(s.ClosedFIN - r.TimeWait - s.ReplacedFIN - r.LoneTimeWait),
			resetting: int64(s.ClosedRST - r.Reset - s.ReplacedRST - r.LoneReset),
		}
		if g != (gauges{}) {
			fromCounters[id] = g
		}
	}
	recount := map[int]gauges{}
	for k, v := range e.Flows(t) {
		if k.Direction() != dataplane.DirClient {
			continue
		}
		g := recount[int(v.BackendId)]
		switch {
		case v.Flags&dataplane.FlagClosedFIN != 0:
			g.timeWait++
		case v.Flags&dataplane.FlagClosedRST != 0:
			g.resetting++
		default:
			g.active++
		}
		recount[int(v.BackendId)] = g
	}
	if fmt.Sprint(fromCounters) != fmt.Sprint(recount) {
		t.Fatalf("gauges from counters %v, recount of the map %v", fromCounters, recount)
	}
	if len(recount) == 0 {
		t.Fatal("nothing left to count")
	}
	t.Logf("gauges by backend (active, time-wait, resetting): %v", recount)
}

// walkPass reads one pass of w and returns how often each key came back
// and how many reads it took. check sees every entry returned.
func walkPass(t *testing.T, w *dataplane.FlowWalk, chunk, bound int, check func(dataplane.FlowKey, dataplane.FlowValue)) (map[dataplane.FlowKey]int, int) {
	t.Helper()
	seen := map[dataplane.FlowKey]int{}
	for calls := 1; ; calls++ {
		n, end, err := w.Next()
		if err != nil {
			t.Fatalf("read %d: %v", calls, err)
		}
		if n < 0 || n > chunk {
			t.Fatalf("read %d returned %d entries, chunk %d", calls, n, chunk)
		}
		for i := range n {
			seen[w.Keys[i]]++
			if check != nil {
				check(w.Keys[i], w.Values[i])
			}
		}
		if end {
			return seen, calls
		}
		if calls > bound {
			t.Fatalf("no end of the pass after %d reads (%d keys seen)", calls, len(seen))
		}
	}
}

// FlowWalk reads the whole map a few entries at a time, resuming where
// each read stopped, on the batch path and key by key: every entry once per
// pass, then the end, then a new pass.
func TestFlowWalk(t *testing.T) {
	const pairs, chunk = 300, 7
	for _, disable := range [][]dataplane.Feature{nil, {dataplane.FeatureBatchOps}} {
		t.Run(fmt.Sprintf("disable=%v", disable), func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{MaxConnections: 1024, SNATPortLo: 40000, SNATPortHi: 49999, Disable: disable})
			w := e.DP.NewFlowWalk(chunk)
			if len(w.Keys) != chunk || len(w.Values) != chunk {
				t.Fatalf("walk buffers %d/%d, want %d", len(w.Keys), len(w.Values), chunk)
			}
			if seen, calls := walkPass(t, w, chunk, 1, nil); len(seen) != 0 || calls != 1 {
				t.Fatalf("empty map: %d keys in %d reads, want the end at once", len(seen), calls)
			}

			openPairs(t, e, pairs)
			want := e.Flows(t)
			if len(want) != 2*pairs {
				t.Fatalf("%d entries, want %d", len(want), 2*pairs)
			}
			same := func(k dataplane.FlowKey, v dataplane.FlowValue) {
				if wv, ok := want[k]; !ok || wv.Generation != v.Generation || wv.Peer(k) != v.Peer(k) {
					t.Fatalf("walk returned %v = %+v, the map holds %+v (%v)", k, v, wv, ok)
				}
			}
			exact := func(pass int) {
				seen, calls := walkPass(t, w, chunk, 4*len(want), same)
				if len(seen) != len(want) {
					t.Fatalf("pass %d: %d distinct entries, want %d", pass, len(seen), len(want))
				}
				for k, n := range seen {
					if n != 1 {
						t.Fatalf("pass %d: %v returned %d times", pass, k, n)
					}
				}
				if calls < len(want)/chunk {
					t.Fatalf("pass %d took %d reads of at most %d for %d entries", pass, calls, chunk, len(want))
				}
				t.Logf("pass %d: %d entries in %d reads", pass, len(seen), calls)
			}
			exact(1)
			exact(2)

			// Entries removed in the middle of a pass never come back; all
			// others still do, and the pass ends.
			var first map[dataplane.FlowKey]int
			for len(first) < 3*chunk {
				n, end, err := w.Next()
				if err != nil || end {
					t.Fatalf("early read: %d, end %v, %v", n, end, err)
				}
				if first == nil {
					first = map[dataplane.FlowKey]int{}
				}
				for i := range n {
					first[w.Keys[i]]++
				}
			}
			removed := map[dataplane.FlowKey]bool{}
			for k := range want {
				if len(removed) == 100 {
					break
				}
				if first[k] == 0 {
					e.DeleteFlow(t, k)
					removed[k] = true
				}
			}
			rest, _ := walkPass(t, w, chunk, 4*len(want), func(k dataplane.FlowKey, v dataplane.FlowValue) {
				if removed[k] {
					t.Fatalf("removed entry %v returned", k)
				}
				same(k, v)
			})
			for k := range want {
				if !removed[k] && first[k]+rest[k] == 0 {
					t.Fatalf("%v was never returned in the pass", k)
				}
			}
			for k := range removed {
				delete(want, k)
			}
			exact(3)
		})
	}
}

// openPairs opens n pairs with SYNs from client ports 20000 and up.
func openPairs(t *testing.T, e *dt.Env, n int) {
	t.Helper()
	err := e.Do(func() error {
		for i := range n {
			if act, _, err := e.RunHere(synFrom(e, dt.Client(uint16(20000+i)), 80).Frame(), e.Front); err != nil || act != dt.XDPTX {
				return fmt.Errorf("SYN %d: %s %v", i, dt.ActionName(act), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A batch read returns whole hash buckets: a walk whose chunk is smaller
// than a bucket grows its buffers instead of failing (ENOSPC), and still
// returns every entry once per pass.
func TestFlowWalkGrowsForLargeBuckets(t *testing.T) {
	const pairs = 300
	e := dt.NewEnv(t, dt.Options{MaxConnections: 1024, SNATPortLo: 40000, SNATPortHi: 49999})
	openPairs(t, e, pairs)
	w := e.DP.NewFlowWalk(1)
	seen := map[dataplane.FlowKey]int{}
	for reads := 0; ; reads++ {
		if reads > 4*pairs {
			t.Fatalf("no end of the pass after %d reads", reads)
		}
		n, end, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			seen[w.Keys[i]]++
		}
		if end {
			break
		}
	}
	if len(seen) != 2*pairs {
		t.Fatalf("%d distinct entries, want %d", len(seen), 2*pairs)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%v returned %d times", k, n)
		}
	}
	t.Logf("buffers grew to %d entries", len(w.Keys))
}
