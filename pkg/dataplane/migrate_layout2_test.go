package dataplane

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane/pins"
)

// Layout 2's counters keep their index in layout 3: enum xlb_counter only
// grew at its end, so the migration copies the map by index.
func TestLayout2CountersKeepTheirIndexes(t *testing.T) {
	for i, c := range layout2Counters {
		if int(c) != i {
			t.Errorf("layout 2 counter %d is %d in this build", i, c)
		}
	}
	if int(xlbXlbCounterXLB_C_MAX) < len(layout2Counters) {
		t.Errorf("XLB_C_MAX %d < layout 2's %d", xlbXlbCounterXLB_C_MAX, len(layout2Counters))
	}
}

// The migration's test host: a fixed neighbour table and clock.
var (
	l2Ifindex   = 7
	l2Listen    = netip.MustParseAddr("192.0.2.10")
	l2Backends  = []netip.Addr{netip.MustParseAddr("192.0.2.33"), netip.MustParseAddr("192.0.2.37")}
	l2Client    = netip.MustParseAddr("192.0.2.20")
	l2Unknown   = netip.MustParseAddr("192.0.2.21") // a client whose MAC the table does not have
	l2OwnMAC    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x10}
	l2Now       = uint32(77777)
	l2Neighbour = map[netip.Addr]net.HardwareAddr{
		l2Backends[0]: {0x02, 0, 0, 0, 0, 0x33},
		l2Backends[1]: {0x02, 0, 0, 0, 0, 0x37},
		l2Client:      {0x02, 0, 0, 0, 0, 0x20},
	}
)

func l2MAC(ip netip.Addr) net.HardwareAddr {
	if m, ok := l2Neighbour[ip]; ok {
		return m
	}
	return net.HardwareAddr{0x02, 0, 0, 0, 0xee, ip.As4()[3]}
}

func l2Host() migrationHost {
	return migrationHost{
		Neighbours: func(ifindex int) ([]neighbour, error) {
			if ifindex != l2Ifindex {
				return nil, nil
			}
			var out []neighbour
			for ip, mac := range l2Neighbour {
				out = append(out, neighbour{IP: ip, MAC: [6]byte(mac)})
			}
			return out, nil
		},
		Now:          func() (uint32, error) { return l2Now, nil },
		ClaimNextHop: claimNextHopOf,
	}
}

// l2Pair is pair i of the layout 2 state: client port 30000+i (client
// l2Unknown for every third pair) to backend i%2, SNAT port 40000+i.
func l2Pair(i int) []Layout2Entry {
	client := l2Client
	if i%3 == 2 {
		client = l2Unknown
	}
	b := l2Backends[i%2]
	fk := NewFlowKey(netip.AddrPortFrom(client, uint16(30000+i)), netip.AddrPortFrom(l2Listen, 80), DirClient)
	fv := FlowValue{SaddrBe: be32(l2Listen), DaddrBe: be32(b), SportBe: be16(uint16(40000 + i)), DportBe: be16(8080),
		CsumIp: uint16(i), CsumL4: uint16(100 + i), Generation: uint32(i + 1), LastSeen: uint32(1000 + i),
		BackendId: uint16(3 + 4*(i%2)), Flags: []uint32{0, FlagFINClient, FlagFINClient | FlagFINBackend | FlagClosedFIN}[i%3]}
	rv := FlowValue{SaddrBe: be32(l2Listen), DaddrBe: fk.SaddrBe, SportBe: be16(80), DportBe: fk.SportBe,
		CsumIp: uint16(200 + i), CsumL4: uint16(300 + i), Generation: fv.Generation, LastSeen: uint32(1001 + i), BackendId: fv.BackendId}
	return []Layout2Entry{
		{Key: fk, Value: fv, Hop: NextHop{Ifindex: l2Ifindex, SrcMAC: l2OwnMAC, DstMAC: l2MAC(b)}},
		{Key: fv.Peer(fk), Value: rv, Hop: NextHop{Ifindex: l2Ifindex, SrcMAC: l2OwnMAC, DstMAC: l2MAC(client)}},
	}
}

