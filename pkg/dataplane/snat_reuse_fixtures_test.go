package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// SNAT port reuse fixtures (issue 13 "SNAT port reuse"; DESIGN §6b;
// plan13 data path rule 1). A pair that ends with the client's FIN first,
// or with a RST, leaves the backend no TIME_WAIT: the packet that ends it
// clears the port's bit and marks the reverse entry FlagPortFreed, and a
// new pair to that backend may take the port over once the reuse guard
// (SNATReuseGuard, in ticks of the kernel's HZ) has passed since the old
// pair's last backend packet; the takeover removes the old pair and counts
// it once (its backend's replaced count and Counters.SNATTakeovers). A
// pair whose backend closed first keeps its port through the time-wait
// and the SNAT hold after it, even when the client reuses its own port:
// the forward entry is replaced or reaped, the reverse entry stays as a
// FlagHold entry that drops what reaches it, until ReapHold.
//
// Every fixture runs one backend: its ports are the only ones.

// closeWay is how a takeover fixture ends the old pair after its handshake.
type closeWay struct {
	name    string
	frames  func(k *tcpConn) []dt.Segment
	counted counted // the closure the last frame counts
	rst     bool    // the pair ends by RST (else by both FINs)
}

var freeingCloses = []closeWay{
	{name: "client FIN first", rst: false, counted: counted{ClosedClientFIN: 1}, frames: func(k *tcpConn) []dt.Segment {
		return []dt.Segment{
			k.client(dt.FIN|dt.ACK, isnC+1, isnB+1, 1000, nil),
			k.backend(dt.FIN|dt.ACK, isnB+1, isnC+2, 2000, nil),
		}
	}},
	{name: "client RST", rst: true, counted: counted{ClosedClientRST: 1}, frames: func(k *tcpConn) []dt.Segment {
		return []dt.Segment{k.client(dt.RST|dt.ACK, isnC+1, isnB+1, 0, nil)}
	}},
	{name: "backend RST", rst: true, counted: counted{ClosedBackendRST: 1}, frames: func(k *tcpConn) []dt.Segment {
		return []dt.Segment{k.backend(dt.RST, isnB+1, 0, 0, nil)}
	}},
}

// A port freed by a client-first close or a RST is taken over by the next
// pair to that backend once the reuse guard has passed since the old
// pair's last backend packet, and not before (the refused SYN leaves the
// port free): half the guard is still too early, 1 s at any HZ; the 100
// ticks of layout 5 were 0.4 s at HZ=250. The old pair is removed and
// counted once.
func TestSNATTakeover(t *testing.T) {
	for _, w := range freeingCloses {
		t.Run(w.name, func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40000})
			old := dial(t, e, 33000, synOptions(-1))
			old.handshake(synAckOptions(-1), 1000)
			wantTaken(t, e, 0, 40000)
			frames := w.frames(old)
			for _, s := range frames[:len(frames)-1] {
				old.forward("half-close", s, counted{})
				wantTaken(t, e, 0, 40000) // a half-close frees nothing
			}
			old.forward("close", frames[len(frames)-1], w.counted)
			op := old.now()
			if !dataplane.Terminal(op.Fwd.Flags) || op.Rev.Flags&dataplane.FlagPortFreed == 0 {
				t.Fatalf("after the close: flags %#x/%#x, want a terminal pair whose reverse entry has FlagPortFreed", op.Fwd.Flags, op.Rev.Flags)
			}
			wantTaken(t, e, 0)

			guard := reuseGuard(t, e)
			// Too early: the old pair's last backend packet is stamped
			// ahead of the clock (by 4 x the guard, so that a stalled
			// machine still sends the SYN too early).
			stampRev(t, e, op, e.Now(t)+4*guard)
			refuse(t, e, 33001)
			wantTaken(t, e, 0) // the bit of a freed port is not lost to a refused SYN
			wantPair(t, e, op, true)

			// Still too early: the last backend packet half the guard
			// ago (0.5 s; the SYN comes within the other half).
			stampRev(t, e, op, e.Now(t)-guard/2)
			refuse(t, e, 33001)
			wantTaken(t, e, 0)
			wantPair(t, e, op, true)

			// Late enough: the last backend packet the guard ago.
			stampRev(t, e, op, e.Now(t)-guard)
			k := dialWith(t, e, 33001, synOptions(-1), counted{PairsCreated: 1, SNATTakeovers: 1})
			if k.p.SNATPort() != 40000 || k.p.Rev.Generation == op.Fwd.Generation || k.p.Rev.Flags&dataplane.FlagPortFreed != 0 {
				t.Fatalf("new pair on port %d generation %d reverse flags %#x; old generation %d", k.p.SNATPort(), k.p.Rev.Generation, k.p.Rev.Flags, op.Fwd.Generation)
			}
			if _, ok := e.LookupPair(t, old.c, 80); ok {
				t.Fatal("the taken-over pair's forward entry is still there")
			}
			if n := len(e.Flows(t)); n != 2 {
				t.Fatalf("%d entries, want 2 (the new pair)", n)
			}
			wantTaken(t, e, 0, 40000)
			want := closeCounts{Opened: 2, ClosedFIN: 1, ReplacedFIN: 1}
			if w.rst {
				want = closeCounts{Opened: 2, ClosedRST: 1, ReplacedRST: 1, ClosedRSTByBackend: w.counted.ClosedBackendRST}
			}
			wantCloseCounts(t, e, map[int]closeCounts{0: want})

			// Counted once: the maintenance loop's request for the old pair finds nothing.
			far := reapClock(e.Now(t) + 100*timeWait)
			reapWant(t, e, far, fwdReq(op, dataplane.ReapTimeWait), dataplane.ReapGone)
			reapWant(t, e, far, fwdReq(op, dataplane.ReapReset), dataplane.ReapGone)
			wantReaped(t, e, nil)
			wantCloseCounts(t, e, map[int]closeCounts{0: want})
		})
	}
}

