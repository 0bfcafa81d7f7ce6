package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// ResetBackend (id reuse, issue 14) zeroes every per-backend cell of the
// id -- traffic, pair events, the reaper's counts, the handshake
// histogram, the SNAT port bitmap -- and restarts its SNAT port cursor;
// other ids keep theirs.
func TestResetBackend(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	one := func(id int) {
		t.Helper()
		if err := e.DP.SetRoutable([]dataplane.BackendRef{{ID: uint32(id), IP: e.Backends[id]}}); err != nil {
			t.Fatal(err)
		}
	}
	// Backend 0: a pair handshaken, carrying data, reset by the client and
	// reaped; a second one whose entries go (the caller's promise: no pair
	// references the id any more) with its port still taken.
	one(0)
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(6), 1000)
	k.forward("client data", k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, []byte("hello")), counted{})
	k.forward("client RST", k.client(dt.RST|dt.ACK, isnC+6, isnB+1, 0, nil), counted{ClosedClientRST: 1})
	reapWant(t, e, clockAt(e.Now(t)), fwdReq(k.now(), dataplane.ReapReset), dataplane.Reaped)
	k2 := dial(t, e, 33001, synOptions(7))
	wantTaken(t, e, 0, k2.p.SNATPort())
	e.DeleteFlow(t, k2.p.FwdKey)
	e.DeleteFlow(t, k2.p.RevKey)
	// Backend 1: a handshake of its own.
	one(1)
	k3 := dial(t, e, 33002, synOptions(7))
	k3.forward("SYN-ACK", k3.synAck(), counted{})

	stats, hists, reaped := backendCells(t, e)
	if stats[0].Opened != 2 || stats[0].SentPackets == 0 || stats[0].ClosedRST != 1 || hists[0].Count != 1 || reaped[0].Reset != 1 {
		t.Fatalf("backend 0 before the reset: stats %+v, handshakes %+v, reaped %+v", stats[0], hists[0], reaped[0])
	}
	if err := e.DP.ResetBackend(0); err != nil {
		t.Fatal(err)
	}
	stats2, hists2, reaped2 := backendCells(t, e)
	if stats2[0] != (dataplane.BackendStats{}) || hists2[0] != (dataplane.Histogram{}) || reaped2[0] != (dataplane.ReapedCounts{}) {
		t.Fatalf("backend 0 after the reset: stats %+v, handshakes %+v, reaped %+v; want all zero", stats2[0], hists2[0], reaped2[0])
	}
	wantTaken(t, e, 0)
	if stats2[1] != stats[1] || hists2[1] != hists[1] || hists2[1].Count != 1 {
		t.Fatalf("backend 1 after backend 0's reset: stats %+v, handshakes %+v; want %+v, %+v", stats2[1], hists2[1], stats[1], hists[1])
	}
	wantTaken(t, e, 1, k3.p.SNATPort())

	// The cursor starts again at the range's start (fixtures use fixed
	// cursors): without the reset the next pair would take the third port.
	one(0)
	if k4 := dial(t, e, 33003, synOptions(7)); k4.p.SNATPort() != e.Settings.SNATPortLo {
		t.Fatalf("first pair toward backend 0 after the reset took SNAT port %d, want %d", k4.p.SNATPort(), e.Settings.SNATPortLo)
	}
	if err := e.DP.ResetBackend(dataplane.MaxBackends); err == nil {
		t.Fatalf("ResetBackend(%d) succeeded", dataplane.MaxBackends)
	}
}

// backendCells reads every backend id's traffic, handshakes and reaper counts.
func backendCells(t *testing.T, e *dt.Env) ([]dataplane.BackendStats, []dataplane.Histogram, []dataplane.ReapedCounts) {
	t.Helper()
	stats, err := e.DP.AllBackendStats()
	if err != nil {
		t.Fatal(err)
	}
	reaped, err := e.DP.AllReapedCounts()
	if err != nil {
		t.Fatal(err)
	}
	return stats, histograms(t, e), reaped
}
