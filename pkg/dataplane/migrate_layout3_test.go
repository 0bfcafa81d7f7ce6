package dataplane

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane/pins"
)

// l3Pair is pair i of the layout 3 state: client port 30000+i to backend
// id 3 or 7, SNAT port 40000+i, every third one embryonic (its SYN-ACK
// still to come), the others established with tracked windows.
func l3Pair(i int) (fk FlowKey, fv FlowValue, rk FlowKey, rv FlowValue) {
	b, id := l2Backends[i%2], uint16(3+4*(i%2))
	fk = NewFlowKey(netip.AddrPortFrom(l2Client, uint16(30000+i)), netip.AddrPortFrom(l2Listen, 80), DirClient)
	fv = FlowValue{SaddrBe: be32(l2Listen), DaddrBe: be32(b), SportBe: be16(uint16(40000 + i)), DportBe: be16(8080),
		CsumIp: uint16(i), CsumL4: uint16(100 + i), Nexthop: uint32(10 + i%2), Generation: uint32(i + 1), LastSeen: uint32(1000 + i),
		TrackSeq: uint32(5000 + i), TrackWin: 64240, BackendId: id, Wscale: 7,
		Flags: FlagSYNACK | FlagEstablished | FlagACKSeen}
	rv = FlowValue{SaddrBe: be32(l2Listen), DaddrBe: fk.SaddrBe, SportBe: be16(80), DportBe: fk.SportBe,
		CsumIp: uint16(200 + i), CsumL4: uint16(300 + i), Nexthop: 12, Generation: fv.Generation, LastSeen: uint32(1001 + i),
		TrackSeq: uint32(9000 + i), TrackWin: 65160, BackendId: id, Wscale: 6, Flags: FlagEstablished | FlagACKSeen}
	if i%3 == 0 {
		fv.Flags, fv.TrackWin, rv.Flags, rv.TrackSeq, rv.TrackWin, rv.Wscale = 0, 0, 0, 0, 0, WScaleNone
	}
	return fk, fv, fv.Peer(fk), rv
}

// putLayout3Pair writes pair i into a layout 3 flow map (BPF_ANY) and
// returns its entries as layout 4 holds them.
func putLayout3Pair(t *testing.T, m *ebpf.Map, i int) map[FlowKey]FlowValue {
	t.Helper()
	fk, fv, rk, rv := l3Pair(i)
	for _, e := range []struct {
		k FlowKey
		v FlowValue
	}{{fk, fv}, {rk, rv}} {
		if err := m.Update(toBytes(&e.k), asValue3(e.v), ebpf.UpdateAny); err != nil {
			t.Fatalf("layout 3 entry %v: %v", e.k, err)
		}
	}
	return map[FlowKey]FlowValue{fk: fv, rk: rv}
}

// Pins of layout 3 are copied into this build's maps: every flow entry
// keeps every field, its SYN not timed (syn_us 0); the routable sets keep
// their ids and addresses, without ports; the handshake histograms start
// empty; every other map is copied byte for byte; the SNAT port bitmap
// holds every pair's port. The second pass merges what the old program did
// meanwhile. Both the batch and the per-key path.
func TestMigrateFromLayout3(t *testing.T) {
	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { testMigrateFromLayout3(t, batch) })
	}
}