// A pair whose backend closed first keeps its port toward that backend
// through the time-wait, however long it waits: no takeover. The
// time-wait reaper then removes the pair but leaves its reverse entry as a
// HOLD entry (FlagHold, a CloseHold event) that keeps the port until the
// SNAT hold has passed, counted from the backend's last packet when that
// came after the close (the backend restarts its TIME_WAIT on a
// retransmitted FIN and answers it); only then does ReapHold free it.
// Before the hold, the port came back at the end of the time-wait, while
// the backend's TIME_WAIT socket could still exist.
func TestSNATBackendClosedPortHeldPastTimeWait(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40000})
	ev := closeEvents(t, e)
	old := backendClosed(t, e, 33000)
	op := old.now()
	closedAt := dataplane.Widen(e.Now(t), op.Fwd.LastSeen)

	waitClock(t, e, dataplane.Widen(e.Now(t), op.Rev.LastSeen)+reuseGuard(t, e))
	refuse(t, e, 33001)
	if p := old.now(); p.Fwd.Generation != op.Fwd.Generation || p.Rev.Generation != op.Rev.Generation || p.Fwd.Flags != op.Fwd.Flags {
		t.Fatalf("pair after the refused SYN: %+v, was %+v", p, op)
	}
	wantTaken(t, e, 0, 40000)

	// The client's FIN once more (its ACK lost beyond XLB), and the
	// backend's ACK from TIME_WAIT: the hold starts there.
	old.forward("client FIN again", old.client(dt.FIN|dt.ACK, isnC+1, isnB+2, 1000, nil), counted{})
	old.forward("backend ACK from TIME_WAIT", old.backend(dt.ACK, isnB+2, isnC+2, 2000, nil), counted{})
	restart := dataplane.Widen(e.Now(t), old.now().Rev.LastSeen)
	if restart <= closedAt {
		t.Fatalf("backend's last packet at %d, not after the close at %d", restart, closedAt)
	}
	drain(t, ev)

	reapWant(t, e, reapClock(closedAt+timeWait-1), fwdReq(op, dataplane.ReapTimeWait), dataplane.ReapKept)
	reapWant(t, e, reapClock(closedAt+timeWait), fwdReq(op, dataplane.ReapTimeWait), dataplane.Reaped)
	if present(t, e, op.FwdKey, op.Fwd.Generation) {
		t.Fatal("the time-wait pair's forward entry is still there")
	}
	hold, err := e.DP.LookupFlow(op.RevKey)
	if err != nil {
		t.Fatalf("the reverse entry after the time-wait: %v", err)
	}
	if hold.Flags&dataplane.FlagHold == 0 || hold.Generation != op.Rev.Generation || hold.LastSeen != restart.Low32() {
		t.Fatalf("reverse entry flags %#x generation %d last_seen %d; want FlagHold, generation %d, last_seen %d (the backend's last packet)",
			hold.Flags, hold.Generation, hold.LastSeen, op.Rev.Generation, restart.Low32())
	}
	got := drain(t, ev)
	if len(got) != 1 || dataplane.CloseKind(got[0].Kind) != dataplane.CloseHold || got[0].Key != op.RevKey ||
		got[0].Generation != op.Rev.Generation || got[0].Time != restart.Low32() || got[0].BackendId != op.Rev.BackendId {
		t.Fatalf("events %+v, want one CloseHold for %v generation %d at %d", got, op.RevKey, op.Rev.Generation, restart.Low32())
	}
	wantTaken(t, e, 0, 40000)
	refuse(t, e, 33002)
	wantReaped(t, e, map[int]dataplane.ReapedCounts{0: {TimeWait: 1}})
	wantCloseCounts(t, e, map[int]closeCounts{0: {Opened: 1, ClosedFIN: 1, ClosedFINByBackend: 1}})

	holdReq := dataplane.ReapRequest{Key: op.RevKey, Generation: op.Rev.Generation, Op: dataplane.ReapHold}
	reapWant(t, e, reapClock(restart+snatHold-1), holdReq, dataplane.ReapKept)
	reapWant(t, e, reapClock(restart+snatHold), holdReq, dataplane.Reaped)
	wantTaken(t, e, 0)
	if k := dial(t, e, 33003, synOptions(-1)); k.p.SNATPort() != 40000 { // a fresh port, no takeover
		t.Fatalf("new pair on port %d, want 40000", k.p.SNATPort())
	}
	wantReaped(t, e, map[int]dataplane.ReapedCounts{0: {TimeWait: 1}}) // the pair was counted once, when it left
}

