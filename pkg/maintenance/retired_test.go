package maintenance_test

import (
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// A config that stops using a SNAT address retires it (issue 27 finding
// 3); each complete walk pass narrows the retired space to the ports
// reverse entries still hold and hands what it released to
// Options.RetiredSNATReleased; the space is dropped once the last pair on
// it is gone. The pair's backend packets are forwarded meanwhile.
func TestRetiredSNATReleasedAfterLastPair(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		extra := testnet.XLBExtraIP(0)
		o.ExtraSNAT = []netip.Addr{extra}
		var mu sync.Mutex
		var released [][]dataplane.RetiredSNAT
		r := newRig(t, o, maintenance.Options{RetiredSNATReleased: func(rs []dataplane.RetiredSNAT) error {
			mu.Lock()
			defer mu.Unlock()
			released = append(released, rs)
			return nil
		}})
		releases := func() [][]dataplane.RetiredSNAT {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(released)
		}
		c := r.open(33000)
		p := c.pair()
		old := p.Fwd.NewSrc()
		if old.Addr() != r.e.SNAT {
			t.Fatalf("pair from %v, want SNAT address %v", old, r.e.SNAT)
		}
		s := r.e.Settings
		s.SNAT = []netip.Addr{extra, testnet.XLBExtraIP(1)}
		if _, err := r.e.DP.Configure(s); err != nil {
			t.Fatal(err)
		}
		lo, hi := s.SNATPortLo, s.SNATPortHi
		wantRetired(t, r.e, dataplane.RetiredSNAT{Addr: r.e.SNAT, PortLo: lo, PortHi: hi})

		r.cycle()
		whole := dataplane.RetiredSNAT{Addr: r.e.SNAT, PortLo: lo, PortHi: hi}
		held := dataplane.RetiredSNAT{Addr: r.e.SNAT, PortLo: old.Port(), PortHi: old.Port()}
		wantRetired(t, r.e, held)
		if got := releases(); len(got) != 1 || !slices.Equal(got[0], []dataplane.RetiredSNAT{whole}) {
			t.Fatalf("released %v, want [[%v]]", got, whole)
		}
		c.send(c.fromBackend(dt.ACK, 5001, 1001)) // still the pair's
		r.cycle()
		if got := releases(); len(got) != 1 {
			t.Fatalf("released %v, want nothing more while the pair lives", got)
		}

		c.clientRST()
		r.cycle() // the walk reads the reset pair before the reaper removes it
		r.wantEntries(0)
		wantRetired(t, r.e, held)
		r.cycle()
		wantRetired(t, r.e)
		if got := releases(); len(got) != 2 || !slices.Equal(got[1], []dataplane.RetiredSNAT{held}) {
			t.Fatalf("released %v, want the held port released last", got)
		}
		r.e.MustRun(t, r.e.FromBackend(p.Backend(), p.SNATPort(), dt.ACK, 5001, 1001, nil).Frame(), r.e.BackendIface(), dt.XDPPass)
	})
}

// wantRetired checks the data path's retired SNAT spaces.
func wantRetired(t *testing.T, e *dt.Env, want ...dataplane.RetiredSNAT) {
	t.Helper()
	if got := e.DP.RetiredSNAT(); len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
		t.Fatalf("retired SNAT spaces %v, want %v", got, want)
	}
}
