package dataplane_test

import (
	"testing"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// The SNAT port bitmap rebuild runs while the program is live (the
// migration's second copy, Pin, a Configure that lays the bitmap out
// anew). A pair the program closes after the rebuild's walk read its
// reverse entry frees its port for good: the rebuild sets only bits the
// kernel finds held just then, so the port is free afterwards and the
// other pair's stays taken (issue 27 finding 4: whole words written back
// kept the freed port's bit set, and the port was lost).
func TestSNATRebuildKeepsAPortFreedDuringIt(t *testing.T) {
	for _, w := range freeingCloses {
		t.Run(w.name, func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40001})
			stay := dial(t, e, 33000, synOptions(-1))
			stay.handshake(synAckOptions(-1), 1000)
			k := dial(t, e, 33001, synOptions(-1))
			k.handshake(synAckOptions(-1), 1000)
			wantTaken(t, e, 0, 40000, 40001)
			frames := w.frames(k)
			for _, s := range frames[:len(frames)-1] {
				k.forward("half-close", s, counted{})
			}
			ran := false
			e.DP.FixtureOnSNATRebuildWalk(func() {
				k.forward("close", frames[len(frames)-1], w.counted)
				ran = true
			})
			if err := e.DP.RebuildSNATPorts(); err != nil {
				t.Fatal(err)
			}
			if !ran {
				t.Fatal("the rebuild did not run the close between its walk and its changes")
			}
			wantTaken(t, e, 0, stay.p.SNATPort())
			// And a rebuild with nothing in between changes nothing.
			e.DP.FixtureOnSNATRebuildWalk(nil)
			if err := e.DP.RebuildSNATPorts(); err != nil {
				t.Fatal(err)
			}
			wantTaken(t, e, 0, stay.p.SNATPort())
		})
	}
}

// A pair the program creates after the rebuild's walk keeps its port's
// bit: the rebuild finds the bit without a holder in its walk, and the
// kernel, asked to clear it, finds the new reverse entry and leaves it.
func TestSNATRebuildKeepsAPortTakenDuringIt(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40001})
	stay := dial(t, e, 33000, synOptions(-1))
	stay.handshake(synAckOptions(-1), 1000)
	var k *tcpConn
	e.DP.FixtureOnSNATRebuildWalk(func() { k = dial(t, e, 33001, synOptions(-1)) })
	if err := e.DP.RebuildSNATPorts(); err != nil {
		t.Fatal(err)
	}
	if k == nil {
		t.Fatal("the rebuild did not run the SYN between its walk and its changes")
	}
	wantTaken(t, e, 0, 40000, 40001)
	k.handshake(synAckOptions(-1), 1000)
}
