package dataplane

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// RebuildSNATPorts sets the bit of every reverse entry that holds its
// port (live, backend time-wait, HOLD), for each SNAT address at its own
// index, and clears every other bit: freed ports, ports outside the
// range, other addresses and forward entries hold none.
func TestRebuildSNATPorts(t *testing.T) {
	d, err := Load(Options{SNAT: SNATSpace{Addrs: 2, PortLo: 40000, PortHi: 40199}, MaxConnections: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	a0, a1 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")
	s := Settings{SNAT: []netip.Addr{a0, a1}, SNATPortLo: 40000, SNATPortHi: 40199, Services: OneService(a0, []PortMap{{Local: 80, Remote: 8080}})}
	if _, err := d.Configure(s); err != nil {
		t.Fatal(err)
	}
	backend := netip.MustParseAddr("192.0.2.33")
	rev := func(snat netip.Addr, port uint16, id uint16, flags uint32) {
		k := NewFlowKey(netip.AddrPortFrom(backend, 8080), netip.AddrPortFrom(snat, port), DirBackend)
		if err := d.PutFlow(k, FlowValue{Generation: uint32(port), BackendId: id, Flags: flags}); err != nil {
			t.Fatal(err)
		}
	}
	rev(a0, 40000, 5, 0)                                // live
	rev(a0, 40130, 5, FlagInitBackend)                  // (time-wait) still held
	rev(a1, 40199, 5, FlagHold)                         // HOLD, second address
	rev(a0, 40001, 5, FlagPortFreed)                    // freed
	rev(a0, 40300, 5, 0)                                // outside the range
	rev(netip.MustParseAddr("192.0.2.99"), 40002, 5, 0) // not a SNAT address
	rev(a1, 40003, 1023, 0)                             // the last backend id
	fwd := NewFlowKey(netip.MustParseAddrPort("192.0.2.20:40004"), netip.MustParseAddrPort("192.0.2.10:80"), DirClient)
	if err := d.PutFlow(fwd, FlowValue{Generation: 1, BackendId: 5}); err != nil {
		t.Fatal(err)
	}
	// A stale bit of a port nobody holds.
	g := geometryOf(&d.cfg)
	w, mask, _ := g.bit(6, protoTCP, be32(a0), 40010)
	if err := d.objs.XlbSnatPorts.Update(w, mask, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}

	if err := d.RebuildSNATPorts(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   uint32
		addr int
		want []uint16
	}{
		{5, 0, []uint16{40000, 40130}},
		{5, 1, []uint16{40199}},
		{6, 0, nil},
		{1023, 1, []uint16{40003}},
	} {
		got, err := d.FixtureTakenSNATPorts(tc.id, tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("backend %d address %d: %v, want %v", tc.id, tc.addr, got, tc.want)
		}
	}

	// Another address order lays the bitmap out anew.
	prev := d.cfg
	s.SNAT = []netip.Addr{a1, a0}
	if _, err := d.Configure(s); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	err = d.syncSNATPortsLocked(prev)
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := d.FixtureTakenSNATPorts(5, 0); !slices.Equal(got, []uint16{40199}) {
		t.Errorf("after the reorder, backend 5 address 0 (%s): %v, want [40199]", a1, got)
	}
	if got, _ := d.FixtureTakenSNATPorts(5, 1); !slices.Equal(got, []uint16{40000, 40130}) {
		t.Errorf("after the reorder, backend 5 address 1 (%s): %v, want [40000 40130]", a0, got)
	}
}
