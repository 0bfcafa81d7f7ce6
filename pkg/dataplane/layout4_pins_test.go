package dataplane

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// Pins of layout 4 (the issue-14 build, commit 939478d), for the
// migration tests: this build's state maps with layout 4's counter array,
// which ends before XLB_C_NOT_OURS.

// layout4Counters is the length of layout 4's counter array (its
// XLB_C_MAX): every counter before XLB_C_NOT_OURS. Layouts 3 and 4 have
// the same counters.
const layout4Counters = uint32(xlbXlbCounterXLB_C_NOT_OURS)

// layout4Maps creates the state maps of layout 4 (the per-CPU queue
// stands in for the ring buffer).
func layout4Maps(t testing.TB, maxConnections uint32) map[string]*ebpf.Map {
	t.Helper()
	return stateMapsShaped(t, func(name string, ms *ebpf.MapSpec) bool {
		switch name {
		case xlbMapXlbCounters:
			ms.MaxEntries = layout4Counters
		case xlbMapXlbCfg:
			ms.ValueSize = uint32(config5Size)
		case xlbMapXlbFlows:
			ms.ValueSize, ms.MaxEntries = uint32(flowValue6Size), EntriesPerPair*maxConnections
		case xlbMapXlbBackendTs:
			return false // new in layout 8
		case xlbMapXlbSnatPorts:
			ms.MaxEntries = migrateSNAT.bitmapWords()
		case xlbMapXlbCloseRing:
			ms.Type, ms.KeySize, ms.ValueSize, ms.MaxEntries = ebpf.Array, 4, 4, 1
		}
		return true
	})
}

// DowngradeToLayout4 rewrites the pins under dir, which a data path of
// this build pinned and released, into what the issue-14 build (layout 4)
// pins for the same state: layout 5's (DowngradeToLayout5, syn_us of
// established pairs 0), then the counter array without XLB_C_NOT_OURS (a
// new map pinned in its place) and a metadata record of layout 4. For
// the external tests.
func DowngradeToLayout4(t testing.TB, dir string) {
	t.Helper()
	DowngradeToLayout5(t, dir, 0)
	path := mapPath(dir, xlbMapXlbCounters)
	cur, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	old := layout4Maps(t, 1)[xlbMapXlbCounters]
	var per []uint64
	for k := range layout4Counters {
		if err := cur.Lookup(k, &per); err != nil {
			t.Fatal(err)
		}
		if err := old.Update(k, per, ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := old.Pin(path); err != nil {
		t.Fatal(err)
	}
	setPinnedLayout(t, dir, 4)
}

// setPinnedLayout writes version into the pinned metadata record under
// dir.
func setPinnedLayout(t testing.TB, dir string, version uint32) {
	t.Helper()
	meta, err := ebpf.LoadPinnedMap(metaPath(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	raw, err := readMetaRaw(meta)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := fromBytes[xlbXlbPinMeta](raw) // of any layout: the record is the same since layout 2
	if err != nil {
		t.Fatal(err)
	}
	rec.LayoutVersion = version
	if err := meta.Update(uint32(0), toBytes(&rec), ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
}
