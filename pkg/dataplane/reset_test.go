package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// ResetBackend (id reuse, issue 14) zeroes the SNAT port bitmap of the
// backend id and restarts its SNAT port cursor; ResetMember zeroes every
// per-backend counter cell of a member id -- traffic, pair events, the
// reaper's counts, the handshake histogram. Other ids keep theirs, and
// each reset leaves the other kind alone (member ids are not backend ids
// here: backend id i is member i+10).
func TestResetBackend(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	one := func(id int) {
		t.Helper()
		if err := e.DP.SetRoutable(0, []dataplane.BackendRef{{ID: uint32(id), Member: uint32(id + 10), IP: e.Backends[id]}}); err != nil {
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
	if stats[10].Opened != 2 || stats[10].SentPackets == 0 || stats[10].ClosedRST != 1 || hists[10].Count != 1 || reaped[10].Reset != 1 {
		t.Fatalf("member 10 before the reset: stats %+v, handshakes %+v, reaped %+v", stats[10], hists[10], reaped[10])
	}
	if stats[0] != (dataplane.BackendStats{}) {
		t.Fatalf("member 0 (backend id 0's own number) counted %+v", stats[0])
	}
	if err := e.DP.ResetBackend(0); err != nil {
		t.Fatal(err)
	}
	wantTaken(t, e, 0)
	wantTaken(t, e, 1, k3.p.SNATPort())
	if s, h, r := backendCells(t, e); s[10] != stats[10] || h[10] != hists[10] || r[10] != reaped[10] {
		t.Fatalf("member 10 after backend id 0's reset: stats %+v, handshakes %+v, reaped %+v; want them kept", s[10], h[10], r[10])
	}
	if err := e.DP.ResetMember(10); err != nil {
		t.Fatal(err)
	}
	stats2, hists2, reaped2 := backendCells(t, e)
	if stats2[10] != (dataplane.BackendStats{}) || hists2[10] != (dataplane.Histogram{}) || reaped2[10] != (dataplane.ReapedCounts{}) {
		t.Fatalf("member 10 after the reset: stats %+v, handshakes %+v, reaped %+v; want all zero", stats2[10], hists2[10], reaped2[10])
	}
	if stats2[11] != stats[11] || hists2[11] != hists[11] || hists2[11].Count != 1 {
		t.Fatalf("member 11 after member 10's reset: stats %+v, handshakes %+v; want %+v, %+v", stats2[11], hists2[11], stats[11], hists[11])
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
	if err := e.DP.ResetMember(uint32(dataplane.MaxMembers)); err == nil {
		t.Fatalf("ResetMember(%d) succeeded", dataplane.MaxMembers)
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