// l2Settings are the layout 2 state's settings.
var l2Settings = Settings{SNAT: []netip.Addr{l2Listen}, SNATPortLo: migrateSNAT.PortLo, SNATPortHi: migrateSNAT.PortHi,
	Services: OneService(l2Listen, []PortMap{{Local: 80, Remote: 8080}})}

// wantLayout3 is what entry e of layout 2 must become (through layout 3
// to this one).
func wantLayout3(e Layout2Entry) FlowValue {
	v := e.Value
	v.Flags &= layout2FlagBits
	if e.Key.Direction() == DirClient {
		v.Flags |= FlagSYNACK | FlagEstablished
	}
	v.Nexthop, v.TrackSeq, v.TrackWin, v.Wscale, v.Pad = 0, 0, 0, WScaleUnknown, 0
	v.MemberId = v.BackendId // layout 9: the member id of the one service
	return v
}

// wantHop is the next hop entry e's slot must hold: the neighbour whose
// MAC the table has, else the L2 sender.
func wantHop(e Layout2Entry) NextHop {
	h := e.Hop
	h.Used = l2Now
	dst := addrFromBE32(e.Value.DaddrBe)
	if _, ok := l2Neighbour[dst]; ok {
		h.IP = dst
	}
	return h
}

// Pins of layout 2 (real maps in layout 2's shapes, as release 84dceb3
// left them) are copied into this build's maps: every flow entry gets a
// next-hop slot holding its interface and MACs (the neighbour's address
// from the host's table, or an L2-sender slot), the handshake flags
// (forward entries), an unknown window scale; the config gets its SNAT
// address list and bitmap words; every other map is copied by index; the
// SNAT port bitmap holds every pair's port. The second pass merges what
// the old program did meanwhile, the new pair's port included. Both the
// batch and the per-key path.
func TestMigrateFromLayout2(t *testing.T) {
	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { testMigrateFromLayout2(t, batch) })
	}
}

