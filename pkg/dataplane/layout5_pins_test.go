package dataplane

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// Pins of layout 5 (the issue-17 build, commit 8c85783), for the
// migration tests: this build's state maps with layout 5's counter array,
// which ends before XLB_C_FRAGS_FORWARDED, and its struct xlb_config,
// which ends before snat_reuse_ticks.

// layout5Counters is the length of layout 5's counter array (its
// XLB_C_MAX): every counter before XLB_C_FRAGS_FORWARDED.
const layout5Counters = uint32(xlbXlbCounterXLB_C_FRAGS_FORWARDED)

// layout5Maps creates the state maps of layout 5 (the per-CPU queue
// stands in for the ring buffer).
func layout5Maps(t testing.TB, maxConnections uint32) map[string]*ebpf.Map {
	t.Helper()
	return stateMapsShaped(t, func(name string, ms *ebpf.MapSpec) bool {
		if !reshapeLayout8(name, ms) {
			return false
		}
		switch name {
		case xlbMapXlbCounters:
			ms.MaxEntries = layout5Counters
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

// DowngradeToLayout5 rewrites the pins under dir, which a data path of
// this build pinned and released, into what the issue-17 build (layout 5)
// pins for the same state: layout 6's (DowngradeToLayout6), then the
// counter array without the counters layout 6 added and the config
// without its new fields (new maps pinned in their place), the SYN's time
// in syn_us of established forward entries (the value layout 5 left
// there: synTime) and a metadata record of layout 5. For the external
// tests.
func DowngradeToLayout5(t testing.TB, dir string, synTime uint32) {
	t.Helper()
	DowngradeToLayout6(t, dir)
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
	old := layout5Maps(t, 1)
	shrinkPinnedCounters(t, dir, layout5Counters)

	var cfg config8
	if err := open(xlbMapXlbCfg).Lookup(uint32(0), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := old[xlbMapXlbCfg].Update(uint32(0), toBytes(&cfg)[:config5Size], ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	repin(xlbMapXlbCfg, old[xlbMapXlbCfg])

	flows := open(xlbMapXlbFlows)
	r, err := dumpMap(flows, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Len() {
		k, err := fromBytes[FlowKey](r.Key(i))
		if err != nil {
			t.Fatal(err)
		}
		v, err := fromBytes[flowValue6](r.Value(i, 0))
		if err != nil {
			t.Fatal(err)
		}
		if k.Dir != uint8(xlbXlbDirXLB_DIR_CLIENT) || v.Flags&uint32(xlbXlbFlowFlagsXLB_F_ESTABLISHED) == 0 {
			continue
		}
		v.SynUs = synTime
		if err := flows.Update(&k, toBytes(&v), ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}
	setPinnedLayout(t, dir, 5)
}
