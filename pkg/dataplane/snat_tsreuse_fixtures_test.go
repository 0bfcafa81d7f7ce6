package dataplane_test

import (
	"fmt"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Timestamp reuse fixtures (issue 36 item 2; bpf/snat.h "timestamp
// reuse"). A pair that negotiated timestamps and ended with the backend
// closing first keeps its SNAT port held for the backend's TIME_WAIT, as
// any backend-first close; its close event makes the maintenance loop
// send ReapTSHold, which hints the port. A later client SYN with
// timestamps to that backend takes the port over once the reuse guard
// has passed since the old pair's last packet: its TSval toward the
// backend is then above every TSval of the old pair (bpf/tsopt.h), so the
// backend's TIME_WAIT accepts it (RFC 6191). A SYN without timestamps
// never takes it; neither does any SYN once the backend answered a SYN
// with timestamps without them. Every fixture runs one backend and one
// SNAT port: the held port is the only one.

// tsBackendClosed opens a pair from client port port with timestamps on
// both SYNs (the client's numbers from cval, the backend's from bval) and
// closes it backend first; the close event's ReapTSHold hints its port.
// It returns the pair and the last TSval the backend received on it.
func tsBackendClosed(t *testing.T, e *dt.Env, port uint16, cval, bval uint32) (*tcpConn, uint32) {
	t.Helper()
	k := dial(t, e, port, tsSyn(cval))
	sent := cval + k.p.Fwd.TsOff
	k.forward("SYN-ACK", withOpts(k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil), tsSynAck(bval, sent)), counted{})
	k.forward("client ACK", withOpts(k.client(dt.ACK, isnC+1, isnB+1, 1000, nil), tsData(cval+1, bval)), counted{})
	k.forward("backend FIN", withOpts(k.backend(dt.FIN|dt.ACK, isnB+1, isnC+1, 2000, nil), tsData(bval+1, sent+1)), counted{})
	out := k.forward("client FIN", withOpts(k.client(dt.FIN|dt.ACK, isnC+1, isnB+2, 1000, nil), tsData(cval+2, bval+1)), counted{ClosedBackendFIN: 1})
	wantTimestamps(t, "client FIN", out, sent+2, bval+1)
	k.forward("backend's last ACK", withOpts(k.backend(dt.ACK, isnB+2, isnC+2, 2000, nil), tsData(bval+2, sent+2)), counted{})
	p := k.wantFlags(closedF|initB|dataplane.FlagTS, 0)
	if p.Rev.Flags&dataplane.FlagPortFreed != 0 {
		t.Fatalf("reverse flags %#x: a backend-first close must not free the port", p.Rev.Flags)
	}
	reapWant(t, e, reapClock(e.Now(t)), fwdReq(p, dataplane.ReapTSHold), dataplane.ReapHinted)
	wantTaken(t, e, k.id(), p.SNATPort())
	return k, sent + 2
}

// refuseSYN sends s (a client SYN) and expects it answered with a RST|ACK
// for want of a SNAT port, creating nothing.
func refuseSYN(t *testing.T, e *dt.Env, what string, s dt.Segment) {
	t.Helper()
	n := len(e.Flows(t))
	step(t, e, what, s.Frame(), e.Front, dt.XDPTX, resetFor(e, s), counted{SNATExhausted: 1})
	if m := len(e.Flows(t)); m != n {
		t.Fatalf("%s: a refused SYN changed the flow map from %d to %d entries", what, n, m)
	}
}

// synWith is a client SYN from port port with options opts.
func synWith(e *dt.Env, port uint16, opts []layers.TCPOption) dt.Segment {
	s := e.FromClient(dt.Client(port), 80, dt.SYN, isnC, 0, nil)
	s.Window, s.Options = synWindow, opts
	return s
}

// The held port of a backend-first close with timestamps: a SYN without
// timestamps is refused however long after (the hold applies), a SYN
// with timestamps too within the reuse guard after the old pair's last
// packet, and after it takes the port over: counted as a timestamp reuse
// (not a takeover), the old pair removed and counted once as replaced,
// the new pair's TSval toward the backend above every TSval the old pair
// sent it.
func TestSNATTimestampReuse(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40000})
	old, oldLast := tsBackendClosed(t, e, 33000, 0xfffffff0, 0x7000)
	op := old.now()

	refuseSYN(t, e, "SYN without timestamps", synWith(e, 33001, synOptions(7)[:2]))
	refuseSYN(t, e, "SYN with timestamps within the guard", synWith(e, 33001, tsSyn(5)))
	wantTaken(t, e, 0, 40000)
	wantPair(t, e, op, true)

	guard := reuseGuard(t, e)
	now := e.Now(t)
	waitClock(t, e, max(dataplane.Widen(now, op.Rev.LastSeen), dataplane.Widen(now, op.Fwd.LastSeen))+guard)
	refuseSYN(t, e, "SYN without timestamps after the guard", synWith(e, 33002, synOptions(7)[:2]))

	k := dialWith(t, e, 33003, tsSyn(5), counted{PairsCreated: 1, SNATTimewaitReuses: 1})
	if k.p.SNATPort() != 40000 || k.p.Rev.Generation == op.Fwd.Generation {
		t.Fatalf("new pair on port %d generation %d; old generation %d", k.p.SNATPort(), k.p.Rev.Generation, op.Fwd.Generation)
	}
	if first := 5 + k.p.Fwd.TsOff; int32(first-oldLast) <= 0 {
		t.Fatalf("the new pair's SYN reaches the backend with TSval %d, not above the old pair's last %d", first, oldLast)
	}
	if _, ok := e.LookupPair(t, old.c, 80); ok {
		t.Fatal("the old pair's forward entry is still there")
	}
	if n := len(e.Flows(t)); n != 2 {
		t.Fatalf("%d entries, want 2 (the new pair)", n)
	}
	wantTaken(t, e, 0, 40000)
	wantCloseCounts(t, e, map[int]closeCounts{0: {Opened: 2, ClosedFIN: 1, ReplacedFIN: 1, ClosedFINByBackend: 1}})
	// Counted once: the maintenance loop's time-wait request finds nothing.
	reapWant(t, e, reapClock(e.Now(t)+100*timeWait), fwdReq(op, dataplane.ReapTimeWait), dataplane.ReapGone)
}