// A time-wait pair the client closed first leaves the backend no
// TIME_WAIT: the reaper removes both entries, no hold.
func TestSNATClientClosedTimeWaitLeavesNoHold(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40000})
	ev := closeEvents(t, e)
	old := closedByClient(t, e, 33000)
	op := old.now()
	closedAt := dataplane.Widen(e.Now(t), op.Fwd.LastSeen)
	drain(t, ev)
	reapWant(t, e, reapClock(closedAt+timeWait), fwdReq(op, dataplane.ReapTimeWait), dataplane.Reaped)
	if n := len(e.Flows(t)); n != 0 {
		t.Fatalf("%d entries left, want none", n)
	}
	if got := drain(t, ev); len(got) != 0 {
		t.Fatalf("events %+v, want none", got)
	}
	wantTaken(t, e, 0)
}

// reuseGuard is the SNAT reuse guard the data path was configured with:
// SNATReuseGuard in ticks of the kernel's HZ, rounded up, and never less
// than a second's ticks.
func reuseGuard(t *testing.T, e *dt.Env) dataplane.Jiffies {
	t.Helper()
	got, err := e.DP.FixtureSNATReuseTicks()
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.DP.Ticks(dataplane.SNATReuseGuard)
	if err != nil {
		t.Fatal(err)
	}
	hz, err := e.DP.HZ()
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got < dataplane.Jiffies(hz) {
		t.Fatalf("configured reuse guard %d ticks, want %d (%v at HZ=%d), at least %d (1 s)", got, want, dataplane.SNATReuseGuard, hz, hz)
	}
	return got
}

