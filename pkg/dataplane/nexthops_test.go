package dataplane

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// The slot hash, against values worked out by hand from the formula in
// bpf/nexthop.h (plan13 §4).
func TestNextHopSlotsFormula(t *testing.T) {
	// 192.0.2.7 in wire order read little-endian: 0x070200c0.
	gold, silver := uint32(0x9E3779B1), uint32(0x85EBCA6B)
	k := uint32(0x070200c0)
	h := 3*gold ^ k*silver
	h ^= h >> 15
	got := NextHopSlots(3, netip.MustParseAddr("192.0.2.7"))
	for i, s := range got {
		if want := (h + uint32(i)) & (MaxNextHops - 1); s != want {
			t.Errorf("probe %d: slot %d, want %d", i, s, want)
		}
	}
	// An L2 sender 02:00:c0:00:02:14: w0 0x0002, w1 0x00c0, w2 0x1402.
	k = (0x0002 | 0x00c0<<16) ^ 0x1402
	h = 5*gold ^ k*silver
	h ^= h >> 15
	l2 := nextHopSlots(5, 0, [6]byte{0x02, 0x00, 0xc0, 0x00, 0x02, 0x14})
	if l2[0] != h&(MaxNextHops-1) {
		t.Errorf("L2-sender slot %d, want %d", l2[0], h&(MaxNextHops-1))
	}
}

