package dataplane

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
)

// migrateSNAT is the SNAT space of the migration tests' data paths.
var migrateSNAT = SNATSpace{Addrs: 1, PortLo: 40000, PortHi: 40999}

// nextLayoutPad is what the test-only layout appends to every flow value.
var nextLayoutPad = []byte{0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5}

// nextLayout is a test-only layout N+1 of the current one: struct
// flow_value grows by 8 bytes, with its converter, and nothing else
// changes. It goes through the same machinery a real bump would.
func nextLayout() layout {
	l := currentLayout()
	l.Version = layoutVersion + 1
	l.Steps = map[uint32]layoutStep{layoutVersion: {From: layoutVersion, Maps: map[string]entryConverter{
		xlbMapXlbFlows: {Value: func(_, old []byte) ([]byte, error) {
			if len(old) != flowValueSize {
				return nil, fmt.Errorf("a %d-byte flow value, want %d", len(old), flowValueSize)
			}
			return append(old, nextLayoutPad...), nil
		}},
	}}}
	return l
}

// nextLayoutMaps creates the maps of nextLayout: this build's, the flow
// value 8 bytes longer.
func nextLayoutMaps(t *testing.T, maxConnections uint32, ring bool) map[string]*ebpf.Map {
	t.Helper()
	return stateMapsShaped(t, func(name string, ms *ebpf.MapSpec) bool {
		switch name {
		case xlbMapXlbFlows:
			ms.ValueSize += uint32(len(nextLayoutPad))
			ms.MaxEntries = EntriesPerPair * maxConnections
		case xlbMapXlbCloseRing:
			if !ring {
				ms.Type, ms.KeySize, ms.ValueSize, ms.MaxEntries = ebpf.Array, 4, 4, 1
			}
		case xlbMapXlbSnatPorts:
			ms.MaxEntries = migrateSNAT.bitmapWords()
		}
		return true
	})
}

// stateMapsShaped creates this build's state maps (stateMaps), each spec
// reshaped first; the maps have sizes only, no BTF (it would be this
// build's). A map reshape returns false for is left out. The maps are
// closed at cleanup.
func stateMapsShaped(t testing.TB, reshape func(name string, ms *ebpf.MapSpec) bool) map[string]*ebpf.Map {
	t.Helper()
	spec, err := loadXlb()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*ebpf.Map{}
	for _, name := range stateMaps(spec) {
		ms := spec.Maps[name].Copy()
		ms.Key, ms.Value = nil, nil
		if !reshape(name, ms) {
			continue
		}
		m, err := ebpf.NewMap(ms)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() { m.Close() })
		out[name] = m
	}
	return out
}