// A simultaneous close leaves the backend in TIME_WAIT like a
// backend-first close (issue 27 finding 7; RFC 9293 §3.6: FIN-WAIT-1,
// CLOSING, TIME-WAIT): the backend's FIN, sent before the client's
// arrived, does not acknowledge it. The port stays taken, no new pair
// takes it over however long ago the old pair's last backend packet was,
// and it comes back when the time-wait reaper removes the pair.
func TestSNATSimultaneousClosePortHeld(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40000})
	old := dial(t, e, 33000, synOptions(-1))
	old.handshake(synAckOptions(-1), 1000)
	old.forward("client FIN", old.client(dt.FIN|dt.ACK, isnC+1, isnB+1, 1000, nil), counted{})
	old.forward("backend FIN, sent before the client's arrived", old.backend(dt.FIN|dt.ACK, isnB+1, isnC+1, 2000, nil),
		counted{ClosedClientFIN: 1})
	old.forward("backend ACK of the client's FIN (CLOSING)", old.backend(dt.ACK, isnB+2, isnC+2, 2000, nil), counted{})
	old.forward("client ACK of the backend's FIN", old.client(dt.ACK, isnC+2, isnB+2, 1000, nil), counted{})
	op := old.now()
	if op.Fwd.Flags&closedF == 0 || op.Rev.Flags&dataplane.FlagPortFreed != 0 {
		t.Fatalf("after the simultaneous close: flags %#x/%#x, want a time-wait pair whose reverse entry lacks FlagPortFreed", op.Fwd.Flags, op.Rev.Flags)
	}
	wantTaken(t, e, 0, 40000)
	closedAt := dataplane.Widen(e.Now(t), op.Fwd.LastSeen)

	// Long enough for a takeover of a freed port: the last backend packet
	// 4 x the reuse guard ago.
	guard, err := e.DP.FixtureSNATReuseTicks()
	if err != nil {
		t.Fatal(err)
	}
	stampRev(t, e, op, e.Now(t)-4*guard)
	op = old.now()
	refuse(t, e, 33001)
	if p := old.now(); p.Fwd.Generation != op.Fwd.Generation || p.Rev.Generation != op.Rev.Generation || p.Fwd.Flags != op.Fwd.Flags {
		t.Fatalf("pair after the refused SYN: %+v, was %+v", p, op)
	}
	wantTaken(t, e, 0, 40000)

	// The time-wait ends the pair; its reverse entry holds the port as
	// after a backend-first close (maintenance.SNATHold from the close).
	reapWant(t, e, reapClock(closedAt+timeWait-1), fwdReq(op, dataplane.ReapTimeWait), dataplane.ReapKept)
	reapWant(t, e, reapClock(closedAt+timeWait), fwdReq(op, dataplane.ReapTimeWait), dataplane.Reaped)
	hold, err := e.DP.LookupFlow(op.RevKey)
	if err != nil || hold.Flags&dataplane.FlagHold == 0 {
		t.Fatalf("the reverse entry after the time-wait: %+v, %v; want a hold entry", hold, err)
	}
	wantTaken(t, e, 0, 40000)
	holdSince := dataplane.Widen(e.Now(t), hold.LastSeen)
	holdReq := dataplane.ReapRequest{Key: op.RevKey, Generation: op.Rev.Generation, Op: dataplane.ReapHold}
	reapWant(t, e, reapClock(holdSince+snatHold), holdReq, dataplane.Reaped)
	wantTaken(t, e, 0)
	if k := dial(t, e, 33002, synOptions(-1)); k.p.SNATPort() != 40000 {
		t.Fatalf("new pair on port %d, want 40000", k.p.SNATPort())
	}
	wantReaped(t, e, map[int]dataplane.ReapedCounts{0: {TimeWait: 1}})
}

