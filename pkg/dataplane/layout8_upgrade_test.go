package dataplane_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// A hot upgrade from the issue-36 build of d3e22cc (layout 8: one
// service in the config map, no member or service ids): a start that
// finds its pins migrates them into service 0, migrated and unnamed,
// serving the old address and ports with the old routable set until the
// first Configure names it; every pair keeps every field (its member id
// its backend id) and forwards both ways; the counters, per-member
// counters and the round-robin position continue; Pin leaves pins of
// this layout, which the next start adopts as they are.
func TestHotUpgradeFromLayout8(t *testing.T) {
	l := newPinLab(t)
	const pairs = 4
	old := l.running(t, pairs)
	before := flows(t, old)
	counted, err := old.Counters()
	if err != nil {
		t.Fatal(err)
	}
	stats, err := old.AllBackendStats()
	if err != nil {
		t.Fatal(err)
	}
	rr, err := old.FixtureRoundRobin(0)
	if err != nil || rr != pairs {
		t.Fatalf("round-robin position before %d (%v), want %d", rr, err, pairs)
	}
	l.handOver(t, old)
	dataplane.DowngradeToLayout8(t, l.dir)

	dp := l.mustLoad(t, 64)
	ad := dp.Adoption()
	if ad.Start != api.StartMigrated || ad.FromLayout != 8 || ad.Pairs != pairs {
		t.Fatalf("adoption %+v, want migrated from layout 8 with %d pairs", ad, pairs)
	}
	if len(ad.Services) != 1 || ad.Services[0].ID != 0 || !ad.Services[0].Migrated || ad.Services[0].Name != "" ||
		ad.Services[0].State != dataplane.ServiceServing || ad.Services[0].Listen != dt.ListenIP || !slices.Equal(ad.Services[0].Ports, l.e.Settings.Ports()) {
		t.Fatalf("adopted services %+v, want service 0 serving %v %v, migrated, unnamed", ad.Services, dt.ListenIP, l.e.Settings.Ports())
	}
	for _, r := range l.refs {
		if m, ok := ad.Members[r.ID]; !ok || m != (dataplane.Member{Service: 0, Backend: r.ID, IP: r.IP}) {
			t.Errorf("adopted member %d: %+v, want service 0, backend id %d, %v", r.ID, m, r.ID, r.IP)
		}
	}
	if got, err := dp.Routable(0); err != nil || !slices.Equal(got, l.refs) {
		t.Fatalf("the migrated routable set %v (%v), want %v", got, err, l.refs)
	}
	if got, err := dp.FixtureRoundRobin(0); err != nil || got != rr {
		t.Fatalf("round-robin position after the migration %d (%v), want %d", got, err, rr)
	}
	refs, err := dp.Configure(l.e.Settings)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].ID != 0 || refs[0].Name != dataplane.DefaultTestService || !refs[0].Migrated {
		t.Fatalf("Configure names the migrated service: %+v, want id 0 %q, migrated", refs, dataplane.DefaultTestService)
	}
	if err := dp.SetRoutable(0, l.refs); err != nil {
		t.Fatal(err)
	}

	after := sameFlows(t, dp, before, nil)
	sameCounters(t, dp, counted)
	if got, err := dp.AllBackendStats(); err != nil || !slices.Equal(got, stats) {
		t.Errorf("per-member counters after the migration differ (%v)", err)
	}
	for i := range pairs {
		c := dt.Client(uint16(34000 + i))
		fwd := after[dt.ForwardKey(c, 80)]
		synAck := l.e.FromBackend(fwd.NewDst(), fwd.NewSrc().Port(), dt.SYN|dt.ACK, 5000, 1001, nil)
		l.forwards(t, dp, fmt.Sprintf("pair %d: the SYN-ACK", i), synAck, l.e.ToClient(synAck, c, 80))
		data := l.data(i)
		l.forwards(t, dp, fmt.Sprintf("pair %d: client data", i), data, l.e.ToBackend(data, fwd.NewDst(), fwd.NewSrc().Port()))
	}
	// The round robin goes on where it was: the next pair's backend.
	l.open(t, dp, pairs, 1)
	next := flows(t, dp)[dt.ForwardKey(dt.Client(uint16(34000+pairs)), 80)]
	if want := l.refs[rr%uint64(len(l.refs))]; uint32(next.BackendId) != want.ID || uint32(next.MemberId) != want.Member || next.ServiceId != 0 {
		t.Fatalf("the first new pair went to backend id %d member %d service %d, want %d, %d, 0 (round-robin position %d)", next.BackendId, next.MemberId, next.ServiceId, want.ID, want.Member, rr)
	}

	if err := dp.Pin(dataplane.PinMeta{OwnerPID: 3}); err != nil {
		t.Fatal(err)
	}
	if err := dp.Release(); err != nil {
		t.Fatal(err)
	}
	adopted := l.mustLoad(t, 64)
	if ad := adopted.Adoption(); ad.Start != api.StartAdopted || ad.FromLayout != dataplane.LayoutVersion || ad.Pairs != pairs+1 ||
		len(ad.Services) != 1 || ad.Services[0].Name != dataplane.DefaultTestService {
		t.Fatalf("adoption of the migrated pins %+v, want adopted, layout %d, %d pairs, service %q", ad, dataplane.LayoutVersion, pairs+1, dataplane.DefaultTestService)
	}
}