func testMigrateFromLayout3(t *testing.T, batch bool) {
	src := layout3Maps(t, 64)
	cfg := config8{ListenIpBe: be32(l2Listen), SnatPortLo: migrateSNAT.PortLo, SnatPortHi: migrateSNAT.PortHi, Nports: 1,
		ActiveSet: 1, Nsnat: 1, SnatWords: migrateSNAT.words()}
	cfg.Ports[0] = pins.PortMap{LocalPortBe: be16(80), RemotePortBe: be16(8080)}
	cfg.SnatIpsBe[0] = be32(l2Listen)
	if err := src[xlbMapXlbCfg].Update(uint32(0), toBytes(&cfg)[:config5Size], ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	sets := [2]backendSet3{{Count: 1}, {Count: 2}}
	sets[0].Entries[0] = backendRef3{IpBe: be32(l2Backends[0]), Id: 3}
	sets[1].Entries[0], sets[1].Entries[1] = sets[0].Entries[0], backendRef3{IpBe: be32(l2Backends[1]), Id: 7}
	for slot, s := range sets {
		if err := src[xlbMapXlbBackendSets].Update(uint32(slot), toBytes(&s), ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	want := map[FlowKey]FlowValue{}
	for i := range 9 {
		for k, v := range putLayout3Pair(t, src[xlbMapXlbFlows], i) {
			v.MemberId = v.BackendId // layout 9: the member id of layout 8's one service
			want[k] = v
		}
	}
	if err := src[xlbMapXlbReaped].Update(uint32(2), uint64(9) /* member 0: the cell keeps its index through layout 11 (16 reasons a member) */, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}

	d, err := Load(Options{SNAT: migrateSNAT, MaxConnections: 64, Disable: []Feature{FeatureRingBuf}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	mig, err := newMigration(currentLayout(), 3, src, d.mapsByName(), batch, migrationHost{})
	if err != nil {
		t.Fatal(err)
	}
	mig.Derive = d.rebuildSNATPortsLocked
	if err := mig.CopyAll(); err != nil {
		t.Fatal(err)
	}
	checkFlows(t, d, want)
	for slot, s := range sets {
		var got xlbBackendSet
		if err := d.objs.XlbBackendSets.Lookup(uint32(slot), &got); err != nil {
			t.Fatal(err)
		}
		if got.Count != s.Count {
			t.Errorf("routable set %d: %d backends, want %d", slot, got.Count, s.Count)
		}
		for i, r := range s.Entries[:s.Count] {
			if e := got.Entries[i]; e != (xlbBackendRef{IpBe: r.IpBe, Id: uint16(r.Id), Member: uint16(r.Id)}) {
				t.Errorf("routable set %d entry %d: %+v, want id %d at %s without a port", slot, i, e, r.Id, addrFromBE32(r.IpBe))
			}
		}
	}
	hs, err := d.HandshakeHistograms()
	if err != nil {
		t.Fatal(err)
	}
	for id, h := range hs {
		if h != (Histogram{}) {
			t.Errorf("backend %d: handshakes %+v after the migration, want none", id, h)
		}
	}
	checkMigratedConfig(t, d, cfg) // layout 6 appended fields, zero until Configure
	for _, name := range []string{xlbMapXlbReaped, xlbMapXlbCounters, xlbMapXlbNexthops} {
		srcE, dstE := entriesOf(t, src[name]), entriesOf(t, d.mapsByName()[name])
		for k, v := range srcE {
			got := dstE[k]
			if !bytes.Equal(got, v) {
				t.Errorf("%s: key %x: %x, want %x", name, k, got, v)
			}
		}
	}
	checkPairPorts(t, d, want)

	// The old program runs on: a new pair.
	for k, v := range putLayout3Pair(t, src[xlbMapXlbFlows], 20) {
		v.MemberId = v.BackendId
		want[k] = v
	}
	if err := mig.CatchUp(); err != nil {
		t.Fatal(err)
	}
	checkFlows(t, d, want)
	checkPairPorts(t, d, want)
}

// checkFlows checks that d's flow map holds exactly want, each entry's SYN
// not timed.
func checkFlows(t *testing.T, d *Dataplane, want map[FlowKey]FlowValue) {
	t.Helper()
	got := entriesOf(t, d.objs.XlbFlows)
	if len(got) != len(want) {
		t.Errorf("%d flow entries, want %d", len(got), len(want))
	}
	for k, w := range want {
		raw, ok := got[string(toBytes(&k))]
		if !ok {
			t.Errorf("%v: missing", k)
			continue
		}
		var v FlowValue
		decodeFlowValue(raw, &v)
		if v != w || v.SynUs != 0 {
			t.Errorf("%v: %+v, want %+v", k, v, w)
		}
	}
}

// checkPairPorts checks that the SNAT port bitmap holds the ports of the
// reverse entries of want, and only those.
func checkPairPorts(t *testing.T, d *Dataplane, want map[FlowKey]FlowValue) {
	t.Helper()
	var entries []Layout2Entry
	for k, v := range want {
		entries = append(entries, Layout2Entry{Key: k, Value: v})
	}
	checkTakenPorts(t, d, entries)
}

// mapsByName, which pins and migrations go by, names every map of the
// object: a map left out would be neither pinned nor copied.
func TestMapsByNameHasEveryMap(t *testing.T) {
	spec, err := loadXlb()
	if err != nil {
		t.Fatal(err)
	}
	d, err := Load(Options{SNAT: migrateSNAT, MaxConnections: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	byName := d.mapsByName()
	for name := range spec.Maps {
		if byName[name] == nil && !strings.HasPrefix(name, ".") {
			t.Errorf("map %s is not in mapsByName", name)
		}
	}
}
