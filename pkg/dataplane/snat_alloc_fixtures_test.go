package dataplane_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// SNAT allocator fixtures (issue 13 "SNAT port reuse": the allocator finds
// a free port without long linear probes, the next routable backend is
// tried before answering RST; plan13 data path rule 1): a per-backend
// bitmap of taken ports, searched a word at a time from the backend's
// rotating cursor.

// With every port of a 1,000-port range taken but a few far apart (and
// far from the cursor), each SYN gets one of the free ports and none is
// refused until they are all gone. The old allocator probed 32 ports from
// the cursor and refused such SYNs.
func TestSNATAllocatorFragmentedSpace(t *testing.T) {
	const lo, hi = 40000, 40999
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: lo, SNATPortHi: hi, MaxConnections: 1100})
	all := make([]uint16, 0, hi-lo+1)
	for p := uint16(lo); p <= hi; p++ {
		all = append(all, p)
	}
	synBurst(t, e, 20000, len(all))
	wantTaken(t, e, 0, all...)
	refuse(t, e, 21000)

	// Holes: the range's middle, its last word's last port, and one in
	// the word after the first hole. The cursor is where the 1,000th SYN
	// left it, far from all of them.
	holes := []uint16{40500, 40777, hi}
	reapEmbryonicOn(t, e, 0, holes...)
	wantTaken(t, e, 0, without(all, holes...)...)
	got := []uint16{synOn(t, e, 21001, 0), synOn(t, e, 21002, 0)}

	// A hole behind the cursor now: the search wraps around to it.
	reapEmbryonicOn(t, e, 0, 40010)
	got = append(got, synOn(t, e, 21003, 0), synOn(t, e, 21004, 0))
	refuse(t, e, 21005)
	slices.Sort(got)
	if want := []uint16{40010, 40500, 40777, hi}; !slices.Equal(got, want) {
		t.Fatalf("SYNs took ports %v, want the holes %v", got, want)
	}
	wantTaken(t, e, 0, all...)
}

// A word whose lowest free port cannot be taken yet (freed by a
// client-first close, its last backend packet within the reuse guard)
// still gives a SYN its other free port: every free port of a word is
// tried before the next word, and a SYN is refused only when none can be
// taken. The allocator of layout 5 tried only the lowest free port of each
// word and refused this SYN.
func TestSNATAllocatorTriesEveryFreePortOfAWord(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40002})
	a := dial(t, e, 33000, synOptions(-1))
	b := dial(t, e, 33001, synOptions(-1))
	c := dial(t, e, 33002, synOptions(-1)) // the cursor wraps to 40000
	if a.p.SNATPort() != 40000 || b.p.SNATPort() != 40001 || c.p.SNATPort() != 40002 {
		t.Fatalf("pairs on ports %d, %d, %d; want 40000-40002", a.p.SNATPort(), b.p.SNATPort(), c.p.SNATPort())
	}
	a.handshake(synAckOptions(-1), 1000)
	a.forward("client FIN", a.client(dt.FIN|dt.ACK, isnC+1, isnB+1, 1000, nil), counted{})
	a.forward("backend FIN", a.backend(dt.FIN|dt.ACK, isnB+1, isnC+2, 2000, nil), counted{ClosedClientFIN: 1})
	op := a.now()
	stampRev(t, e, op, e.Now(t)+4*reuseGuard(t, e)) // within the guard however slow the machine
	reapEmbryonicOn(t, e, 0, 40002)
	wantTaken(t, e, 0, 40001) // 40000 freed but not reusable yet, 40002 free

	if got := synOn(t, e, 33003, 0); got != 40002 {
		t.Fatalf("SYN took port %d, want 40002 (past 40000, still in its guard)", got)
	}
	wantTaken(t, e, 0, 40001, 40002)
	wantPair(t, e, op, true)
	refuse(t, e, 33004) // only 40000 is free, and not reusable yet
	wantTaken(t, e, 0, 40001, 40002)
}

// When the round-robin backend has no free port, the next routable
// backend takes the SYN (Counters.SNATFallbacks); when none has one, the
// SYN is refused with a RST (Counters.SNATExhausted) and nothing is created.
func TestSNATFallbackToNextBackend(t *testing.T) {
	// three backends, one port each
	e := dt.NewEnv(t, dt.Options{SNATPortLo: 40000, SNATPortHi: 40000})
	a := dial(t, e, 33000, synOptions(-1)) // round robin: backend 0
	b := dial(t, e, 33001, synOptions(-1)) // backend 1
	if a.id() != 0 || b.id() != 1 {
		t.Fatalf("first pairs on backends %d and %d, want 0 and 1", a.id(), b.id())
	}
	reapEmbryonicOn(t, e, 1, 40000)                                                        // backend 1 has its port back
	c := dial(t, e, 33002, synOptions(-1))                                                 // backend 2
	d := dialWith(t, e, 33003, synOptions(-1), counted{PairsCreated: 1, SNATFallbacks: 1}) // backend 0's turn: full, so backend 1
	if c.id() != 2 || d.id() != 1 || d.p.SNATPort() != 40000 {
		t.Fatalf("pairs on backends %d and %d (port %d), want 2 and 1 (port 40000)", c.id(), d.id(), d.p.SNATPort())
	}
	for id := range 3 {
		wantTaken(t, e, id, 40000)
	}
	refuse(t, e, 33004)
	if n := len(e.Flows(t)); n != 6 {
		t.Fatalf("%d entries, want 6 (three pairs)", n)
	}
}