func testMigrateFromLayout2(t *testing.T, batch bool) {
	src := layout2Maps(t, 64, false)
	putLayout2Config(t, src[xlbMapXlbCfg], l2Settings, 1)
	var entries []Layout2Entry
	for i := range 12 {
		entries = append(entries, l2Pair(i)...)
	}
	putLayout2Entries(t, src[xlbMapXlbFlows], entries)
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	per := make([]uint64, ncpu)
	for cpu := range per {
		per[cpu] = uint64(10*cpu + 3)
	}
	last := uint32(len(layout2Counters) - 1)
	for _, k := range []uint32{uint32(xlbXlbCounterXLB_C_PAIRS_CREATED), last} {
		if err := src[xlbMapXlbCounters].Update(k, per, ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	if err := src[xlbMapXlbReaped].Update(uint32(6), uint64(9) /* member 0: the cell keeps its index through layout 11 (16 reasons a member) */, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if err := src[xlbMapXlbSnatCursors].Update(uint32(3), uint32(1234), ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}

	d, err := Load(Options{SNAT: migrateSNAT, MaxConnections: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	mig, err := newMigration(currentLayout(), 2, src, d.mapsByName(), batch, l2Host())
	if err != nil {
		t.Fatal(err)
	}
	mig.Derive = d.rebuildSNATPortsLocked
	if err := mig.CopyAll(); err != nil {
		t.Fatal(err)
	}
	checkLayout2Flows(t, d, entries)

	var cfg xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &cfg); err != nil {
		t.Fatal(err)
	}
	old := config8{ListenIpBe: be32(l2Listen), SnatPortLo: 40000, SnatPortHi: 40999, Nports: 1, ActiveSet: 1, Nsnat: 1, SnatWords: 16}
	old.Ports[0] = pins.PortMap{LocalPortBe: be16(80), RemotePortBe: be16(8080)}
	old.SnatIpsBe[0] = be32(l2Listen)
	checkMigratedConfig(t, d, old)
	for _, name := range []string{xlbMapXlbCounters, xlbMapXlbReaped, xlbMapXlbSnatCursors, xlbMapXlbBackendStats, xlbMapXlbPairEvents} {
		srcE, dstE := entriesOf(t, src[name]), entriesOf(t, d.mapsByName()[name])
		for k, v := range srcE {
			if !bytes.Equal(dstE[k], v) {
				t.Errorf("%s: key %x: %x, want %x", name, k, dstE[k], v)
			}
		}
	}
	checkMigratedState(t, d, src[xlbMapXlbShared])
	checkTakenPorts(t, d, entries)

	// The old program runs on: a new pair, a close, a count.
	more := l2Pair(20)
	putLayout2Entries(t, src[xlbMapXlbFlows], more)
	closing := entries[0]
	closing.Value.Flags |= FlagRSTClient | FlagClosedRST
	closing.Value.LastSeen += 500
	putLayout2Entries(t, src[xlbMapXlbFlows], []Layout2Entry{closing})
	for cpu := range per {
		per[cpu] += 2
	}
	if err := src[xlbMapXlbCounters].Update(last, per, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if err := mig.CatchUp(); err != nil {
		t.Fatal(err)
	}
	entries[0] = closing
	entries = append(entries, more...)
	checkLayout2Flows(t, d, entries)
	checkTakenPorts(t, d, entries)
	var got []uint64
	if err := d.objs.XlbCounters.Lookup(last, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, per) {
		t.Errorf("counter %d after the second pass: %v, want %v", last, got, per)
	}
}

// checkLayout2Flows checks that d's flow map holds exactly entries,
// converted, each with the slot of its next hop.
func checkLayout2Flows(t *testing.T, d *Dataplane, entries []Layout2Entry) {
	t.Helper()
	got := entriesOf(t, d.objs.XlbFlows)
	if len(got) != len(entries) {
		t.Errorf("%d flow entries, want %d", len(got), len(entries))
	}
	slots := map[string]uint32{}
	for _, e := range entries {
		raw, ok := got[string(toBytes(&e.Key))]
		if !ok {
			t.Errorf("%v: missing", e.Key)
			continue
		}
		v, err := fromBytes[FlowValue](raw)
		if err != nil {
			t.Fatal(err)
		}
		id := v.Nexthop
		v.Nexthop = 0
		if w := wantLayout3(e); v != w {
			t.Errorf("%v: %+v, want %+v", e.Key, v, w)
		}
		h, err := d.NextHop(id)
		if err != nil {
			t.Fatal(err)
		}
		wh := wantHop(e)
		if h.String() != wh.String() || h.Used != wh.Used {
			t.Errorf("%v: next hop %d is %v (used %d), want %v (used %d)", e.Key, id, h, h.Used, wh, wh.Used)
		}
		var dmac [6]byte
		copy(dmac[:], wh.DstMAC)
		ipBe := uint32(0)
		if wh.IP.IsValid() {
			ipBe = be32(wh.IP)
		}
		if s := nextHopSlots(uint32(wh.Ifindex), ipBe, dmac); !slices.Contains(s[:], id) {
			t.Errorf("%v: slot %d is not one of its next hop's %v", e.Key, id, s)
		}
		if prev, ok := slots[wh.String()]; ok && prev != id {
			t.Errorf("next hop %v has two slots, %d and %d", wh, prev, id)
		}
		slots[wh.String()] = id
	}
}

// checkTakenPorts checks that the SNAT port bitmap holds the ports of the
// reverse entries among entries, and only those.
func checkTakenPorts(t *testing.T, d *Dataplane, entries []Layout2Entry) {
	t.Helper()
	want := map[uint32][]uint16{}
	for _, e := range entries {
		if e.Key.Direction() == DirBackend {
			want[uint32(e.Value.BackendId)] = append(want[uint32(e.Value.BackendId)], e.Key.Dst().Port())
		}
	}
	for id := range MaxBackends {
		got, err := d.FixtureTakenSNATPorts(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		w := want[id]
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("backend %d: taken ports %v, want %v", id, got, w)
		}
	}
}