// The port stays reusable once the old pair is a XLB_F_HOLD entry (its
// client reused its own port: the forward entry replaced), and a hint is
// only set for a pair that holds the backend's TIME_WAIT with timestamps:
// not for a client-first close (its port is freed) nor for a pair whose
// backend answered without timestamps.
func TestSNATTimestampReuseFromHold(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40001})
	old, oldLast := tsBackendClosed(t, e, 33000, 1000, 0x7000)
	op := old.now()
	// The client reuses its port: a new pair on the other port, the old
	// reverse entry held.
	fresh := dialWith(t, e, 33000, tsSyn(1100), counted{PairsCreated: 1, PairsReplaced: 1})
	if fresh.p.SNATPort() == op.SNATPort() {
		t.Fatalf("the client's new pair took the held port %d", op.SNATPort())
	}
	if v, err := e.DP.LookupFlow(op.RevKey); err != nil || v.Flags&dataplane.FlagHold == 0 {
		t.Fatalf("old reverse entry %+v (%v), want a FlagHold entry", v, err)
	}
	now := e.Now(t)
	waitClock(t, e, max(dataplane.Widen(now, op.Rev.LastSeen), dataplane.Widen(now, op.Fwd.LastSeen))+reuseGuard(t, e))
	k := dialWith(t, e, 33001, tsSyn(9), counted{PairsCreated: 1, SNATTimewaitReuses: 1})
	if k.p.SNATPort() != op.SNATPort() {
		t.Fatalf("new pair on port %d, want the held %d", k.p.SNATPort(), op.SNATPort())
	}
	if first := 9 + k.p.Fwd.TsOff; int32(first-oldLast) <= 0 {
		t.Fatalf("TSval %d not above the old pair's last %d", first, oldLast)
	}

	// A client-first close (the backend keeps no TIME_WAIT, the port is
	// freed) leaves no hint.
	fresh.forward("SYN-ACK", withOpts(fresh.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil), tsSynAck(1, 1100+fresh.p.Fwd.TsOff)), counted{})
	fresh.forward("client ACK", fresh.client(dt.ACK, isnC+1, isnB+1, 1000, nil), counted{})
	fresh.forward("client FIN", fresh.client(dt.FIN|dt.ACK, isnC+1, isnB+1, 1000, nil), counted{})
	fresh.forward("backend FIN", fresh.backend(dt.FIN|dt.ACK, isnB+1, isnC+2, 2000, nil), counted{ClosedClientFIN: 1})
	reapWant(t, e, reapClock(e.Now(t)), fwdReq(fresh.now(), dataplane.ReapTSHold), dataplane.ReapKept)
}