// fillState writes state of every kind into a loaded data path: pairs,
// counters (some counted by the real program), per-backend counters, both
// routable sets, SNAT cursors, the round-robin position and generation.
func fillState(t *testing.T, d *Dataplane, pairs int) {
	t.Helper()
	if _, err := d.Configure(Settings{SNAT: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		SNATPortLo: migrateSNAT.PortLo, SNATPortHi: migrateSNAT.PortHi, Services: OneService(netip.MustParseAddr("192.0.2.10"), []PortMap{{Local: 80, Remote: 8080}})}); err != nil {
		t.Fatal(err)
	}
	backends := []BackendRef{{ID: 3, Member: 3, IP: netip.MustParseAddr("192.0.2.33")}, {ID: 7, Member: 7, IP: netip.MustParseAddr("192.0.2.37")}}
	for _, set := range [][]BackendRef{backends[:1], backends} {
		if err := d.SetRoutable(0, set); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pairs {
		b := backends[i%2]
		fk := NewFlowKey(netip.AddrPortFrom(netip.MustParseAddr("192.0.2.20"), uint16(30000+i)), netip.MustParseAddrPort("192.0.2.10:80"), DirClient)
		fv := FlowValue{SaddrBe: be32(netip.MustParseAddr("192.0.2.10")), DaddrBe: be32(b.IP), SportBe: be16(uint16(40000 + i)), DportBe: be16(8080),
			Nexthop: 5, Generation: uint32(i + 1), LastSeen: uint32(1000 + i), BackendId: uint16(b.ID), Flags: uint32(i % 3)}
		rv := FlowValue{SaddrBe: be32(b.IP), DaddrBe: fk.SaddrBe, SportBe: be16(80), DportBe: fk.SportBe,
			Nexthop: 6, Generation: uint32(i + 1), LastSeen: uint32(1000 + i), BackendId: uint16(b.ID)}
		if err := d.PutFlow(fk, fv); err != nil {
			t.Fatal(err)
		}
		if err := d.PutFlow(fv.Peer(fk), rv); err != nil {
			t.Fatal(err)
		}
	}
	// The real program counts verdicts: a frame it passes.
	for range 3 {
		if _, err := d.objs.XlbXdp.Run(&ebpf.RunOptions{Data: make([]byte, 64), Repeat: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	per := make([]uint64, ncpu)
	for cpu := range per {
		per[cpu] = uint64(100*cpu + 5)
	}
	if err := d.objs.XlbCounters.Update(uint32(xlbXlbCounterXLB_C_PAIRS_CREATED), per, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	stats := make([]xlbBackendStats, ncpu)
	stats[0] = xlbBackendStats{Packets: 11, Bytes: 1100, Opened: 4}
	if err := d.objs.XlbBackendStats.Update(uint32(7*dirs), stats, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if err := d.objs.XlbPairEvents.Update(uint32(3*int(xlbXlbLimitsXLB_PAIR_EVENTS)+1), per, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if err := d.objs.XlbReaped.Update(uint32(7*int(xlbXlbLimitsXLB_REAPED_REASONS)+2), uint64(9), ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	for id, c := range map[uint32]uint32{3: 123, 7: 4_000_000_000} {
		if err := d.objs.XlbSnatCursors.Update(id, c, ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	var st xlbXlbState
	if err := d.objs.XlbShared.Lookup(uint32(0), &st); err != nil {
		t.Fatal(err)
	}
	st.Generation = uint64(pairs)
	if err := d.objs.XlbShared.Update(uint32(0), &st, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if err := d.objs.XlbRr.Update(uint32(0), uint64(41), ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
}

// entriesOf is a map's entries keyed by their key bytes.
func entriesOf(t *testing.T, m *ebpf.Map) map[string][]byte {
	t.Helper()
	r, err := dumpMap(m, false)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for i := range r.Len() {
		out[string(r.Key(i))] = r.Entry(i)
	}
	return out
}

// Pins of layout N, written by the real program's maps, are read by a
// test-only layout N+1 whose flow value is 8 bytes longer: the
// converter runs on every flow entry, every other map is copied byte for
// byte, and the second pass merges what the old program did after the
// first copy. Both the batch and the per-key path.
func TestMigrateToNextLayout(t *testing.T) {
	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { testMigrateToNextLayout(t, batch) })
	}
}

func testMigrateToNextLayout(t *testing.T, batch bool) {
	dir := testStateDir(t)
	old, err := Load(Options{SNAT: migrateSNAT, MaxConnections: 64, StateDir: dir, NetnsCookie: testCookie(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	fillState(t, old, 20)
	if err := old.Pin(PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	pins, err := readPins(dir, testCookie(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pins.Close()
	src := map[string]*ebpf.Map{}
	for name := range pins.Maps {
		src[name] = pins.Take(name)
	}
	dst := nextLayoutMaps(t, 32, old.closeRing)
	mig, err := newMigration(nextLayout(), pins.Meta.LayoutVersion, src, dst, batch, migrationHost{})
	if err != nil {
		t.Fatal(err)
	}
	defer mig.Close()
	if err := mig.CopyAll(); err != nil {
		t.Fatal(err)
	}
	for name, s := range src {
		if name == xlbMapXlbCloseRing {
			continue
		}
		want, got := entriesOf(t, s), entriesOf(t, dst[name])
		if len(got) != len(want) {
			t.Errorf("%s: %d entries, want %d", name, len(got), len(want))
		}
		for k, v := range want {
			if name == xlbMapXlbFlows {
				v = append(bytes.Clone(v), nextLayoutPad...)
			}
			if !bytes.Equal(got[k], v) {
				t.Errorf("%s: key %x: %x, want %x", name, k, got[k], v)
			}
		}
	}
	if n := len(entriesOf(t, dst[xlbMapXlbFlows])); n != 40 {
		t.Errorf("flow entries after the copy: %d, want 40", n)
	}

	// The old program runs on: a new pair, a close on an old one, counts.
	newKey := NewFlowKey(netip.MustParseAddrPort("192.0.2.21:31000"), netip.MustParseAddrPort("192.0.2.10:80"), DirClient)
	newVal := FlowValue{DaddrBe: be32(netip.MustParseAddr("192.0.2.33")), Generation: 99, LastSeen: 5000, BackendId: 3}
	if err := old.PutFlow(newKey, newVal); err != nil {
		t.Fatal(err)
	}
	oldKey := NewFlowKey(netip.MustParseAddrPort("192.0.2.20:30000"), netip.MustParseAddrPort("192.0.2.10:80"), DirClient)
	v, err := old.LookupFlow(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	v.Flags |= FlagFINClient | FlagFINBackend | FlagClosedFIN
	v.LastSeen += 700
	if err := old.objs.XlbFlows.Update(&oldKey, &v, ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	before, err := old.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := old.objs.XlbXdp.Run(&ebpf.RunOptions{Data: make([]byte, 64), Repeat: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mig.CatchUp(); err != nil {
		t.Fatal(err)
	}
	var got [flowValueSize + 8]byte
	if err := dst[xlbMapXlbFlows].Lookup(&newKey, &got); err != nil {
		t.Fatalf("the pair the old program created after the copy: %v", err)
	}
	var gv, ov FlowValue
	decodeFlowValue(got[:], &gv)
	if gv != newVal || !bytes.Equal(got[flowValueSize:], nextLayoutPad) {
		t.Errorf("new pair after the second pass: %+v %x", gv, got[flowValueSize:])
	}
	if err := dst[xlbMapXlbFlows].Lookup(&oldKey, &got); err != nil {
		t.Fatal(err)
	}
	decodeFlowValue(got[:], &ov)
	if ov.Flags != v.Flags || ov.LastSeen != v.LastSeen {
		t.Errorf("closed pair after the second pass: flags %#x last_seen %d, want %#x %d", ov.Flags, ov.LastSeen, v.Flags, v.LastSeen)
	}
	var per []uint64
	if err := dst[xlbMapXlbCounters].Lookup(uint32(xlbXlbCounterXLB_C_XDP_PASS), &per); err != nil {
		t.Fatal(err)
	}
	var pass uint64
	for _, p := range per {
		pass += p
	}
	if want := before.Actions[xlbXlbCounterXLB_C_XDP_PASS] + 4; pass != want {
		t.Errorf("XDP_PASS in the new counters after the second pass: %d, want %d", pass, want)
	}
}

// A layout with no conversion from the pins' layout is refused by name.
func TestMigrateNeedsEveryStep(t *testing.T) {
	l := nextLayout()
	l.Version = layoutVersion + 2
	_, err := newMigration(l, layoutVersion, nil, nil, false, migrationHost{})
	if err == nil || err.Error() != fmt.Sprintf("this build has no conversion from layout %d to %d (it migrates pins of layouts %d only)", layoutVersion+1, layoutVersion+2, layoutVersion+2) {
		t.Fatalf("got %v", err)
	}
}

// The second pass keeps what the new program did on its own once it ran
// (its own pairs under a key, its deletions of a pair), replaces or
// deletes the migration's stale copies as the old program did, and merges
// a pair both programs updated.
func TestMergeFlowsKeepsTheNewProgramsEntries(t *testing.T) {
	flowsOnly := func(name string, ms *ebpf.MapSpec) bool {
		ms.MaxEntries = 64
		return name == xlbMapXlbFlows
	}
	src, dst := stateMapsShaped(t, flowsOnly)[xlbMapXlbFlows], stateMapsShaped(t, flowsOnly)[xlbMapXlbFlows]
	key := func(i int) FlowKey {
		return NewFlowKey(netip.AddrPortFrom(netip.MustParseAddr("192.0.2.20"), uint16(30000+i)), netip.MustParseAddrPort("192.0.2.10:80"), DirClient)
	}
	put := func(m *ebpf.Map, i int, v FlowValue) {
		t.Helper()
		if err := m.Update(key(i), &v, ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	del := func(m *ebpf.Map, i int) {
		t.Helper()
		if err := m.Delete(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	val := func(gen, flags, lastSeen uint32) FlowValue {
		return FlowValue{Generation: gen, Flags: flags, LastSeen: lastSeen, BackendId: 3}
	}
	for i, gen := range []uint32{1, 3, 4, 6, 7, 9} {
		put(src, i+1, val(gen, 0, 100))
	}
	mig, err := newMigration(currentLayout(), layoutVersion, map[string]*ebpf.Map{xlbMapXlbFlows: src}, map[string]*ebpf.Map{xlbMapXlbFlows: dst}, false, migrationHost{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.CopyAll(); err != nil {
		t.Fatal(err)
	}
	// What the new program does once it runs.
	put(dst, 1, val(50, 0, 200))          // its own pair under key 1
	del(dst, 2)                           // it ends pair 3
	del(dst, 3)                           // it ends pair 4
	put(dst, 4, val(6, FlagACKSeen, 300)) // a packet on pair 6
	put(dst, 5, val(60, 0, 200))          // its own pair under key 5
	put(dst, 7, val(70, 0, 200))          // its own pair under a new key
	// What the old program did before it was replaced.
	put(src, 1, val(2, 0, 150))             // replaced pair 1
	put(src, 2, val(3, FlagFINClient, 150)) // a packet on pair 3
	put(src, 3, val(5, 0, 150))             // replaced pair 4
	put(src, 4, val(6, FlagFINClient, 150)) // a packet on pair 6
	del(src, 5)                             // ended pair 7
	del(src, 6)                             // ended pair 9
	put(src, 7, val(8, 0, 150))             // its own pair under the new key
	if err := mig.CatchUp(); err != nil {
		t.Fatal(err)
	}
	want := map[int]*FlowValue{
		1: ptr(val(50, 0, 200)),
		2: nil,
		3: ptr(val(5, 0, 150)),
		4: ptr(val(6, FlagACKSeen|FlagFINClient, 300)),
		5: ptr(val(60, 0, 200)),
		6: nil,
		7: ptr(val(70, 0, 200)),
	}
	check := func() {
		t.Helper()
		for i, w := range want {
			var got FlowValue
			err := dst.Lookup(key(i), &got)
			switch {
			case w == nil && err == nil:
				t.Errorf("key %d: %+v, want none", i, got)
			case w != nil && err != nil:
				t.Errorf("key %d: %v, want %+v", i, err, *w)
			case w != nil && got != *w:
				t.Errorf("key %d: %+v, want %+v", i, got, *w)
			}
		}
	}
	check()
	// The old program touches key 1 again: the new program's pair stays.
	put(src, 1, val(2, FlagFINClient, 160))
	if err := mig.CatchUp(); err != nil {
		t.Fatal(err)
	}
	check()
}

func ptr[T any](v T) *T { return &v }
