package dataplane

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane/pins"
)

// Pins of layout 10 (issue 30, commit 989c0b8), for the migration tests:
// this build's state maps with service records of 88 bytes (no
// udp_unreplied_max), 8 reaped cells per member id, one SNAT cursor per
// backend id (no UDP half), four counters fewer (no UDP counters), and
// no xlb_udp_unreplied or xlb_svc_counters.

// layout10Counters is layout 10's enum xlb_counter length: this build's
// without the four UDP counters, its last ones.
const layout10Counters = uint32(xlbXlbCounterXLB_C_UDP_PAIRS_CREATED)

// reshapeLayout10 shapes this build's spec ms of map name as layout 10
// had it: false for a map layout 11 added. reshapeLayout9 applies it
// first.
func reshapeLayout10(name string, ms *ebpf.MapSpec) bool {
	switch name {
	case xlbMapXlbUdpUnreplied, xlbMapXlbSvcCounters:
		return false // new in layout 11
	case xlbMapXlbServices:
		ms.ValueSize = pins.Service10Size
	case xlbMapXlbReaped:
		ms.MaxEntries = uint32(MaxMembers * pins.ReapedReasons10)
	case xlbMapXlbSnatCursors:
		ms.MaxEntries = MaxBackends
	case xlbMapXlbCounters:
		ms.MaxEntries = layout10Counters
	}
	return true
}

// repinShaped replaces the pin of map name under dir by a map of layout
// 10's shape (reshapeLayout10) holding what conv makes of each cell of
// the pinned one (key, value; ok false: the cell is left out).
func repinShaped(t testing.TB, dir, name string, conv func(k uint32, v []byte) (uint32, []byte, bool)) {
	t.Helper()
	cur, err := ebpf.LoadPinnedMap(mapPath(dir, name), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	old := stateMapsShaped(t, func(n string, ms *ebpf.MapSpec) bool { return n == name && reshapeLayout10(n, ms) })[name]
	for k := range cur.MaxEntries() {
		var v []byte
		if err := cur.Lookup(k, &v); err != nil {
			t.Fatal(err)
		}
		nk, nv, ok := conv(k, v)
		if !ok {
			continue
		}
		if err := old.Update(nk, nv, ebpf.UpdateExist); err != nil {
			t.Fatalf("%s cell %d: %v", name, nk, err)
		}
	}
	if err := os.Remove(mapPath(dir, name)); err != nil {
		t.Fatal(err)
	}
	if err := old.Pin(mapPath(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// zero reports whether every byte of b is 0.
func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// DowngradeToLayout10 rewrites the pins under dir, which a data path of
// this build pinned and released with TCP services only (layout 10 had
// no other), into what commit 989c0b8 (layout 10) pins for the same
// state: service records without udp_unreplied_max, 8 reaped cells per
// member id, the TCP half of the SNAT cursors, the counters without the
// UDP ones (they must be 0), no xlb_udp_unreplied or xlb_svc_counters,
// and a metadata record of layout 10. DowngradeToLayout9 starts with it.
func DowngradeToLayout10(t testing.TB, dir string) {
	t.Helper()
	repinShaped(t, dir, xlbMapXlbServices, func(k uint32, v []byte) (uint32, []byte, bool) {
		if !zero(v[pins.Service10Size:]) {
			t.Fatalf("service %d has UDP fields: layout 10 had none", k)
		}
		return k, v[:pins.Service10Size], true
	})
	repinShaped(t, dir, xlbMapXlbReaped, func(k uint32, v []byte) (uint32, []byte, bool) {
		r := k % uint32(xlbXlbLimitsXLB_REAPED_REASONS)
		if r >= pins.ReapedReasons10 {
			if !zero(v) {
				t.Fatalf("reaped cell %d counts a reason layout 10 had not", k)
			}
			return 0, nil, false
		}
		return k/uint32(xlbXlbLimitsXLB_REAPED_REASONS)*pins.ReapedReasons10 + r, v, true
	})
	repinShaped(t, dir, xlbMapXlbSnatCursors, func(k uint32, v []byte) (uint32, []byte, bool) {
		return k, v, k < MaxBackends
	})
	cur, err := ebpf.LoadPinnedMap(mapPath(dir, xlbMapXlbCounters), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	old := stateMapsShaped(t, func(name string, ms *ebpf.MapSpec) bool {
		return name == xlbMapXlbCounters && reshapeLayout10(name, ms)
	})
	var per []uint64
	for k := range cur.MaxEntries() {
		if err := cur.Lookup(k, &per); err != nil {
			t.Fatal(err)
		}
		if k >= layout10Counters {
			for cpu, v := range per {
				if v != 0 {
					t.Fatalf("counter %d is %d on CPU %d: layout 10 had no such counter", k, v, cpu)
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
	for _, name := range []string{xlbMapXlbUdpUnreplied, xlbMapXlbSvcCounters} {
		if err := os.Remove(mapPath(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	setPinnedLayout(t, dir, 10)
}
