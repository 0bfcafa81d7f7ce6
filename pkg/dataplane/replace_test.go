package dataplane_test

import (
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// A SYN replacing a terminal pair removes the old reverse entry only if it
// still belongs to that pair: an entry of another generation at the same
// key (the key was freed and reused) is left alone.
func TestReplaceKeepsForeignReverseEntry(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	e.MustRun(t, synFrom(e, cli, 80).Frame(), e.Front, dt.XDPTX)
	e.MustRun(t, clientRST(e).Frame(), e.Front, dt.XDPTX)
	fk := dataplane.NewFlowKey(cli, netip.AddrPortFrom(dt.ListenIP, 80), dataplane.DirClient)
	fv, err := e.DP.LookupFlow(fk)
	if err != nil {
		t.Fatal(err)
	}
	// another pair took the reverse key meanwhile
	foreign, err := e.DP.TakeFlow(fv.Peer(fk))
	if err != nil {
		t.Fatal(err)
	}
	foreign.Generation = fv.Generation + 1000
	if err := e.DP.PutFlow(fv.Peer(fk), foreign); err != nil {
		t.Fatal(err)
	}
	e.MustRun(t, synFrom(e, cli, 80).Frame(), e.Front, dt.XDPTX)
	got, err := e.DP.LookupFlow(fv.Peer(fk))
	if err != nil || got.Generation != foreign.Generation {
		t.Fatalf("foreign reverse entry after the replacing SYN: %+v, %v", got, err)
	}
	nv, err := e.DP.LookupFlow(fk)
	if err != nil || nv.Generation == fv.Generation || nv.Peer(fk) == fv.Peer(fk) {
		t.Fatalf("replacement pair %+v err %v: want a new generation on another SNAT port", nv, err)
	}
}
