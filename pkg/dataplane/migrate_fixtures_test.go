package dataplane_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// A migration's second copy applies exactly what the old program did
// between the first copy and its replacement (issue 27 finding 2): the
// old program takes over a freed SNAT port (its reverse key gets the new
// pair's recipe), replaces a terminal pair with a new SYN from the same
// client port (both keys get the new pair), and its reaper removes a
// reset pair. Afterwards the new flow map equals the old one entry by
// entry, and the new SNAT bitmap holds exactly the old one's ports. The
// new program updating a stale copy in between (a packet by the old
// recipe) does not keep it.
func TestMigrationCatchUpAppliesTheOldProgram(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40003})
	conns := map[string]*tcpConn{}
	for i, name := range []string{"taken over", "replaced", "reaped", "live"} {
		k := dial(t, e, uint16(33000+i), synOptions(-1))
		k.handshake(synAckOptions(-1), 1000)
		conns[name] = k
	}
	wantTaken(t, e, 0, 40000, 40001, 40002, 40003)
	for _, name := range []string{"taken over", "replaced", "reaped"} {
		k := conns[name]
		k.forward("client RST", k.client(dt.RST|dt.ACK, isnC+1, isnB+1, 0, nil), counted{ClosedClientRST: 1})
	}
	// The freed port of "taken over" is old enough to take over.
	guard, err := e.DP.FixtureSNATReuseTicks()
	if err != nil {
		t.Fatal(err)
	}
	stampRev(t, e, conns["taken over"].now(), e.Now(t)-guard)

	next, err := dataplane.Load(dataplane.Options{SNAT: dataplane.SNATSpace{Addrs: 1, PortLo: 40000, PortHi: 40003}, MaxConnections: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	if err := e.Do(func() error { _, err := next.Configure(e.Settings); return err }); err != nil {
		t.Fatal(err)
	}
	mig, err := e.DP.FixtureMigrate(next)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mig.Close() })
	if got, want := flowsOf(t, next), e.Flows(t); !maps.Equal(got, want) {
		t.Fatalf("after the first copy the new flow map differs:\n%s", flowDiff(got, want))
	}

	// Only the old program runs: a takeover, a replacement, a reap.
	taker := dialWith(t, e, 33010, synOptions(-1), counted{PairsCreated: 1, SNATTakeovers: 1})
	if taker.p.SNATPort() != conns["taken over"].p.SNATPort() {
		t.Fatalf("the new pair took SNAT port %d, want %d (the freed one)", taker.p.SNATPort(), conns["taken over"].p.SNATPort())
	}
	replacer := dialWith(t, e, 33001, synOptions(-1), counted{PairsCreated: 1, PairsReplaced: 1})
	if replacer.p.Fwd.Generation == conns["replaced"].p.Fwd.Generation {
		t.Fatal("the SYN on the terminal pair did not replace it")
	}
	r := conns["reaped"].p
	reqs := []dataplane.ReapRequest{{Key: r.FwdKey, Generation: r.Fwd.Generation, Op: dataplane.ReapReset}}
	if err := e.DP.Reap(reqs, reapClock(e.Now(t))); err != nil {
		t.Fatal(err)
	}
	if reqs[0].Result != dataplane.Reaped {
		t.Fatalf("the reaper answered %v, want Reaped", reqs[0].Result)
	}
	// The new map's stale copy of the taken-over reverse entry sees a
	// packet (as the new program would update it by its stale recipe).
	stale := conns["taken over"].p
	v, err := next.LookupFlow(stale.RevKey)
	if err != nil {
		t.Fatal(err)
	}
	v.LastSeen++
	if err := next.FlowMap().Update(&stale.RevKey, &v, ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}

	if err := mig.CatchUp(); err != nil {
		t.Fatal(err)
	}
	if got, want := flowsOf(t, next), e.Flows(t); !maps.Equal(got, want) {
		t.Fatalf("after the second copy the new flow map differs from the old one:\n%s", flowDiff(got, want))
	}
	for id := range 1 {
		got, err := next.FixtureTakenSNATPorts(uint32(id), 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := takenPorts(t, e, id); !slices.Equal(got, want) {
			t.Fatalf("SNAT ports taken toward backend %d in the new bitmap: %v, the old one's: %v", id, got, want)
		}
	}
	// The old program's state: the taker and the replacer hold ports,
	// the reaped pair's is free.
	wantTaken(t, e, 0, slices.Sorted(slices.Values([]uint16{taker.p.SNATPort(), replacer.p.SNATPort(), conns["live"].p.SNATPort()}))...)
}

// flowsOf reads a data path's whole flow map.
func flowsOf(t *testing.T, d *dataplane.Dataplane) map[dataplane.FlowKey]dataplane.FlowValue {
	t.Helper()
	out := map[dataplane.FlowKey]dataplane.FlowValue{}
	w := d.NewFlowWalk(64)
	for end := false; !end; {
		n, e, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		end = e
		for i := range n {
			out[w.Keys[i]] = w.Values[i]
		}
	}
	return out
}

// flowDiff lists the keys whose entries differ between two flow maps.
func flowDiff(got, want map[dataplane.FlowKey]dataplane.FlowValue) string {
	var s string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			s += "missing " + k.String() + "\n"
		} else if g != w {
			s += "stale " + k.String() + "\n"
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			s += "extra " + k.String() + "\n"
		}
	}
	return s
}
