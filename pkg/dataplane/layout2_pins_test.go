package dataplane

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
)

// Pins of layout 2 (release commit 84dceb3), built for the migration
// tests: this build's state maps in layout 2's shapes (84dceb3
// bpf/layout.h and bpf/maps.h), filled with layout 2 entries and pinned
// with a layout 2 metadata record, as that release left them.

// layout2Counters is layout 2's enum xlb_counter, in order (84dceb3
// bpf/layout.h): the migration copies the counters map by index.
var layout2Counters = []xlbXlbCounter{
	xlbXlbCounterXLB_C_XDP_ABORTED, xlbXlbCounterXLB_C_XDP_DROP, xlbXlbCounterXLB_C_XDP_PASS,
	xlbXlbCounterXLB_C_XDP_TX, xlbXlbCounterXLB_C_XDP_REDIRECT, xlbXlbCounterXLB_C_PAIRS_CREATED,
	xlbXlbCounterXLB_C_SNAT_EXHAUSTED, xlbXlbCounterXLB_C_TABLE_FULL, xlbXlbCounterXLB_C_NO_BACKEND,
	xlbXlbCounterXLB_C_FIB_MISS, xlbXlbCounterXLB_C_SYN_REUSED, xlbXlbCounterXLB_C_PAIRS_REPLACED,
	xlbXlbCounterXLB_C_INVARIANT, xlbXlbCounterXLB_C_CLOSED_CLIENT_FIN, xlbXlbCounterXLB_C_CLOSED_BACKEND_FIN,
	xlbXlbCounterXLB_C_CLOSED_CLIENT_RST, xlbXlbCounterXLB_C_CLOSED_BACKEND_RST, xlbXlbCounterXLB_C_SHUTDOWN_RESETS,
	xlbXlbCounterXLB_C_TTL_EXCEEDED, xlbXlbCounterXLB_C_CLOSE_EVENTS_LOST,
}

// layout2FlagBits are the flow flags layout 2 had (XLB_F_FIN_CLIENT ..
// XLB_F_CLOSED_RST).
const layout2FlagBits = FlagFINClient | FlagFINBackend | FlagRSTClient | FlagRSTBackend | FlagInitBackend | FlagClosedFIN | FlagClosedRST

// Layout2Entry is a flow entry as layout 2 stored it: the recipe, pair and
// close state of Value (its layout 2 flags; the tracking fields and the
// slot are ignored) and the egress interface and MACs of Hop.
type Layout2Entry struct {
	Key   FlowKey
	Value FlowValue
	Hop   NextHop
}

func (e Layout2Entry) value2() flowValue2 {
	v := e.Value
	o := flowValue2{SaddrBe: v.SaddrBe, DaddrBe: v.DaddrBe, SportBe: v.SportBe, DportBe: v.DportBe,
		Ifindex: uint32(e.Hop.Ifindex), CsumIp: v.CsumIp, CsumL4: v.CsumL4, Generation: v.Generation,
		Flags: v.Flags & layout2FlagBits, LastSeen: v.LastSeen, BackendId: v.BackendId}
	copy(o.Smac[:], e.Hop.SrcMAC)
	copy(o.Dmac[:], e.Hop.DstMAC)
	return o
}

// layout2Maps creates the state maps of layout 2.
func layout2Maps(t testing.TB, maxConnections uint32, ring bool) map[string]*ebpf.Map {
	t.Helper()
	return stateMapsShaped(t, func(name string, ms *ebpf.MapSpec) bool {
		if !reshapeLayout8(name, ms) {
			return false
		}
		switch name {
		case xlbMapXlbNexthops, xlbMapXlbSnatPorts, xlbMapXlbHandshake, xlbMapXlbBackendTs:
			return false // new in layout 3, 4 or 8
		case xlbMapXlbFlows:
			ms.ValueSize, ms.MaxEntries = 48, EntriesPerPair*maxConnections
		case xlbMapXlbCfg:
			ms.ValueSize = 56
		case xlbMapXlbCounters:
			ms.MaxEntries = uint32(len(layout2Counters))
		case xlbMapXlbCloseRing:
			ms.MaxEntries = 1 << 20
			if !ring {
				ms.Type, ms.KeySize, ms.ValueSize, ms.MaxEntries = ebpf.Array, 4, 4, 1
			}
		}
		return true
	})
}

// putLayout2Config writes s (its first SNAT address: layout 2 had one) as
// layout 2's config, with the given active routable set.
func putLayout2Config(t testing.TB, m *ebpf.Map, s Settings, activeSet uint32) {
	t.Helper()
	c := config2{ListenIpBe: be32(s.Listen()), SnatIpBe: be32(s.SNAT[0]), SnatPortLo: s.SNATPortLo, SnatPortHi: s.SNATPortHi,
		Nports: uint32(len(s.Ports())), ActiveSet: activeSet}
	for i, p := range s.Ports() {
		c.Ports[i].LocalPortBe, c.Ports[i].RemotePortBe = be16(p.Local), be16(p.Remote)
	}
	if err := m.Update(uint32(0), toBytes(&c), ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
}

// putLayout2Entries writes entries into a layout 2 flow map (BPF_ANY).
func putLayout2Entries(t testing.TB, m *ebpf.Map, entries []Layout2Entry) {
	t.Helper()
	for _, e := range entries {
		v := e.value2()
		if err := m.Update(toBytes(&e.Key), toBytes(&v), ebpf.UpdateAny); err != nil {
			t.Fatalf("layout 2 entry %v: %v", e.Key, err)
		}
	}
}

// pinLayout2 pins maps (layout2Maps) under dir as layout 2 did, with a
// metadata record of layout 2 for maxConnections and the network
// namespace cookie.
func pinLayout2(t testing.TB, dir string, cookie uint64, maxConnections uint32, maps map[string]*ebpf.Map) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, mapsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, m := range maps {
		if err := m.Pin(mapPath(dir, name)); err != nil {
			t.Fatalf("pin %s: %v", name, err)
		}
	}
	spec, err := loadXlb()
	if err != nil {
		t.Fatal(err)
	}
	ms := spec.Maps[xlbMapXlbMeta].Copy()
	ms.Key, ms.Value = nil, nil
	meta, err := ebpf.NewMap(ms)
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	rec := xlbXlbPinMeta{Magic: pinMagic, LayoutVersion: 2, MaxConnections: maxConnections, OwnerPid: 2, NetnsCookie: cookie}
	if err := meta.Update(uint32(0), toBytes(&rec), ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if err := meta.Pin(metaPath(dir)); err != nil {
		t.Fatal(err)
	}
}

// PinLayout2 pins, under dir, the state a layout 2 xlb (release 84dceb3)
// of maxConnections in the network namespace of cookie left running with
// settings s and the routable set refs (set 0 active) and the flow
// entries entries: for the external tests.
func PinLayout2(t testing.TB, dir string, cookie uint64, maxConnections uint32, s Settings, refs []BackendRef, entries []Layout2Entry) {
	t.Helper()
	maps := layout2Maps(t, maxConnections, false)
	putLayout2Config(t, maps[xlbMapXlbCfg], s, 0)
	set := backendSet3{Count: uint32(len(refs))}
	for i, r := range refs {
		set.Entries[i] = backendRef3{IpBe: be32(r.IP), Id: r.ID}
	}
	if err := maps[xlbMapXlbBackendSets].Update(uint32(0), toBytes(&set), ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	putLayout2Entries(t, maps[xlbMapXlbFlows], entries)
	pinLayout2(t, dir, cookie, maxConnections, maps)
}
