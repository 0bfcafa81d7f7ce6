package dataplane_test

import (
	"fmt"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// A hot upgrade from the issue-27 build of b09446e (layout 7: 48-byte
// flow values without timestamp offsets, a shorter counter array, no
// xlb_backend_ts): a start that finds its pins migrates them, every pair
// keeps every field and forwards both ways, every counter keeps its count
// and the new one starts at 0, and Pin leaves pins of this layout, which
// the next start adopts as they are.
func TestHotUpgradeFromLayout7(t *testing.T) {
	l := newPinLab(t)
	const pairs = 3
	old := l.running(t, pairs)
	before := flows(t, old)
	counted, err := old.Counters()
	if err != nil {
		t.Fatal(err)
	}
	l.handOver(t, old)
	dataplane.DowngradeToLayout7(t, l.dir)

	dp := l.migrated(t, 7, pairs)
	after := sameFlows(t, dp, before, nil)
	got, err := dp.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if got != counted {
		t.Errorf("counters after the migration: %+v, want %+v", got, counted)
	}
	for i := range pairs {
		c := dt.Client(uint16(34000 + i))
		fwd := after[dt.ForwardKey(c, 80)]
		synAck := l.e.FromBackend(fwd.NewDst(), fwd.NewSrc().Port(), dt.SYN|dt.ACK, 5000, 1001, nil)
		l.forwards(t, dp, fmt.Sprintf("pair %d: the SYN-ACK", i), synAck, l.e.ToClient(synAck, c, 80))
		data := l.data(i)
		l.forwards(t, dp, fmt.Sprintf("pair %d: client data", i), data, l.e.ToBackend(data, fwd.NewDst(), fwd.NewSrc().Port()))
	}
	if err := dp.Pin(dataplane.PinMeta{OwnerPID: 3}); err != nil {
		t.Fatal(err)
	}
	if err := dp.Release(); err != nil {
		t.Fatal(err)
	}
	next := l.mustLoad(t, 64)
	if ad := next.Adoption(); ad.Start != api.StartAdopted || ad.FromLayout != dataplane.LayoutVersion || ad.Pairs != pairs {
		t.Fatalf("adoption of the migrated pins %+v, want adopted, layout %d, %d pairs", ad, dataplane.LayoutVersion, pairs)
	}
}