// A client that reuses its source port on a pair its backend closed first
// gets a new pair on another port; the old reverse entry stays as a HOLD
// entry (FlagHold, last_seen = the close, a CloseHold event) that drops
// what reaches it and keeps the port until ReapHold removes it after the
// SNAT hold.
func TestSNATHoldAfterClientPortReuse(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40001})
	ev := closeEvents(t, e)
	old := backendClosed(t, e, 33000)
	op := old.now()
	closedAt := dataplane.Widen(e.Now(t), op.Fwd.LastSeen)
	drain(t, ev)

	// The client's new connection from the same port.
	syn := old.client(dt.SYN, 90000, 0, synWindow, nil)
	syn.Options = synOptions(-1)
	out := step(t, e, "SYN reusing the client port", syn.Frame(), e.Front, dt.XDPTX, nil, counted{PairsReplaced: 1, PairsCreated: 1})
	k := &tcpConn{t: t, e: e, c: old.c, p: e.MustPair(t, old.c, 80)}
	if d := frameDiff(out, k.toBackend(syn)); d != "" {
		t.Fatalf("SYN reusing the client port: output frame differs:\n%s", d)
	}
	if k.p.SNATPort() != 40001 || k.p.Fwd.Generation == op.Fwd.Generation {
		t.Fatalf("new pair on port %d generation %d, want port 40001 and a new generation (old %d)", k.p.SNATPort(), k.p.Fwd.Generation, op.Fwd.Generation)
	}
	hold, err := e.DP.LookupFlow(op.RevKey)
	if err != nil {
		t.Fatalf("the old reverse entry: %v", err)
	}
	if hold.Flags&dataplane.FlagHold == 0 || hold.Generation != op.Rev.Generation || hold.LastSeen != op.Fwd.LastSeen {
		t.Fatalf("old reverse entry flags %#x generation %d last_seen %d; want FlagHold, generation %d, last_seen %d (the close)",
			hold.Flags, hold.Generation, hold.LastSeen, op.Rev.Generation, op.Fwd.LastSeen)
	}
	wantHoldEvents(t, ev, op, k.p)
	wantTaken(t, e, 0, 40000, 40001)
	wantCloseCounts(t, e, map[int]closeCounts{0: {Opened: 2, ClosedFIN: 1, ReplacedFIN: 1, ClosedFINByBackend: 1}})

	// What reaches the HOLD entry is dropped; no port is left for another client.
	late := e.FromBackend(op.Backend(), 40000, dt.ACK, isnB+2, isnC+2, nil)
	step(t, e, "backend ACK to the held port", late.Frame(), e.BackendIface(), dt.XDPDrop, nil, counted{HoldDrops: 1})
	refuse(t, e, 33001)

	// Only ReapHold removes it, and only after the SNAT hold.
	holdReq := dataplane.ReapRequest{Key: op.RevKey, Generation: op.Rev.Generation}
	for _, r := range []dataplane.ReapOp{dataplane.ReapLone, dataplane.ReapOrphan, dataplane.ReapTimeWait, dataplane.ReapEmbryonic} {
		q := holdReq
		q.Op = r
		reqs := []dataplane.ReapRequest{q}
		if err := e.DP.Reap(reqs, reapClock(closedAt+100*timeWait)); err != nil {
			t.Fatal(err)
		}
		if reqs[0].Result == dataplane.Reaped || !present(t, e, op.RevKey, op.Rev.Generation) {
			t.Fatalf("%s on the HOLD entry: %s; want it left to ReapHold", r, resultName(reqs[0].Result))
		}
	}
	holdReq.Op = dataplane.ReapHold
	reapWant(t, e, reapClock(closedAt+snatHold-1), holdReq, dataplane.ReapKept)
	reapWant(t, e, reapClock(closedAt+snatHold), holdReq, dataplane.Reaped)
	if present(t, e, op.RevKey, op.Rev.Generation) {
		t.Fatal("the HOLD entry is still there")
	}
	wantTaken(t, e, 0, 40001)
	wantReaped(t, e, nil) // the pair was accounted for when it was replaced
	if n := dial(t, e, 33002, synOptions(-1)); n.p.SNATPort() != 40000 {
		t.Fatalf("new pair on port %d, want the released 40000", n.p.SNATPort())
	}
}

