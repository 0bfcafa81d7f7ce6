package dataplane

import (
	"testing"

	"github.com/cilium/ebpf"
)

// Pins of layout 6 (issue 27's first part, commit f2593f4), for the
// migration tests: this build's state maps with layout 6's counter array,
// which ends before XLB_C_PAIR_GONE_IN_FLIGHT, and flow values with
// nexthop before generation and flags (flowValue6).

// layout6Counters is the length of layout 6's counter array (its
// XLB_C_MAX): every counter before XLB_C_PAIR_GONE_IN_FLIGHT.
const layout6Counters = uint32(xlbXlbCounterXLB_C_PAIR_GONE_IN_FLIGHT)

// DowngradeToLayout6 rewrites the pins under dir, which a data path of
// this build pinned and released, into what the issue-27 build of
// f2593f4 (layout 6) pins for the same state: layout 7's
// (DowngradeToLayout7), then every flow value in layout 6's order, the
// counter array without the counter layout 7 added (a new map pinned in
// its place) and a metadata record of layout 6. For the external tests.
func DowngradeToLayout6(t testing.TB, dir string) {
	t.Helper()
	DowngradeToLayout7(t, dir)
	flows, err := ebpf.LoadPinnedMap(mapPath(dir, xlbMapXlbFlows), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer flows.Close()
	r, err := dumpMap(flows, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Len() {
		v, err := fromBytes[flowValue7](r.Value(i, 0)) // layout 7's (DowngradeToLayout7)
		if err != nil {
			t.Fatal(err)
		}
		o := asFlowValue6(v)
		if err := flows.Update(r.Key(i), toBytes(&o), ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}

	shrinkPinnedCounters(t, dir, layout6Counters)
	setPinnedLayout(t, dir, 6)
}
