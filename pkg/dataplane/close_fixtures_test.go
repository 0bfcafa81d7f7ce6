package dataplane_test

import (
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Close-tracking fixtures (seed "Orderly close and reset"): FIN and
// RST are recorded on the pair's forward entry and always forwarded, the
// connection is counted once, by initiator and reason, when it becomes
// terminal, and a new SYN replaces a terminal pair. Removal is the
// maintenance loop's job (pkg/flow): every pair here stays in the map.

// closeCase is a pktCase with an optional step between the setup frames and
// the input frame, to break the map on purpose or to remember state.
type closeCase struct {
	pktCase
	mutate func(t *testing.T, e *dt.Env)
}

// The established pair of every case: cli:33000 -> listen:80, sent to
// backend 1 (192.0.2.31:8080) from SNAT port 40000. Client ISN 1000,
// backend ISN 5000.
const firstSNAT = 40000

func cSeg(e *dt.Env, flags uint8, seq, ack uint32, data []byte) dt.Segment {
	return e.FromClient(cli, 80, flags, seq, ack, data)
}

func bSeg(e *dt.Env, flags uint8, seq, ack uint32, data []byte) dt.Segment {
	return e.FromBackend(b1, firstSNAT, flags, seq, ack, data)
}

func clientFIN(e *dt.Env) dt.Segment  { return cSeg(e, dt.FIN|dt.ACK, 1001, 5001, nil) }
func backendFIN(e *dt.Env) dt.Segment { return bSeg(e, dt.FIN|dt.ACK, 5001, 1001, nil) }
func clientRST(e *dt.Env) dt.Segment  { return cSeg(e, dt.RST|dt.ACK, 1001, 5001, nil) }
func backendRST(e *dt.Env) dt.Segment { return bSeg(e, dt.RST, 5001, 0, nil) }

// after returns setup frames: the client SYN followed by segs.
func after(segs ...func(e *dt.Env) dt.Segment) func(e *dt.Env) []dt.Segment {
	return func(e *dt.Env) []dt.Segment {
		out := clientSYN(e)
		for _, s := range segs {
			out = append(out, s(e))
		}
		return out
	}
}

// toBackend and toClient are the input/want pair of a segment forwarded
// through the established pair.
func fromClient(seg func(e *dt.Env) dt.Segment) (func(e *dt.Env) ([]byte, dt.Iface), func(e *dt.Env) []byte) {
	return onFront(func(e *dt.Env) []byte { return seg(e).Frame() }),
		func(e *dt.Env) []byte { return e.ToBackend(seg(e), b1, firstSNAT).Frame() }
}

func fromBackend(seg func(e *dt.Env) dt.Segment) (func(e *dt.Env) ([]byte, dt.Iface), func(e *dt.Env) []byte) {
	return func(e *dt.Env) ([]byte, dt.Iface) { return seg(e).Frame(), e.BackendIface() },
		func(e *dt.Env) []byte { return e.ToClient(seg(e), cli, 80).Frame() }
}

// closed is the delta of the closure counters: client FIN, backend FIN,
// client RST, backend RST.
type closed [4]uint64

func closedOf(c dataplane.Counters) closed {
	return closed{c.ClosedClientFIN, c.ClosedBackendFIN, c.ClosedClientRST, c.ClosedBackendRST}
}

func (a closed) minus(b closed) closed {
	for i := range a {
		a[i] -= b[i]
	}
	return a
}

// wantState checks the pair's close flags, whether they make it terminal,
// that the forward entry's last_seen is not after the clock, the closure
// counters' delta and the invariant counter's delta.
func wantState(flags uint32, isClosed bool, delta closed) func(t *testing.T, e *dt.Env, before dataplane.Counters) {
	return func(t *testing.T, e *dt.Env, before dataplane.Counters) {
		t.Helper()
		p := e.MustPair(t, cli, 80)
		if p.Fwd.Flags != flags {
			t.Fatalf("forward flags %#x, want %#x", p.Fwd.Flags, flags)
		}
		if p.Rev.Flags != 0 {
			t.Fatalf("reverse entry flags %#x, want 0 (pair state lives on the forward entry)", p.Rev.Flags)
		}
		if got := dataplane.Terminal(p.Fwd.Flags); got != isClosed {
			t.Fatalf("Terminal(%#x) = %v, want %v", p.Fwd.Flags, got, isClosed)
		}
		if now := e.Now(t); dataplane.Widen(now, p.Fwd.LastSeen) > now {
			t.Fatalf("forward last_seen %d is after the clock %d (low 32 bits %d)", p.Fwd.LastSeen, now, now.Low32())
		}
		after := e.Counters(t)
		if got := closedOf(after).minus(closedOf(before)); got != delta {
			t.Fatalf("closure counters moved by %v (client FIN, backend FIN, client RST, backend RST), want %v", got, delta)
		}
		if d := after.InvariantViolations - before.InvariantViolations; d != 0 {
			t.Fatalf("invariant violations +%d, want 0", d)
		}
		wantEntries(2)(t, e, before)
	}
}

const (
	finC    = dataplane.FlagFINClient
	finB    = dataplane.FlagFINBackend
	rstC    = dataplane.FlagRSTClient
	rstB    = dataplane.FlagRSTBackend
	initB   = dataplane.FlagInitBackend
	closedF = dataplane.FlagClosedFIN
	closedR = dataplane.FlagClosedRST
)

func closeCases() []closeCase {
	var cs []closeCase
	add := func(c closeCase) { cs = append(cs, c) }
	fwd := func(name string, setup func(e *dt.Env) []dt.Segment, seg func(e *dt.Env) dt.Segment, toBackend bool,
		check func(t *testing.T, e *dt.Env, before dataplane.Counters)) {
		c := closeCase{pktCase: pktCase{name: name, setup: setup, action: dt.XDPTX, check: check}}
		if toBackend {
			c.input, c.want = fromClient(seg)
		} else {
			c.input, c.want = fromBackend(seg)
		}
		add(c)
	}

	// One FIN: recorded, forwarded, not terminal.
	fwd("client FIN is forwarded and recorded; the pair stays open", clientSYN, clientFIN, true,
		wantState(finC, false, closed{}))
	fwd("backend FIN is forwarded and recorded with the backend as initiator", clientSYN, backendFIN, false,
		wantState(finB|initB, false, closed{}))

	// Both FINs: terminal once (CLOSED_FIN), counted by the first FIN's side.
	fwd("backend FIN after the client's closes the pair as a client FIN", after(clientFIN), backendFIN, false,
		wantState(finC|finB|closedF, true, closed{1, 0, 0, 0}))
	fwd("client FIN after the backend's closes the pair as a backend FIN", after(backendFIN),
		func(e *dt.Env) dt.Segment { return cSeg(e, dt.FIN|dt.ACK, 1001, 5002, nil) }, true,
		wantState(finB|initB|finC|closedF, true, closed{0, 1, 0, 0}))

	// RST from either side: terminal (CLOSED_RST), counted by its sender, forwarded.
	fwd("client RST is forwarded to the backend and counted as a client RST", clientSYN, clientRST, true,
		wantState(rstC|closedR, true, closed{0, 0, 1, 0}))
	fwd("backend RST is forwarded to the client and counted as a backend RST", clientSYN, backendRST, false,
		wantState(rstB|initB|closedR, true, closed{0, 0, 0, 1}))
	fwd("backend RST after the client's FIN is counted as a backend RST", after(clientFIN), backendRST, false,
		wantState(finC|rstB|closedR, true, closed{0, 0, 0, 1}))
	// The kind of a terminal pair never changes: a RST after both FINs is
	// recorded and forwarded, but the pair stays in time-wait, uncounted.
	fwd("RST after both FINs is forwarded and leaves the pair CLOSED_FIN", after(clientFIN, backendFIN), backendRST, false,
		wantState(finC|finB|closedF|rstB, true, closed{}))
	fwd("client RST after both FINs leaves the pair CLOSED_FIN", after(backendFIN, func(e *dt.Env) dt.Segment {
		return cSeg(e, dt.FIN|dt.ACK, 1001, 5002, nil)
	}), clientRST, true,
		wantState(finB|initB|finC|closedF|rstC, true, closed{}))

	// An incoming RST is never answered with a RST: the output of a RST is
	// the RST itself, rewritten toward the other side.
	add(closeCase{pktCase: pktCase{
		name:   "RST is answered by nothing: XDP_TX of the rewritten RST, not a generated one",
		setup:  clientSYN,
		input:  func(e *dt.Env) ([]byte, dt.Iface) { return backendRST(e).Frame(), e.BackendIface() },
		action: dt.XDPTX,
		want: func(e *dt.Env) []byte {
			// Build the expectation by hand, not with ToClient, to pin down
			// direction, flags and sequence numbers of what leaves.
			in := backendRST(e)
			return dt.Segment{SrcMAC: e.Front.MAC, DstMAC: dt.MAC(dt.ClientIP),
				Src: netip.AddrPortFrom(dt.ListenIP, 80), Dst: cli, TTL: 63, ID: in.ID,
				Seq: 5001, Ack: 0, Flags: dt.RST, Window: in.Window}.Frame()
		},
		check: func(t *testing.T, e *dt.Env, before dataplane.Counters) {
			if c := e.Counters(t); c.ShutdownResets != before.ShutdownResets {
				t.Fatalf("a reset was generated")
			}
		},
	}})
	add(closeCase{pktCase: passCase("client RST without a pair passes untouched", func(e *dt.Env) []byte {
		return clientRST(e).Frame()
	})})
	add(closeCase{pktCase: passCase("backend RST to an SNAT port without a pair passes untouched", func(e *dt.Env) []byte {
		return backendRST(e).Frame()
	})})
	add(closeCase{pktCase: passCase("FIN without a pair passes untouched", func(e *dt.Env) []byte {
		return clientFIN(e).Frame()
	})})

	// Half-close: the open direction keeps working, byte for byte.
	fwd("client data after the backend's FIN is rewritten byte-exact", after(backendFIN),
		func(e *dt.Env) dt.Segment { return cSeg(e, dt.ACK|dt.PSH, 1001, 5002, payload) }, true,
		wantState(finB|initB, false, closed{}))
	fwd("backend data after the client's FIN is rewritten byte-exact", after(clientFIN),
		func(e *dt.Env) dt.Segment {
			s := bSeg(e, dt.ACK|dt.PSH, 5001, 1002, make([]byte, 1400))
			for i := range s.Payload {
				s.Payload[i] = byte(i * 7)
			}
			s.Options = mss[:0]
			return s
		}, false,
		wantState(finC, false, closed{}))
	// A terminal forward entry keeps the moment it became terminal as its
	// last_seen (the time-wait and reset clocks start there); packets
	// through the reverse entry still move the reverse entry's.
	frozen("final ACK in time-wait is forwarded and keeps the forward entry's terminal last_seen", after(clientFIN, backendFIN),
		func(e *dt.Env) dt.Segment { return cSeg(e, dt.ACK, 1002, 5002, nil) }, true, finC|finB|closedF, &cs)
	frozen("backend ACK in time-wait moves only the reverse entry's last_seen", after(clientFIN, backendFIN),
		func(e *dt.Env) dt.Segment { return bSeg(e, dt.ACK, 5002, 1002, nil) }, false, finC|finB|closedF, &cs)
	frozen("client data after a backend RST keeps the forward entry's terminal last_seen", after(backendRST),
		func(e *dt.Env) dt.Segment { return cSeg(e, dt.ACK|dt.PSH, 1001, 5001, payload) }, true, rstB|initB|closedR, &cs)

	// Retransmissions are recorded once.
	fwd("retransmitted first FIN changes nothing", after(clientFIN), clientFIN, true,
		wantState(finC, false, closed{}))
	fwd("retransmitted FIN after both FINs is forwarded and counted once", after(clientFIN, backendFIN), clientFIN, true,
		func(t *testing.T, e *dt.Env, before dataplane.Counters) {
			wantState(finC|finB|closedF, true, closed{})(t, e, before)
			if got := closedOf(e.Counters(t)); got != (closed{1, 0, 0, 0}) {
				t.Fatalf("closure counters %v, want exactly one client FIN", got)
			}
		})
	fwd("retransmitted RST is forwarded and counted once", after(backendRST), backendRST, false,
		func(t *testing.T, e *dt.Env, before dataplane.Counters) {
			wantState(rstB|initB|closedR, true, closed{})(t, e, before)
			if got := closedOf(e.Counters(t)); got != (closed{0, 0, 0, 1}) {
				t.Fatalf("closure counters %v, want exactly one backend RST", got)
			}
		})

	// A FIN or RST whose counterpart is missing (or belongs to another
	// generation) is forwarded with the surviving recipe and counted as an
	// invariant violation, never dropped. A lone forward entry still holds
	// the close state, so a client RST on it is also counted as a closure; a
	// lone reverse entry has nowhere to record anything.
	invariant := func(name string, toBackend bool, seg func(e *dt.Env) dt.Segment, mutate func(t *testing.T, e *dt.Env),
		wantFwdFlags uint32, wantClosed closed, entries int) {
		c := closeCase{pktCase: pktCase{name: name, setup: clientSYN, action: dt.XDPTX}, mutate: mutate}
		if toBackend {
			c.input, c.want = fromClient(seg)
		} else {
			c.input, c.want = fromBackend(seg)
		}
		c.check = func(t *testing.T, e *dt.Env, before dataplane.Counters) {
			after := e.Counters(t)
			if d := after.InvariantViolations - before.InvariantViolations; d != 1 {
				t.Fatalf("invariant violations +%d, want 1", d)
			}
			if d := closedOf(after).minus(closedOf(before)); d != wantClosed {
				t.Fatalf("closure counters moved by %v on a broken pair, want %v", d, wantClosed)
			}
			wantEntries(entries)(t, e, before)
			if p, ok := e.LookupPair(t, cli, 80); ok && p.Fwd.Flags != wantFwdFlags {
				t.Fatalf("forward flags %#x, want %#x", p.Fwd.Flags, wantFwdFlags)
			}
		}
		add(c)
	}
	dropRev := func(t *testing.T, e *dt.Env) { e.DeleteFlow(t, e.MustPair(t, cli, 80).RevKey) }
	dropFwd := func(t *testing.T, e *dt.Env) { e.DeleteFlow(t, dt.ForwardKey(cli, 80)) }
	invariant("client FIN with the reverse entry missing is forwarded and counted as an invariant violation",
		true, clientFIN, dropRev, finC, closed{}, 1)
	invariant("backend FIN with the forward entry missing is forwarded and counted as an invariant violation",
		false, backendFIN, dropFwd, 0, closed{}, 1)
	invariant("client RST with the reverse entry missing is forwarded and counted as an invariant violation",
		true, clientRST, dropRev, rstC|closedR, closed{0, 0, 1, 0}, 1)
	invariant("backend RST with the forward entry missing is forwarded and counted as an invariant violation",
		false, backendRST, dropFwd, 0, closed{}, 1)
	invariant("backend FIN on a reverse entry of another generation is forwarded and not recorded on the forward entry",
		false, backendFIN, func(t *testing.T, e *dt.Env) {
			p := e.MustPair(t, cli, 80)
			v := e.DeleteFlow(t, p.RevKey)
			v.Generation += 1000
			if err := e.DP.PutFlow(p.RevKey, v); err != nil {
				t.Fatal(err)
			}
		}, 0, closed{}, 2)

	// A new SYN meeting a terminal pair replaces it with a fresh pair; one
	// meeting a half-closed pair is a retransmission and reuses it.
	replace := func(name string, setup func(e *dt.Env) []dt.Segment) {
		var old dt.Pair
		syn := func(e *dt.Env) dt.Segment { s := synFrom(e, cli, 80); s.Seq = 90000; return s }
		add(closeCase{
			pktCase: pktCase{
				name:   name,
				setup:  setup,
				input:  onFront(func(e *dt.Env) []byte { return syn(e).Frame() }),
				action: dt.XDPTX,
				// round robin: the second pair goes to backend 2, whose SNAT cursor starts at 40000
				want: func(e *dt.Env) []byte {
					return e.ToBackend(syn(e), netip.AddrPortFrom(dt.OneArmBackends[1], 8080), firstSNAT).Frame()
				},
				check: func(t *testing.T, e *dt.Env, before dataplane.Counters) {
					p := e.MustPair(t, cli, 80)
					if p.Fwd.Generation == old.Fwd.Generation || p.Rev.Generation != p.Fwd.Generation {
						t.Fatalf("generations: old %d, new forward %d reverse %d; want a fresh shared one",
							old.Fwd.Generation, p.Fwd.Generation, p.Rev.Generation)
					}
					if p.Fwd.Flags != 0 {
						t.Fatalf("fresh pair has flags %#x", p.Fwd.Flags)
					}
					if p.Fwd.BackendId != 1 || p.RevKey == old.RevKey {
						t.Fatalf("fresh pair on backend %d reverse %v; old reverse %v", p.Fwd.BackendId, p.RevKey, old.RevKey)
					}
					if _, err := e.DP.LookupFlow(old.RevKey); err != dataplane.ErrNotFound {
						t.Fatalf("old reverse entry %v still present (err %v)", old.RevKey, err)
					}
					c := e.Counters(t)
					if c.PairsReplaced-before.PairsReplaced != 1 || c.PairsCreated-before.PairsCreated != 1 {
						t.Fatalf("pairs replaced +%d created +%d, want +1 +1",
							c.PairsReplaced-before.PairsReplaced, c.PairsCreated-before.PairsCreated)
					}
					if d := closedOf(c).minus(closedOf(before)); d != (closed{}) {
						t.Fatalf("closure counters moved by %v on replacement", d)
					}
					wantEntries(2)(t, e, before)
				},
			},
			mutate: func(t *testing.T, e *dt.Env) { old = e.MustPair(t, cli, 80) },
		})
	}
	replace("new SYN on a time-wait pair creates a fresh pair with a new generation", after(clientFIN, backendFIN))
	replace("new SYN on a client-RST pair creates a fresh pair with a new generation", after(clientRST))
	replace("new SYN on a backend-RST pair creates a fresh pair with a new generation", after(backendRST))
	var half dt.Pair
	add(closeCase{
		pktCase: pktCase{
			name:   "SYN on a half-closed pair reuses it",
			setup:  after(clientFIN),
			input:  onFront(func(e *dt.Env) []byte { return synFrom(e, cli, 80).Frame() }),
			action: dt.XDPTX,
			want:   func(e *dt.Env) []byte { return e.ToBackend(synFrom(e, cli, 80), b1, firstSNAT).Frame() },
			check: func(t *testing.T, e *dt.Env, before dataplane.Counters) {
				p := e.MustPair(t, cli, 80)
				c := e.Counters(t)
				if p.Fwd.Generation != half.Fwd.Generation || c.PairsReplaced != before.PairsReplaced || c.SYNReused-before.SYNReused != 1 {
					t.Fatalf("generation %d (was %d), replaced +%d, reused +%d; want the same pair reused",
						p.Fwd.Generation, half.Fwd.Generation, c.PairsReplaced-before.PairsReplaced, c.SYNReused-before.SYNReused)
				}
			},
		},
		mutate: func(t *testing.T, e *dt.Env) { half = e.MustPair(t, cli, 80) },
	})
	return cs
}

func TestCloseFixtures(t *testing.T) {
	for _, c := range closeCases() {
		t.Run(c.name, func(t *testing.T) {
			tc := c.pktCase
			if c.mutate != nil {
				in := tc.input
				tc.input = func(e *dt.Env) ([]byte, dt.Iface) {
					c.mutate(t, e)
					return in(e)
				}
			}
			runCase(t, tc)
		})
	}
}

// frozen adds a case whose input goes through a pair that is already
// terminal, at a later tick than the packet that ended it: the forward
// entry's last_seen must not move (it is the terminal moment); the reverse
// entry's moves only when the input came through it.
func frozen(name string, setup func(e *dt.Env) []dt.Segment, seg func(e *dt.Env) dt.Segment, toBackend bool,
	flags uint32, cs *[]closeCase) {
	var old dt.Pair
	c := closeCase{
		pktCase: pktCase{name: name, setup: setup, action: dt.XDPTX},
		mutate: func(t *testing.T, e *dt.Env) {
			old = e.MustPair(t, cli, 80)
			if !dataplane.Terminal(old.Fwd.Flags) {
				t.Fatalf("setup left the pair open (flags %#x)", old.Fwd.Flags)
			}
			// the input runs at a later tick than every setup frame
			e.WaitTick(t, e.Now(t))
		},
	}
	if toBackend {
		c.input, c.want = fromClient(seg)
	} else {
		c.input, c.want = fromBackend(seg)
	}
	c.check = func(t *testing.T, e *dt.Env, before dataplane.Counters) {
		wantState(flags, true, closed{})(t, e, before)
		p := e.MustPair(t, cli, 80)
		if p.Fwd.LastSeen != old.Fwd.LastSeen {
			t.Fatalf("forward last_seen moved from %d to %d on a terminal pair", old.Fwd.LastSeen, p.Fwd.LastSeen)
		}
		now := e.Now(t)
		switch {
		case toBackend && p.Rev.LastSeen != old.Rev.LastSeen:
			t.Fatalf("reverse last_seen moved from %d to %d without a packet from the backend", old.Rev.LastSeen, p.Rev.LastSeen)
		case !toBackend && dataplane.Widen(now, p.Rev.LastSeen) <= dataplane.Widen(now, old.Rev.LastSeen):
			t.Fatalf("reverse last_seen %d, was %d: want it moved on by the backend's packet", p.Rev.LastSeen, old.Rev.LastSeen)
		}
	}
	*cs = append(*cs, c)
}
