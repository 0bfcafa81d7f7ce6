package dataplane

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// Pins of layout 9 (issue 29, release aa95f16), for the migration tests:
// this build's state maps without xlb_sched (the schedules of the table
// schedulers) and with one counter fewer (no XLB_C_SCHED_FALLBACK). Every
// struct layout 9 pinned is this build's.

// layout9Counters is layout 9's enum xlb_counter length: this build's
// without XLB_C_SCHED_FALLBACK, its last counter.
const layout9Counters = uint32(xlbXlbCounterXLB_C_SCHED_FALLBACK)

// reshapeLayout9 shapes this build's spec ms of map name as layout 9 had
// it: false for a map layout 10 or later added (reshapeLayout10 first).
// reshapeLayout8 applies it first.
func reshapeLayout9(name string, ms *ebpf.MapSpec) bool {
	if !reshapeLayout10(name, ms) {
		return false
	}
	switch name {
	case xlbMapXlbSched:
		return false // new in layout 10
	case xlbMapXlbCounters:
		ms.MaxEntries = layout9Counters
	}
	return true
}

// DowngradeToLayout9 rewrites the pins under dir, which a data path of
// this build pinned and released with round robin services only (layout
// 9 had no other scheduler), into what release aa95f16 (layout 9) pins
// for the same state: no xlb_sched, the counters without
// XLB_C_SCHED_FALLBACK (it must be 0) and a metadata record of layout 9,
// after DowngradeToLayout10.
// DowngradeToLayout8 starts with it.
func DowngradeToLayout9(t testing.TB, dir string) {
	t.Helper()
	DowngradeToLayout10(t, dir)
	cur, err := ebpf.LoadPinnedMap(mapPath(dir, xlbMapXlbCounters), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	old := stateMapsShaped(t, func(name string, ms *ebpf.MapSpec) bool {
		return name == xlbMapXlbCounters && reshapeLayout9(name, ms)
	})
	var per []uint64
	for k := range cur.MaxEntries() {
		if err := cur.Lookup(k, &per); err != nil {
			t.Fatal(err)
		}
		if k >= layout9Counters {
			for cpu, v := range per {
				if v != 0 {
					t.Fatalf("counter %d is %d on CPU %d: layout 9 had no such counter", k, v, cpu)
				}
			}
			continue
		}
		if err := old[xlbMapXlbCounters].Update(k, per, ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(mapPath(dir, xlbMapXlbCounters)); err != nil {
		t.Fatal(err)
	}
	if err := old[xlbMapXlbCounters].Pin(mapPath(dir, xlbMapXlbCounters)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(mapPath(dir, xlbMapXlbSched)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	setPinnedLayout(t, dir, 9)
}