// A backend that answers a SYN with timestamps without them ends the
// reuse toward it: a port its earlier pair (with timestamps) left held is
// not taken however long after, and that pair's own close leaves no hint.
func TestSNATTimestampReuseEndsWithoutBackendTimestamps(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40001})
	old, _ := tsBackendClosed(t, e, 33000, 1000, 0x7000)
	op := old.now()
	// The backend turns net.ipv4.tcp_timestamps off: its next SYN-ACK has none.
	k := dial(t, e, 33001, tsSyn(2000))
	k.handshake(synAckOptions(7), 1000)
	if got := backendTS(t, e, 0); got != dataplane.TimestampsNo {
		t.Fatalf("backend timestamps %v, want no", got)
	}
	k.forward("backend FIN", k.backend(dt.FIN|dt.ACK, isnB+1, isnC+1, 2000, nil), counted{})
	k.forward("client FIN", k.client(dt.FIN|dt.ACK, isnC+1, isnB+2, 1000, nil), counted{ClosedBackendFIN: 1})
	reapWant(t, e, reapClock(e.Now(t)), fwdReq(k.now(), dataplane.ReapTSHold), dataplane.ReapKept)

	now := e.Now(t)
	waitClock(t, e, max(dataplane.Widen(now, op.Rev.LastSeen), dataplane.Widen(now, op.Fwd.LastSeen))+reuseGuard(t, e))
	for i, port := range []uint16{33002, 33003} {
		refuseSYN(t, e, fmt.Sprintf("SYN %d with timestamps", i), synWith(e, port, tsSyn(3000)))
	}
	wantPair(t, e, op, true)
}

// A SYN with timestamps that takes a held port over and then finds no
// next hop toward the backend (its neighbour gone) is dropped, and the
// port goes back to its hold rather than to the free ports: the backend
// still has the old 4-tuple in TIME_WAIT, which a SYN without timestamps
// must not meet. The reverse entry becomes a FlagHold|FlagTS entry from
// the drop on, announced with a CloseHold event (so the maintenance loop
// removes it after the SNAT hold) and hinted again; once the neighbour is
// back, a SYN with timestamps takes the port after the guard.
func TestSNATTimestampReuseNoNextHopKeepsHold(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40000})
	old, oldLast := tsBackendClosed(t, e, 33000, 1000, 0x7000)
	op := old.now()
	backend := e.Backends[0]
	neigh := &netlink.Neigh{LinkIndex: e.Front.Index, State: netlink.NUD_PERMANENT, IP: backend.AsSlice(), HardwareAddr: dt.MAC(backend), Family: netlink.FAMILY_V4}
	if err := e.Do(func() error { return netlink.NeighDel(neigh) }); err != nil {
		t.Fatalf("remove the backend's neighbour: %v", err)
	}
	now := e.Now(t)
	waitClock(t, e, max(dataplane.Widen(now, op.Rev.LastSeen), dataplane.Widen(now, op.Fwd.LastSeen))+reuseGuard(t, e))
	ev := closeEvents(t, e)
	drain(t, ev)

	s := synWith(e, 33001, tsSyn(5))
	step(t, e, "SYN with timestamps, no next hop", s.Frame(), e.Front, dt.XDPDrop, nil, counted{FIBMiss: 1, SNATTimewaitReuses: 1})
	if _, ok := e.LookupPair(t, old.c, 80); ok {
		t.Fatal("the old pair's forward entry is still there: it goes with the takeover")
	}
	held, err := e.DP.LookupFlow(op.RevKey)
	if err != nil || held.Flags != dataplane.FlagTS|dataplane.FlagHold || held.Generation == op.Rev.Generation {
		t.Fatalf("reverse entry at the held port %+v (%v), want a new FlagTS|FlagHold entry", held, err)
	}
	if n := len(e.Flows(t)); n != 1 {
		t.Fatalf("%d entries, want 1 (the hold)", n)
	}
	wantTaken(t, e, 0, 40000)
	var holds int
	for _, c := range drain(t, ev) {
		if dataplane.CloseKind(c.Kind) != dataplane.CloseHold || c.Key != op.RevKey || c.Generation != held.Generation || c.Time != held.LastSeen {
			t.Fatalf("event %+v, want one CloseHold of key %v generation %d time %d", c, op.RevKey, held.Generation, held.LastSeen)
		}
		holds++
	}
	if holds != 1 {
		t.Fatalf("%d CloseHold events, want 1", holds)
	}
	refuseSYN(t, e, "SYN without timestamps after the drop", synWith(e, 33002, synOptions(7)[:2]))

	if err := e.Do(func() error { return netlink.NeighAdd(neigh) }); err != nil {
		t.Fatalf("restore the backend's neighbour: %v", err)
	}
	waitClock(t, e, dataplane.Widen(e.Now(t), held.LastSeen)+reuseGuard(t, e))
	k := dialWith(t, e, 33003, tsSyn(9), counted{PairsCreated: 1, SNATTimewaitReuses: 1})
	if k.p.SNATPort() != 40000 {
		t.Fatalf("new pair on port %d, want the held 40000", k.p.SNATPort())
	}
	if first := 9 + k.p.Fwd.TsOff; int32(first-oldLast) <= 0 {
		t.Fatalf("TSval %d not above the old pair's last %d", first, oldLast)
	}
}