// loadBare is a data path without pins or interfaces, closed at cleanup.
func loadBare(t *testing.T) *Dataplane {
	t.Helper()
	d, err := Load(Options{SNAT: migrateSNAT, MaxConnections: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// putSlot writes slot id as the data path would have claimed it.
func putSlot(t *testing.T, d *Dataplane, id uint32, h NextHop) {
	t.Helper()
	s := xlbNexthop{Ifindex: uint32(h.Ifindex), Used: h.Used}
	if h.IP.IsValid() {
		s.IpBe = be32(h.IP)
	}
	copy(s.Smac[:], h.SrcMAC)
	copy(s.Dmac[:], h.DstMAC)
	if err := d.objs.XlbNexthops.Update(id, &s, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
}

func mustHop(t *testing.T, d *Dataplane, id uint32) NextHop {
	t.Helper()
	h, err := d.NextHop(id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// UpdateNeighbour rewrites the destination MAC of every slot of its next
// hop in the probe sequence (a second slot included) and nothing else;
// UpdateInterfaceMAC the source MAC of every slot on its interface. Both
// count what they changed, and an unchanged MAC is no change.
func TestUpdateNextHopMACs(t *testing.T) {
	d := loadBare(t)
	gw := netip.MustParseAddr("192.0.2.1")
	old, moved := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 0x11}
	own, ownNew := net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xbb}
	s := NextHopSlots(4, gw)
	other := NextHopSlots(4, netip.MustParseAddr("192.0.2.2"))
	putSlot(t, d, s[0], NextHop{Ifindex: 4, IP: gw, SrcMAC: own, DstMAC: old, Used: 9})
	putSlot(t, d, s[3], NextHop{Ifindex: 4, IP: gw, SrcMAC: own, DstMAC: old, Used: 9}) // a second slot of the same next hop
	putSlot(t, d, s[1], NextHop{Ifindex: 5, IP: gw, SrcMAC: own, DstMAC: old})          // same address, other interface
	putSlot(t, d, other[0], NextHop{Ifindex: 4, IP: netip.MustParseAddr("192.0.2.2"), SrcMAC: own, DstMAC: old})

	n, err := d.UpdateNeighbour(4, gw, moved)
	if err != nil || n != 2 {
		t.Fatalf("UpdateNeighbour: %d, %v; want 2 slots", n, err)
	}
	for _, id := range []uint32{s[0], s[3]} {
		if h := mustHop(t, d, id); h.DstMAC.String() != moved.String() || h.SrcMAC.String() != own.String() || h.Used != 9 || h.IP != gw {
			t.Errorf("slot %d after UpdateNeighbour: %v", id, h)
		}
	}
	for _, id := range []uint32{s[1], other[0]} {
		if h := mustHop(t, d, id); h.DstMAC.String() != old.String() {
			t.Errorf("slot %d of another next hop changed: %v", id, h)
		}
	}
	if n, err := d.UpdateNeighbour(4, gw, moved); err != nil || n != 0 {
		t.Errorf("UpdateNeighbour again: %d, %v; want 0", n, err)
	}

	n, err = d.UpdateInterfaceMAC(4, ownNew)
	if err != nil || n != 3 {
		t.Fatalf("UpdateInterfaceMAC: %d, %v; want 3 slots", n, err)
	}
	for _, id := range []uint32{s[0], s[3], other[0]} {
		if h := mustHop(t, d, id); h.SrcMAC.String() != ownNew.String() {
			t.Errorf("slot %d after UpdateInterfaceMAC: %v", id, h)
		}
	}
	if h := mustHop(t, d, s[1]); h.SrcMAC.String() != own.String() {
		t.Errorf("slot on another interface changed: %v", h)
	}
	if _, err := d.UpdateNeighbour(4, gw, net.HardwareAddr{1, 2}); err == nil {
		t.Error("a 2-byte MAC was taken")
	}
	if _, err := d.UpdateNeighbour(4, netip.IPv4Unspecified(), moved); err == nil {
		t.Error("the L2-sender address was taken")
	}
}

// FreeNextHops frees a slot only when no entry named it during the pass
// (its bit is clear) and no pair creation stamped it since the pass began.
func TestFreeNextHops(t *testing.T) {
	d := loadBare(t)
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	hop := func(i byte, used uint32) NextHop {
		return NextHop{Ifindex: 2, IP: netip.AddrFrom4([4]byte{192, 0, 2, i}), SrcMAC: mac, DstMAC: mac, Used: used}
	}
	passStart := uint32(1000)
	idle, named, fresh, wrapped := uint32(10), uint32(20), uint32(30), uint32(40)
	putSlot(t, d, idle, hop(1, passStart-1))        // unnamed, stamped before the pass: freed
	putSlot(t, d, named, hop(2, passStart-1))       // named by an entry: kept
	putSlot(t, d, fresh, hop(3, passStart))         // stamped at the pass start: kept
	putSlot(t, d, wrapped, hop(4, passStart-1<<31)) // long ago (clock wrap): freed
	ref := make([]uint64, NextHopWords)
	ref[named/64] |= 1 << (named % 64)
	n, err := d.FreeNextHops(ref, passStart)
	if err != nil || n != 2 {
		t.Fatalf("FreeNextHops: %d, %v; want 2", n, err)
	}
	for id, free := range map[uint32]bool{idle: true, named: false, fresh: false, wrapped: true} {
		if h := mustHop(t, d, id); h.Free() != free {
			t.Errorf("slot %d: %v, want free %v", id, h, free)
		}
	}
	if _, err := d.FreeNextHops(ref[:1], passStart); err == nil {
		t.Error("a short bitset was taken")
	}
}

// claimNextHop shares the slot that holds the next hop already, else
// claims the first free slot of its probe sequence, and fails when every
// probed slot holds another next hop.
func TestClaimNextHop(t *testing.T) {
	d := loadBare(t)
	gw := netip.MustParseAddr("192.0.2.1")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	s := NextHopSlots(4, gw)
	putSlot(t, d, s[0], NextHop{Ifindex: 9, IP: gw, SrcMAC: mac, DstMAC: mac}) // another next hop
	want := xlbNexthop{Ifindex: 4, IpBe: be32(gw), Used: 5}
	id, err := claimNextHop(d.objs.XlbNexthops, want)
	if err != nil || id != s[1] {
		t.Fatalf("claim: %d, %v; want slot %d", id, err, s[1])
	}
	again := want
	again.Dmac = [6]byte(mac) // same (ifindex, ip): the same slot, as it is
	if id, err := claimNextHop(d.objs.XlbNexthops, again); err != nil || id != s[1] {
		t.Fatalf("second claim: %d, %v; want slot %d", id, err, s[1])
	}
	if h := mustHop(t, d, s[1]); h.DstMAC.String() != "00:00:00:00:00:00" {
		t.Errorf("the shared slot was rewritten: %v", h)
	}
	for _, id := range s[2:] {
		putSlot(t, d, id, NextHop{Ifindex: 9, IP: gw, SrcMAC: mac, DstMAC: mac})
	}
	putSlot(t, d, s[1], NextHop{Ifindex: 9, IP: gw, SrcMAC: mac, DstMAC: mac})
	if _, err := claimNextHop(d.objs.XlbNexthops, want); err == nil {
		t.Error("a claim with every probed slot taken succeeded")
	}
	if got := NextHopSlots(4, gw); !slices.Equal(got[:], s[:]) {
		t.Error("NextHopSlots is not deterministic")
	}
}
