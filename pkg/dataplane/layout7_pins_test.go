package dataplane

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// Pins of layout 7 (issue 27, commit b09446e), for the migration tests:
// this build's state maps with layout 7's counter array, which ends
// before XLB_C_SNAT_TIMEWAIT_REUSES, 48-byte flow values without ts_off
// (flowValue7), and no xlb_backend_ts.

// layout7Counters is the length of layout 7's counter array (its
// XLB_C_MAX): every counter before XLB_C_SNAT_TIMEWAIT_REUSES.
const layout7Counters = uint32(xlbXlbCounterXLB_C_SNAT_TIMEWAIT_REUSES)

// DowngradeToLayout7 rewrites the pins under dir, which a data path of
// this build pinned and released, into what the issue-27 build of
// b09446e (layout 7) pins for the same state: layout 8's
// (DowngradeToLayout8), then a flow map of 48-byte
// values (each without ts_off and pad2, and without the timestamp flags,
// which layout 7 never set), the counter array without the counter
// layout 8 added (new maps pinned in their place), no xlb_backend_ts and
// a metadata record of layout 7. For the external tests.
func DowngradeToLayout7(t testing.TB, dir string) {
	t.Helper()
	DowngradeToLayout8(t, dir)
	open := func(name string) *ebpf.Map {
		t.Helper()
		m, err := ebpf.LoadPinnedMap(mapPath(dir, name), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	repin := func(name string, m *ebpf.Map) {
		t.Helper()
		if err := os.Remove(mapPath(dir, name)); err != nil {
			t.Fatal(err)
		}
		if err := m.Pin(mapPath(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	flows := open(xlbMapXlbFlows)
	old := stateMapsShaped(t, func(name string, ms *ebpf.MapSpec) bool {
		switch name {
		case xlbMapXlbFlows:
			ms.ValueSize, ms.MaxEntries = uint32(flowValue7Size), flows.MaxEntries()
		case xlbMapXlbCounters:
			ms.MaxEntries = layout7Counters
		default:
			return false
		}
		return true
	})
	r, err := dumpMap(flows, false)
	if err != nil {
		t.Fatal(err)
	}
	const tsFlags = uint32(xlbXlbFlowFlagsXLB_F_TS | xlbXlbFlowFlagsXLB_F_TS_SYN)
	for i := range r.Len() {
		var v FlowValue
		decodeFlowValue(r.Value(i, 0), &v)
		v.Flags &^= tsFlags
		o := asFlowValue7(v)
		if err := old[xlbMapXlbFlows].Update(r.Key(i), toBytes(&o), ebpf.UpdateNoExist); err != nil {
			t.Fatal(err)
		}
	}
	repin(xlbMapXlbFlows, old[xlbMapXlbFlows])

	cur := open(xlbMapXlbCounters)
	var per []uint64
	for k := range layout7Counters {
		if err := cur.Lookup(k, &per); err != nil {
			t.Fatal(err)
		}
		if err := old[xlbMapXlbCounters].Update(k, per, ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}
	repin(xlbMapXlbCounters, old[xlbMapXlbCounters])
	if err := os.Remove(mapPath(dir, xlbMapXlbBackendTs)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	setPinnedLayout(t, dir, 7)
}
