package dataplane

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// Pins of layout 3 (the issue-13 build, commit c29c03f), for the
// migration tests: this build's state maps in layout 3's shapes (c29c03f
// bpf/layout.h and bpf/maps.h): flow values without syn_us, routable sets
// of 32-bit ids without ports, no handshake histograms.

// layout3Maps creates the state maps of layout 3 (the per-CPU queue
// stands in for the ring buffer).
func layout3Maps(t testing.TB, maxConnections uint32) map[string]*ebpf.Map {
	t.Helper()
	return stateMapsShaped(t, func(name string, ms *ebpf.MapSpec) bool {
		if !reshapeLayout8(name, ms) {
			return false
		}
		switch name {
		case xlbMapXlbHandshake, xlbMapXlbBackendTs:
			return false // new in layout 4 or 8
		case xlbMapXlbCounters:
			ms.MaxEntries = layout4Counters // layout 4's counters
		case xlbMapXlbCfg:
			ms.ValueSize = uint32(config5Size)
		case xlbMapXlbFlows:
			ms.ValueSize, ms.MaxEntries = uint32(flowValue3Size), EntriesPerPair*maxConnections
		case xlbMapXlbSnatPorts:
			ms.MaxEntries = migrateSNAT.bitmapWords()
		case xlbMapXlbCloseRing:
			ms.Type, ms.KeySize, ms.ValueSize, ms.MaxEntries = ebpf.Array, 4, 4, 1
		}
		return true
	})
}

// asValue3 is v as layout 3 stored it: layout 6's order (flowValue6)
// without syn_us.
func asValue3(v FlowValue) []byte {
	o := asFlowValue6(asFlowValue7(v))
	return toBytes(&o)[:flowValue3Size]
}

// asSet3 is s as layout 3 stored it: 32-bit ids, no ports.
func asSet3(s backendSet8) backendSet3 {
	o := backendSet3{Count: s.Count, Pad: s.Pad}
	for i, r := range s.Entries {
		o.Entries[i] = backendRef3{IpBe: r.IpBe, Id: uint32(r.Id)}
	}
	return o
}

// DowngradeToLayout3 rewrites the pins under dir, which a data path of
// this build pinned and released, into what the issue-13 build (layout 3)
// pins for the same state: the flow map's values without syn_us (a new
// map pinned in its place), the routable sets' refs with 32-bit ids and
// no ports, no handshake histograms, layout 4's counter array
// (DowngradeToLayout4) and a metadata record of layout 3. For the
// external tests.
func DowngradeToLayout3(t testing.TB, dir string) {
	t.Helper()
	DowngradeToLayout4(t, dir)
	open := func(path string) *ebpf.Map {
		t.Helper()
		m, err := ebpf.LoadPinnedMap(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	flows := open(mapPath(dir, xlbMapXlbFlows))
	r, err := dumpMap(flows, false)
	if err != nil {
		t.Fatal(err)
	}
	old := layout3Maps(t, flows.MaxEntries()/EntriesPerPair)[xlbMapXlbFlows]
	for i := range r.Len() {
		v, err := fromBytes[flowValue6](r.Value(i, 0)) // layout 6's order (DowngradeToLayout4)
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Update(r.Key(i), toBytes(&v)[:flowValue3Size], ebpf.UpdateNoExist); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(mapPath(dir, xlbMapXlbFlows)); err != nil {
		t.Fatal(err)
	}
	if err := old.Pin(mapPath(dir, xlbMapXlbFlows)); err != nil {
		t.Fatal(err)
	}
	sets := open(mapPath(dir, xlbMapXlbBackendSets))
	for slot := range uint32(2) {
		var s backendSet8
		if err := sets.Lookup(slot, &s); err != nil {
			t.Fatal(err)
		}
		o := asSet3(s)
		if err := sets.Update(slot, toBytes(&o), ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(mapPath(dir, xlbMapXlbHandshake)); err != nil {
		t.Fatal(err)
	}
	setPinnedLayout(t, dir, 3)
}
