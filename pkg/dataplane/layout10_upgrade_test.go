package dataplane_test

import (
	"slices"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// A hot upgrade from commit 989c0b8 (layout 10: TCP only, service records
// of 88 bytes, 8 reaped reasons per member, one SNAT cursor per backend
// id): a start that finds its pins migrates them; every pair keeps every
// field and forwards both ways, every counter keeps its count (the UDP
// ones start at 0), each member's reaped cells keep their reasons, the
// TCP cursors continue and the UDP ones start at 0.
func TestHotUpgradeFromLayout10(t *testing.T) {
	l := newPinLab(t)
	const pairs = 4
	old := l.running(t, pairs+1)
	// one pair reaped embryonic: a reaped cell that must keep its reason
	gone := dt.ForwardKey(dt.Client(uint16(34000+pairs)), 80)
	v, err := old.LookupFlow(gone)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []dataplane.ReapRequest{{Key: gone, Generation: v.Generation, Op: dataplane.ReapEmbryonic}}
	if err := old.Reap(reqs, dataplane.ReapClock{Now: dataplane.Jiffies(v.LastSeen) + 10, EmbryonicTTL: 1}); err != nil || reqs[0].Result != dataplane.Reaped {
		t.Fatalf("reap the extra pair: %v %v", reqs[0].Result, err)
	}
	before := flows(t, old)
	counted, err := old.Counters()
	if err != nil {
		t.Fatal(err)
	}
	reaped, err := old.AllReapedCounts()
	if err != nil {
		t.Fatal(err)
	}
	if reaped[v.MemberId].Embryonic != 1 {
		t.Fatalf("member %d reaped %+v before the upgrade, want one embryonic", v.MemberId, reaped[v.MemberId])
	}
	cursors, err := old.FixtureSNATCursors()
	if err != nil {
		t.Fatal(err)
	}
	l.handOver(t, old)
	dataplane.DowngradeToLayout10(t, l.dir)

	dp := l.migrated(t, 10, pairs)
	after := sameFlows(t, dp, before, nil)
	sameCounters(t, dp, counted)
	got, err := dp.AllReapedCounts()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, reaped) {
		for m := range got {
			if got[m] != reaped[m] {
				t.Errorf("member %d reaped %+v after the upgrade, want %+v", m, got[m], reaped[m])
			}
		}
	}
	now, err := dp.FixtureSNATCursors()
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != 2*int(dataplane.MaxBackends) || !slices.Equal(now[:dataplane.MaxBackends], cursors[:dataplane.MaxBackends]) {
		t.Fatalf("the TCP SNAT cursors after the upgrade differ (%d cursors)", len(now))
	}
	for i, c := range now[dataplane.MaxBackends:] {
		if c != 0 {
			t.Fatalf("UDP cursor of backend id %d is %d after the upgrade, want 0", i, c)
		}
	}
	l.forwardsAfterMigration(t, dp, after, pairs)
	l.adoptedAfterPin(t, dp, pairs, nil)
}
