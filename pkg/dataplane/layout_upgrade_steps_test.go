package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// Steps the hot-upgrade tests from older layouts share
// (layout{2,3,4}_upgrade_test.go).

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
