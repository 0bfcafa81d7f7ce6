package dataplane

import (
	"net"
	"testing"
)

// The slots of xlb_if_mac_slots (ifmacs.go): an interface's address sits
// in slot ifindex % MaxInterfaces unless another interface holds the
// slot, and in xlb_if_macs always; a change or removal gives the slot up
// first, so the data path falls back to the hash while it happens.
func TestIfMACSlots(t *testing.T) {
	d, err := Load(Options{SNAT: migrateSNAT, MaxConnections: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	n := MaxInterfaces
	a, b, c := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}, net.HardwareAddr{2, 0, 0, 0, 0, 0xc}
	slot := func(want uint32, addr net.HardwareAddr) {
		t.Helper()
		var s xlbIfMacSlot
		if err := d.objs.XlbIfMacSlots.Lookup(uint32(5), &s); err != nil {
			t.Fatal(err)
		}
		if s.Ifindex != want || (want != 0 && net.HardwareAddr(s.Addr[:]).String() != addr.String()) {
			t.Fatalf("slot 5 holds ifindex %d %s, want ifindex %d %s", s.Ifindex, net.HardwareAddr(s.Addr[:]), want, addr)
		}
	}
	hash := func(ifindex int, want net.HardwareAddr) {
		t.Helper()
		got, err := d.InterfaceMAC(ifindex)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("ifindex %d: %s in xlb_if_macs, want %s", ifindex, got, want)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.writeIfMACLocked(5, a))
	slot(5, a)
	must(d.writeIfMACLocked(5+n, b)) // the same slot: the hash only
	slot(5, a)
	hash(5+n, b)
	must(d.writeIfMACLocked(5, c)) // a change of the holder's address
	slot(5, c)
	hash(5, c)
	must(d.dropIfMACLocked(5))
	slot(0, nil)
	hash(5, nil)
	must(d.writeIfMACLocked(5+n, b)) // the slot is free again
	slot(uint32(5+n), b)
	must(d.writeIfMACLocked(5+n, nil)) // not an Ethernet address: removed
	slot(0, nil)
	hash(5+n, nil)
}
