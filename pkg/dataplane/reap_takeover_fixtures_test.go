package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// The reaper never deletes a freed reverse entry while an allocation holds
// its port's bit (issue 27 finding 8: a delete by key after a generation
// check could remove the reverse entry a takeover on another CPU had just
// written under the same key). With the bit held, as a takeover holds it
// between its claim and its write, reaping the reset pair removes the
// forward entry only; once the bit is released, the lone reverse entry
// is reaped and the port is free.
func TestReaperLeavesAFreedPortItsTakerHolds(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40000})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	k.forward("client RST", k.client(dt.RST|dt.ACK, isnC+1, isnB+1, 0, nil), counted{ClosedClientRST: 1})
	p := k.now()
	if p.Rev.Flags&dataplane.FlagPortFreed == 0 {
		t.Fatalf("reverse flags %#x: want FlagPortFreed", p.Rev.Flags)
	}
	wantTaken(t, e, 0)
	if err := e.DP.FixtureSetSNATPortBit(0, 0, 40000, true); err != nil { // a taker's claim
		t.Fatal(err)
	}
	reqs := []dataplane.ReapRequest{{Key: p.FwdKey, Generation: p.Fwd.Generation, Op: dataplane.ReapReset}}
	if err := e.DP.Reap(reqs, reapClock(e.Now(t))); err != nil {
		t.Fatal(err)
	}
	if reqs[0].Result != dataplane.Reaped {
		t.Fatalf("reaping the reset pair: %v, want Reaped", reqs[0].Result)
	}
	flows := e.Flows(t)
	if _, ok := flows[p.FwdKey]; ok {
		t.Fatal("the forward entry is still there")
	}
	if v, ok := flows[p.RevKey]; !ok || v.Generation != p.Rev.Generation {
		t.Fatalf("the reverse entry under the taker's claim: %+v (present %v), want it left", v, ok)
	}
	wantTaken(t, e, 0, 40000) // the claim is the taker's to release

	// The taker releases its claim (too early to take over): the lone
	// reverse entry goes, and the port is free.
	if err := e.DP.FixtureSetSNATPortBit(0, 0, 40000, false); err != nil {
		t.Fatal(err)
	}
	reqs = []dataplane.ReapRequest{{Key: p.RevKey, Generation: p.Rev.Generation, Op: dataplane.ReapLone}}
	if err := e.DP.Reap(reqs, reapClock(e.Now(t))); err != nil {
		t.Fatal(err)
	}
	if reqs[0].Result != dataplane.Reaped {
		t.Fatalf("reaping the lone reverse entry: %v, want Reaped", reqs[0].Result)
	}
	if _, ok := e.Flows(t)[p.RevKey]; ok {
		t.Fatal("the lone reverse entry is still there")
	}
	wantTaken(t, e, 0)
}

// Neither does a SYN that replaces a reset pair from the same client port
// (bpf/xlb.c replace_pair): the old pair's freed reverse entry stays while
// an allocation holds its port's bit, and the new pair takes another port.
func TestReplaceLeavesAFreedPortItsTakerHolds(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40001})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	k.forward("client RST", k.client(dt.RST|dt.ACK, isnC+1, isnB+1, 0, nil), counted{ClosedClientRST: 1})
	old := k.now()
	if err := e.DP.FixtureSetSNATPortBit(0, 0, old.SNATPort(), true); err != nil { // a taker's claim
		t.Fatal(err)
	}
	n := dialWith(t, e, 33000, synOptions(-1), counted{PairsCreated: 1, PairsReplaced: 1})
	if n.p.SNATPort() == old.SNATPort() {
		t.Fatalf("the new pair took the port the taker holds (%d)", old.SNATPort())
	}
	if v, ok := e.Flows(t)[old.RevKey]; !ok || v.Generation != old.Rev.Generation {
		t.Fatalf("the old pair's reverse entry under the taker's claim: %+v (present %v), want it left", v, ok)
	}
}