// A client reusing its port on a pair it closed first (no backend
// TIME_WAIT) leaves no HOLD entry: both old entries go.
func TestSNATClientClosedReuseLeavesNoHold(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40001})
	ev := closeEvents(t, e)
	old := closedByClient(t, e, 33000)
	op := old.now()
	drain(t, ev)
	syn := old.client(dt.SYN, 90000, 0, synWindow, nil)
	step(t, e, "SYN reusing the client port", syn.Frame(), e.Front, dt.XDPTX, nil, counted{PairsReplaced: 1, PairsCreated: 1})
	if present(t, e, op.RevKey, op.Rev.Generation) {
		t.Fatal("the old reverse entry is still there")
	}
	for _, c := range drain(t, ev) {
		if dataplane.CloseKind(c.Kind) == dataplane.CloseHold {
			t.Fatalf("CloseHold posted: %+v", c)
		}
	}
	p := e.MustPair(t, old.c, 80)
	wantTaken(t, e, 0, p.SNATPort())
}

// stampRev sets the last_seen of p's reverse entry (its last backend
// packet) to at.
func stampRev(t *testing.T, e *dt.Env, p dt.Pair, at dataplane.Jiffies) {
	t.Helper()
	v := e.DeleteFlow(t, p.RevKey)
	v.LastSeen = at.Low32()
	if err := e.DP.PutFlow(p.RevKey, v); err != nil {
		t.Fatal(err)
	}
}

// backendClosed opens a pair from client port port, completes its
// handshake and closes it backend first: the backend's FIN, then the
// client's.
func backendClosed(t *testing.T, e *dt.Env, port uint16) *tcpConn {
	t.Helper()
	k := dial(t, e, port, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	k.forward("backend FIN", k.backend(dt.FIN|dt.ACK, isnB+1, isnC+1, 2000, nil), counted{})
	k.forward("client FIN", k.client(dt.FIN|dt.ACK, isnC+1, isnB+2, 1000, nil), counted{ClosedBackendFIN: 1})
	p := k.wantFlags(closedF|initB, 0)
	if p.Rev.Flags&dataplane.FlagPortFreed != 0 {
		t.Fatalf("reverse flags %#x: a backend-first close must not free the port", p.Rev.Flags)
	}
	wantTaken(t, e, k.id(), p.SNATPort())
	return k
}

// wantHoldEvents drains and checks the events of a client port reuse on a
// backend-closed pair: CloseHold for the old reverse entry (its key and
// generation, the close time) and CloseOpen for the new pair.
func wantHoldEvents(t *testing.T, ev *dataplane.CloseEvents, old, fresh dt.Pair) {
	t.Helper()
	var hold, open int
	got := drain(t, ev)
	for _, c := range got {
		switch dataplane.CloseKind(c.Kind) {
		case dataplane.CloseHold:
			hold++
			if c.Key != old.RevKey || c.Generation != old.Rev.Generation || c.Time != old.Fwd.LastSeen || c.BackendId != old.Rev.BackendId {
				t.Fatalf("CloseHold %+v, want key %v generation %d time %d backend %d", c, old.RevKey, old.Rev.Generation, old.Fwd.LastSeen, old.Rev.BackendId)
			}
		case dataplane.CloseOpen:
			open++
			if c.Key != fresh.FwdKey || c.Generation != fresh.Fwd.Generation {
				t.Fatalf("CloseOpen %+v, want key %v generation %d", c, fresh.FwdKey, fresh.Fwd.Generation)
			}
		default:
			t.Fatalf("unexpected event %+v", c)
		}
	}
	if hold != 1 || open != 1 {
		t.Fatalf("events %+v, want one CloseHold and one CloseOpen", got)
	}
}

// closedByClient opens a pair from client port port (the client's window
// 1000, the backend's 2000) and closes it client first: the backend's FIN
// acknowledges the client's, so the backend keeps no TIME_WAIT and the
// pair ends in time-wait with its port freed.
func closedByClient(t *testing.T, e *dt.Env, port uint16) *tcpConn {
	t.Helper()
	k := dial(t, e, port, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	k.forward("client FIN", k.client(dt.FIN|dt.ACK, isnC+1, isnB+1, 1000, nil), counted{})
	k.forward("backend FIN", k.backend(dt.FIN|dt.ACK, isnB+1, isnC+2, 2000, nil), counted{ClosedClientFIN: 1})
	return k
}
