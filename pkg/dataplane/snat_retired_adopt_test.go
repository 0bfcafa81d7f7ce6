package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// A start that adopts the pins after a crash, with snat.port_range moved
// in xlb.yaml meanwhile (issue 27 finding 3): the pinned config is the
// dead process's, so its range is retired; the adopted pairs' backend
// packets are still forwarded, new pairs take ports of the new range (a
// bitmap of another size, rebuilt), and a walk pass narrows the retired
// range to the ports the adopted pairs hold.
func TestAdoptRetiresMovedSNATRange(t *testing.T) {
	l := newPinLab(t)
	first := l.pinnedWith(t, 64, 3) // one pair per backend, 40000-40009
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	moved := dataplane.SNATSpace{Addrs: 1, PortLo: 41000, PortHi: 41099}
	var dp *dataplane.Dataplane
	err := l.e.Do(func() (err error) {
		dp, err = dataplane.Load(dataplane.Options{SNAT: moved, MaxConnections: 64, StateDir: l.dir, NetnsCookie: l.cookie})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Release() })
	s := l.e.Settings
	s.SNATPortLo, s.SNATPortHi = moved.PortLo, moved.PortHi
	if _, err := dp.Configure(s); err != nil {
		t.Fatal(err)
	}
	if err := dp.SetRoutable(0, l.refs); err != nil {
		t.Fatal(err)
	}
	old := flows(t, dp)
	wantSpaces(t, "retired", dp.RetiredSNAT(), dataplane.RetiredSNAT{Addr: l.e.SNAT, PortLo: 40000, PortHi: 40009})

	held, n := map[uint16]bool{}, 0 // each backend has its own ports
	for k, v := range old {
		if k.Direction() != dataplane.DirBackend {
			continue
		}
		held[k.Dst().Port()] = true
		n++
		reply := l.e.FromBackend(k.Src(), k.Dst().Port(), dt.ACK, 5001, 1001, nil)
		out := l.run(t, dp, reply, dt.XDPTX)
		if got, err := dt.Decode(out); err != nil || got.Dst() != v.NewDst() {
			t.Fatalf("adopted pair's backend packet to %v left for %v (%v), want it sent to %v", k.Dst(), got.Dst(), err, v.NewDst())
		}
	}
	if n != 3 {
		t.Fatalf("%d adopted pairs, want 3", n)
	}

	l.open(t, dp, 10, 3)
	for k := range flows(t, dp) {
		if _, was := old[k]; was || k.Direction() != dataplane.DirBackend {
			continue
		}
		if p := k.Dst().Port(); p < moved.PortLo || p > moved.PortHi {
			t.Fatalf("new pair on SNAT port %d, want %d-%d", p, moved.PortLo, moved.PortHi)
		}
	}

	u := dp.BeginRetiredSNATUse()
	for k, v := range flows(t, dp) {
		u.Visit(&k, &v)
	}
	if _, err := dp.ShrinkRetiredSNAT(u); err != nil {
		t.Fatal(err)
	}
	lo, hi := uint16(65535), uint16(0)
	for p := range held {
		lo, hi = min(lo, p), max(hi, p)
	}
	wantSpaces(t, "retired", dp.RetiredSNAT(), dataplane.RetiredSNAT{Addr: l.e.SNAT, PortLo: lo, PortHi: hi})
}
