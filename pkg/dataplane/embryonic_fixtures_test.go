package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Embryonic pair fixtures (issue 13 "Embryonic pairs", DESIGN §6b): a pair
// is established when the client ACKs the backend's SYN-ACK. Until then no
// packet refreshes it, so its forward entry keeps the SYN's time however
// many SYN-ACKs (or SYNs) go through, and ReapEmbryonic removes it
// EmbryonicTTL after the SYN, counted per backend as Embryonic. The SYN
// posts CloseOpen with that time. An established pair is never an
// embryonic one, and a SYN never displaces it.

// SYN-ACK retransmissions do not keep a half-open pair alive.
func TestEmbryonicExpiresDespiteSYNACKs(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	ev := closeEvents(t, e)
	k := dial(t, e, 33000, synOptions(7))
	p := k.p
	synAt := dataplane.Widen(e.Now(t), p.Fwd.LastSeen)
	if got := drain(t, ev); len(got) != 1 || dataplane.CloseKind(got[0].Kind) != dataplane.CloseOpen ||
		got[0].Key != p.FwdKey || got[0].Generation != p.Fwd.Generation || got[0].Time != p.Fwd.LastSeen || got[0].BackendId != p.Fwd.BackendId {
		t.Fatalf("events after the SYN %+v, want one CloseOpen for %v gen %d at %d", got, p.FwdKey, p.Fwd.Generation, p.Fwd.LastSeen)
	}
	if p.Fwd.Flags != dataplane.FlagTSSyn {
		t.Fatalf("forward flags %#x after the SYN, want FlagTSSyn alone (its timestamps)", p.Fwd.Flags)
	}

	// The backend's SYN-ACK, retransmitted, a tick apart each; the client
	// retransmits its SYN too. None of it moves either last_seen.
	synAck := k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil)
	synAck.Options = synAckOptions(6)
	for range 3 {
		e.WaitTick(t, e.Now(t))
		k.forward("SYN-ACK", synAck, counted{})
	}
	syn := k.client(dt.SYN, isnC, 0, synWindow, nil)
	syn.Options = synOptions(7)
	k.forward("retransmitted SYN", syn, counted{SYNReused: 1})
	now := k.wantFlags(dataplane.FlagSYNACK, dataplane.FlagEstablished)
	if now.Fwd.LastSeen != p.Fwd.LastSeen || now.Rev.LastSeen != p.Rev.LastSeen {
		t.Fatalf("last_seen %d/%d after SYN-ACKs, want the SYN's %d/%d", now.Fwd.LastSeen, now.Rev.LastSeen, p.Fwd.LastSeen, p.Rev.LastSeen)
	}
	if n := drain(t, ev); len(n) != 0 {
		t.Fatalf("events %+v after the SYN-ACKs, want none", n)
	}

	// Exactly EmbryonicTTL after the SYN, not a tick before.
	reapWant(t, e, reapClock(synAt+embryonicTTL-1), fwdReq(now, dataplane.ReapEmbryonic), dataplane.ReapKept)
	reapWant(t, e, reapClock(synAt+embryonicTTL), staleReq(now, dataplane.ReapEmbryonic), dataplane.ReapGone)
	wantPair(t, e, now, true)
	reapWant(t, e, reapClock(synAt+embryonicTTL), fwdReq(now, dataplane.ReapEmbryonic), dataplane.Reaped)
	wantPair(t, e, now, false)
	wantReaped(t, e, map[int]dataplane.ReapedCounts{k.id(): {Embryonic: 1}})
	wantTaken(t, e, k.id())
	if n := len(e.Flows(t)); n != 0 {
		t.Fatalf("%d entries left, want none", n)
	}
}

// The client's ACK after the SYN-ACK establishes the pair: it refreshes
// both entries from then on and the embryonic rule never takes it.
func TestEmbryonicEstablishedIsKept(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(7))
	synAt := dataplane.Widen(e.Now(t), k.p.Fwd.LastSeen)
	e.WaitTick(t, e.Now(t))
	k.handshake(synAckOptions(6), 1000)
	p := k.wantFlags(dataplane.FlagSYNACK|dataplane.FlagEstablished, 0)
	if p.Rev.Flags&dataplane.FlagEstablished == 0 {
		t.Fatalf("reverse flags %#x, want FlagEstablished on both entries", p.Rev.Flags)
	}
	if dataplane.Widen(e.Now(t), p.Fwd.LastSeen) <= synAt {
		t.Fatalf("forward last_seen %d is still the SYN's (%d): the ACK that established the pair must refresh it", p.Fwd.LastSeen, synAt)
	}
	reapWant(t, e, reapClock(synAt+100*embryonicTTL), fwdReq(p, dataplane.ReapEmbryonic), dataplane.ReapKept)
	wantPair(t, e, p, true)

	// A SYN on the established pair is a retransmission, never a new pair.
	syn := k.client(dt.SYN, isnC, 0, synWindow, nil)
	syn.Options = synOptions(7)
	k.forward("SYN on the established pair", syn, counted{SYNReused: 1})
	if q := k.now(); q.Fwd.Generation != p.Fwd.Generation {
		t.Fatalf("generation %d after a SYN, was %d", q.Fwd.Generation, p.Fwd.Generation)
	}
	wantReaped(t, e, nil)
}

// Only an ACK after the SYN-ACK counts: a client ACK before it (no SYN-ACK
// seen) leaves the pair embryonic.
func TestEmbryonicACKBeforeSYNACK(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(-1))
	synAt := dataplane.Widen(e.Now(t), k.p.Fwd.LastSeen)
	e.WaitTick(t, e.Now(t))
	k.forward("client ACK before any SYN-ACK", k.client(dt.ACK, isnC+1, isnB+1, 1000, nil), counted{})
	p := k.wantFlags(0, dataplane.FlagSYNACK|dataplane.FlagEstablished)
	if p.Fwd.LastSeen != k.p.Fwd.LastSeen {
		t.Fatalf("forward last_seen moved from %d to %d on an embryonic pair", k.p.Fwd.LastSeen, p.Fwd.LastSeen)
	}
	reapWant(t, e, reapClock(synAt+embryonicTTL), fwdReq(p, dataplane.ReapEmbryonic), dataplane.Reaped)
	wantReaped(t, e, map[int]dataplane.ReapedCounts{k.id(): {Embryonic: 1}})
}

// A terminal embryonic pair (reset before its handshake completed) belongs
// to the reset rule: ReapEmbryonic keeps it, ReapReset removes it.
func TestEmbryonicResetIsTheResetRules(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(-1))
	synAt := dataplane.Widen(e.Now(t), k.p.Fwd.LastSeen)
	k.forward("backend RST answering the SYN", k.backend(dt.RST|dt.ACK, 0, isnC+1, 0, nil), counted{ClosedBackendRST: 1})
	p := k.wantFlags(closedR, dataplane.FlagEstablished)
	reapWant(t, e, reapClock(synAt+100*embryonicTTL), fwdReq(p, dataplane.ReapEmbryonic), dataplane.ReapKept)
	reapWant(t, e, reapClock(synAt+100*embryonicTTL), fwdReq(p, dataplane.ReapReset), dataplane.Reaped)
	wantReaped(t, e, map[int]dataplane.ReapedCounts{k.id(): {Reset: 1}})
}
