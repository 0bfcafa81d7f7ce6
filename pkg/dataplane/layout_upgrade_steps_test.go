package dataplane_test

import (
	"fmt"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// Steps the hot-upgrade tests from older layouts share
// (layout{2,3,4,5,6}_upgrade_test.go).

// running is a configured data path of 64 connections that opened
// pairs connection pairs: the predecessor.
func (l *pinLab) running(t *testing.T, pairs int) *dataplane.Dataplane {
	t.Helper()
	old := l.mustLoad(t, 64)
	l.configure(t, old)
	l.open(t, old, 0, pairs)
	return old
}

// handOver pins old's state as a running xlb would and lets it go, its
// pins left for a successor.
func (l *pinLab) handOver(t *testing.T, old *dataplane.Dataplane) {
	t.Helper()
	if err := old.Pin(dataplane.PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := old.Release(); err != nil {
		t.Fatal(err)
	}
}

// migrated loads this build (64 connections) over pins of layout from
// that hold pairs pairs, checks that it migrated them, and configures it.
func (l *pinLab) migrated(t *testing.T, from uint32, pairs int) *dataplane.Dataplane {
	t.Helper()
	dp := l.mustLoad(t, 64)
	if ad := dp.Adoption(); ad.Start != api.StartMigrated || ad.FromLayout != from || ad.Pairs != pairs {
		t.Fatalf("adoption %+v, want migrated from layout %d with %d pairs", ad, from, pairs)
	}
	l.configure(t, dp)
	return dp
}

// sameFlows checks that dp holds exactly the entries before, each as
// expect makes it from the entry as it was (nil: unchanged).
func sameFlows(t *testing.T, dp *dataplane.Dataplane, before map[dataplane.FlowKey]dataplane.FlowValue, expect func(*dataplane.FlowValue)) map[dataplane.FlowKey]dataplane.FlowValue {
	t.Helper()
	after := flows(t, dp)
	if len(after) != len(before) {
		t.Fatalf("%d flow entries after the migration, want %d", len(after), len(before))
	}
	for k, v := range before {
		if expect != nil {
			expect(&v)
		}
		if after[k] != v {
			t.Errorf("%v after the migration: %+v, want %+v", k, after[k], v)
		}
	}
	return after
}

// sameCounters checks that dp counts what the predecessor counted (the
// counters a newer layout added start at 0 in both).
func sameCounters(t *testing.T, dp *dataplane.Dataplane, counted dataplane.Counters) {
	t.Helper()
	got, err := dp.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if got != counted {
		t.Errorf("counters after the migration: %+v, want %+v", got, counted)
	}
}

// forwardsAfterMigration checks that each of the pairs embryonic pairs
// running opened (after: the migrated flows) takes its backend's SYN-ACK
// toward the client and then the client's data toward the backend.
func (l *pinLab) forwardsAfterMigration(t *testing.T, dp *dataplane.Dataplane, after map[dataplane.FlowKey]dataplane.FlowValue, pairs int) {
	t.Helper()
	for i := range pairs {
		c := dt.Client(uint16(34000 + i))
		fwd := after[dt.ForwardKey(c, 80)]
		synAck := l.e.FromBackend(fwd.NewDst(), fwd.NewSrc().Port(), dt.SYN|dt.ACK, 5000, 1001, nil)
		l.forwards(t, dp, fmt.Sprintf("pair %d: the SYN-ACK", i), synAck, l.e.ToClient(synAck, c, 80))
		data := l.data(i)
		l.forwards(t, dp, fmt.Sprintf("pair %d: client data", i), data, l.e.ToBackend(data, fwd.NewDst(), fwd.NewSrc().Port()))
	}
}

// adoptedAfterPin pins the migrated dp (pinned: checks the pins before
// the release; nil for none) and checks that the next start adopts them
// as this layout's, pairs pairs.
func (l *pinLab) adoptedAfterPin(t *testing.T, dp *dataplane.Dataplane, pairs int, pinned func()) {
	t.Helper()
	if err := dp.Pin(dataplane.PinMeta{OwnerPID: 3}); err != nil {
		t.Fatal(err)
	}
	if pinned != nil {
		pinned()
	}
	if err := dp.Release(); err != nil {
		t.Fatal(err)
	}
	next := l.mustLoad(t, 64)
	if ad := next.Adoption(); ad.Start != api.StartAdopted || ad.FromLayout != dataplane.LayoutVersion || ad.Pairs != pairs {
		t.Fatalf("adoption of the migrated pins %+v, want adopted, layout %d, %d pairs", ad, dataplane.LayoutVersion, pairs)
	}
}

// upgradedFrom runs a predecessor with pairs embryonic pairs, hands its
// pins over, rewrites them as layout from pinned them (downgrade), loads
// this build over them and checks that it migrated every entry unchanged
// and every count. Returns the migrated data path and its flows.
func (l *pinLab) upgradedFrom(t *testing.T, from uint32, pairs int, downgrade func(dir string)) (*dataplane.Dataplane, map[dataplane.FlowKey]dataplane.FlowValue) {
	t.Helper()
	old := l.running(t, pairs)
	before := flows(t, old)
	counted, err := old.Counters()
	if err != nil {
		t.Fatal(err)
	}
	l.handOver(t, old)
	downgrade(l.dir)
	dp := l.migrated(t, from, pairs)
	after := sameFlows(t, dp, before, nil)
	sameCounters(t, dp, counted)
	return dp, after
}