// synBurst sends n SYNs from client ports first, first+1, ... and expects
// each to open a pair.
func synBurst(t *testing.T, e *dt.Env, first, n int) {
	t.Helper()
	err := e.Do(func() error {
		for i := range n {
			f := synFrom(e, dt.Client(uint16(first+i)), 80).Frame()
			if act, _, err := e.RunHere(f, e.Front); err != nil || act != dt.XDPTX {
				return fmt.Errorf("SYN %d: %s %v", i, dt.ActionName(act), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := e.Counters(t); c.PairsCreated != uint64(n) || c.SNATExhausted != 0 {
		t.Fatalf("%d pairs created, %d SYNs refused; want %d and none", c.PairsCreated, c.SNATExhausted, n)
	}
}

// synOn sends a SYN from client port port that must open a pair toward
// backend id, and returns the SNAT port it got.
func synOn(t *testing.T, e *dt.Env, port uint16, id int) uint16 {
	t.Helper()
	k := dial(t, e, port, mss)
	if k.id() != id {
		t.Fatalf("SYN from port %d went to backend %d, want %d", port, k.id(), id)
	}
	return k.p.SNATPort()
}

// refuse sends a SYN from client port port and expects it answered with a
// RST|ACK for want of a SNAT port, creating nothing.
func refuse(t *testing.T, e *dt.Env, port uint16) {
	t.Helper()
	s := synFrom(e, dt.Client(port), 80)
	n := len(e.Flows(t))
	step(t, e, fmt.Sprintf("SYN from port %d", port), s.Frame(), e.Front, dt.XDPTX, resetFor(e, s), counted{SNATExhausted: 1})
	if m := len(e.Flows(t)); m != n {
		t.Fatalf("a refused SYN changed the flow map from %d to %d entries", n, m)
	}
}

// resetFor is the RST|ACK XLB answers the client's SYN s with (RFC 793
// "Reset Generation": seq 0, ack = ISN + 1).
func resetFor(e *dt.Env, s dt.Segment) []byte {
	return dt.Segment{SrcMAC: e.Front.MAC, DstMAC: s.SrcMAC, Src: s.Dst, Dst: s.Src, Seq: 0, Ack: s.Seq + 1, Flags: dt.RST | dt.ACK}.Unpadded()
}

// pairOnPort is the pair holding SNAT port port toward backend id.
func pairOnPort(t *testing.T, e *dt.Env, id int, port uint16) dt.Pair {
	t.Helper()
	for k, v := range e.Flows(t) {
		if k.Direction() == dataplane.DirBackend && k.Dst().Port() == port && int(v.BackendId) == id {
			f := v.Peer(k)
			fv, err := e.DP.LookupFlow(f)
			if err != nil {
				t.Fatalf("forward entry %v of the pair on port %d: %v", f, port, err)
			}
			return dt.Pair{FwdKey: f, Fwd: fv, RevKey: k, Rev: v}
		}
	}
	t.Fatalf("no pair holds SNAT port %d toward backend %d", port, id)
	return dt.Pair{}
}

// reapEmbryonicOn removes the (never established) pairs holding ports
// toward backend id through the embryonic rule, as the maintenance loop
// would once their embryonic TTL is over.
func reapEmbryonicOn(t *testing.T, e *dt.Env, id int, ports ...uint16) {
	t.Helper()
	c := reapClock(e.Now(t) + embryonicTTL)
	for _, port := range ports {
		p := pairOnPort(t, e, id, port)
		reapWant(t, e, c, fwdReq(p, dataplane.ReapEmbryonic), dataplane.Reaped)
	}
}

// without is ports without the ones named.
func without(ports []uint16, drop ...uint16) []uint16 {
	return slices.DeleteFunc(slices.Clone(ports), func(p uint16) bool { return slices.Contains(drop, p) })
}

// Several SNAT addresses give each backend one port space per address
// (issue 13 "snat.ip accepts a list"): with one port per address, two
// pairs to one backend fit, from the two addresses; a third SYN is
// refused. Backend packets to either address are the pairs' replies.
func TestSNATSeveralAddresses(t *testing.T) {
	extra := testnet.XLBExtraIP(0)
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40000, ExtraSNAT: []netip.Addr{extra}})
	a := dial(t, e, 33000, synOptions(-1))
	b := dial(t, e, 33001, synOptions(-1))
	got := []netip.AddrPort{a.p.Fwd.NewSrc(), b.p.Fwd.NewSrc()}
	want := []netip.AddrPort{netip.AddrPortFrom(e.SNAT, 40000), netip.AddrPortFrom(extra, 40000)}
	if !slices.Contains(got, want[0]) || !slices.Contains(got, want[1]) {
		t.Fatalf("pairs from %v, want one from each of %v", got, want)
	}
	for i := range 2 {
		if ports, err := e.DP.FixtureTakenSNATPorts(0, i); err != nil || !slices.Equal(ports, []uint16{40000}) {
			t.Fatalf("SNAT address %d: ports taken %v (err %v), want [40000]", i, ports, err)
		}
	}
	refuse(t, e, 33002)
	for _, k := range []*tcpConn{a, b} {
		sa := k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil)
		k.forward(fmt.Sprintf("SYN-ACK to %v", sa.Dst), sa, counted{})
	}

	// a's port back: the next SYN gets it, from a's address.
	reapWant(t, e, reapClock(e.Now(t)+embryonicTTL), fwdReq(a.now(), dataplane.ReapEmbryonic), dataplane.Reaped)
	c := dial(t, e, 33003, synOptions(-1))
	if c.p.Fwd.NewSrc() != a.p.Fwd.NewSrc() {
		t.Fatalf("new pair from %v, want %v (the port just released)", c.p.Fwd.NewSrc(), a.p.Fwd.NewSrc())
	}
	if n := len(e.Flows(t)); n != 4 {
		t.Fatalf("%d entries, want 4", n)
	}
}
