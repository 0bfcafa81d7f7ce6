package dataplane_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/sched"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// A hot upgrade from release aa95f16 (layout 9: round robin services
// only, no xlb_sched, one counter fewer): a start that finds its pins
// migrates them, every pair keeps every field and forwards both ways,
// every counter keeps its count and the new one starts at 0, the
// services keep their names and round-robin positions; a service then
// turned Maglev gets its table, and Pin leaves pins of this layout, which
// the next start adopts as they are, tables included.
func TestHotUpgradeFromLayout9(t *testing.T) {
	l := newPinLab(t)
	const pairs = 4
	old := l.running(t, pairs)
	before := flows(t, old)
	counted, err := old.Counters()
	if err != nil {
		t.Fatal(err)
	}
	rr, err := old.FixtureRoundRobin(0)
	if err != nil || rr != pairs {
		t.Fatalf("round-robin position before %d (%v), want %d", rr, err, pairs)
	}
	l.handOver(t, old)
	dataplane.DowngradeToLayout9(t, l.dir)

	dp := l.mustLoad(t, 64)
	ad := dp.Adoption()
	if ad.Start != api.StartMigrated || ad.FromLayout != 9 || ad.Pairs != pairs {
		t.Fatalf("adoption %+v, want migrated from layout 9 with %d pairs", ad, pairs)
	}
	if len(ad.Services) != 1 || ad.Services[0].Name != dataplane.DefaultTestService || ad.Services[0].Migrated {
		t.Fatalf("adopted services %+v, want service 0 %q", ad.Services, dataplane.DefaultTestService)
	}
	if got, err := dp.FixtureRoundRobin(0); err != nil || got != rr {
		t.Fatalf("round-robin position after the migration %d (%v), want %d", got, err, rr)
	}
	if sc, ok := dp.Schedule(0); ok {
		t.Fatalf("a round robin service of layout 9 has a schedule: %+v", sc)
	}
	l.configure(t, dp)
	after := sameFlows(t, dp, before, nil)
	sameCounters(t, dp, counted)
	l.forwardsAfterMigration(t, dp, after, pairs)

	// the service turns Maglev: its table, then a pin and an adoption
	settings := l.e.Settings
	settings.Services = slices.Clone(settings.Services)
	settings.Services[0].Scheduler, settings.Services[0].TableSize = dataplane.SchedulerMaglev, sched.MinMaglevSize
	if _, err := dp.Configure(settings); err != nil {
		t.Fatal(err)
	}
	refs := slices.Clone(l.refs)
	for i := range refs {
		refs[i].Name, refs[i].Weight = fmt.Sprintf("backend-%d", i), uint16(1+i)
	}
	if err := dp.SetRoutable(0, refs); err != nil {
		t.Fatal(err)
	}
	built, ok := dp.Schedule(0)
	if !ok || built.Len != sched.MinMaglevSize || built.Rebuilds != 1 || len(built.Slots) != len(refs) {
		t.Fatalf("Schedule after SetRoutable: %+v, %v", built, ok)
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
	got, ok := next.Schedule(0)
	if !ok || got.Len != built.Len || got.Rebuilds != 1 || got.Hash != dataplane.MaglevHashFiveTuple ||
		!maps.Equal(got.Slots, built.Slots) || got.BuiltAt.UnixMilli() != built.BuiltAt.UnixMilli() {
		t.Fatalf("the adopted schedule %+v (%v), want the one built %+v", got, ok, built)
	}
	// the adopted table picks: a new pair's backend is the table's
	c := dt.Client(uint16(34000 + pairs))
	l.run(t, next, synFrom(l.e, c, 80), dt.XDPTX)
	fwd := flows(t, next)[dt.ForwardKey(c, 80)]
	ms := make([]sched.Member, len(refs))
	for i, r := range refs {
		ms[i] = sched.Member{Name: r.Name, IP: r.IP, Weight: r.Weight}
	}
	tbl, err := sched.Build(sched.Maglev, ms, sched.MinMaglevSize)
	if err != nil {
		t.Fatal(err)
	}
	h := sched.HashFiveTuple(c.Addr(), dt.ListenIP, c.Port(), 80, 6)
	if want := refs[tbl.Entries[h%tbl.Len]]; uint32(fwd.BackendId) != want.ID {
		t.Fatalf("the first pair after the adoption went to backend id %d, the table names %d", fwd.BackendId, want.ID)
	}
	// the next build continues the count
	if _, err := next.Configure(settings); err != nil {
		t.Fatal(err)
	}
	if err := next.SetRoutable(0, refs[:2]); err != nil {
		t.Fatal(err)
	}
	if sc, ok := next.Schedule(0); !ok || sc.Rebuilds != 2 {
		t.Fatalf("Schedule after the adopted process's first set: %+v (%v), want rebuild 2", sc, ok)
	}
}
