package dataplane

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
)

// The interfaces' own Ethernet addresses (bpf/maps.h xlb_if_macs, keyed
// by ifindex; bpf/ours.h): the data path balances only frames addressed
// to the ingress interface's MAC and passes any other (a frame a switch
// or bridge flooded to this port, another host's) to the kernel, which
// drops it as PACKET_OTHERHOST. The map is configuration, not state:
// never pinned, every start writes its own before attaching (Attach), a
// reclaim writes it again (Reclaim), and the next-hop watcher's
// UpdateInterfaceMAC keeps it on the interface's address. An interface
// without an entry accepts every unicast frame.

// writeIfMACLocked records mac as the address of interface ifindex; an
// address that is not a 6-byte Ethernet one removes the entry (the data
// path then accepts every unicast frame on that interface). Callers hold
// d.mu.
func (d *Dataplane) writeIfMACLocked(ifindex int, mac net.HardwareAddr) error {
	if len(mac) != 6 {
		return d.dropIfMACLocked(ifindex)
	}
	v := xlbIfMac{Addr: [6]byte(mac)}
	if err := d.clearIfMACSlotLocked(ifindex); err != nil {
		return err
	}
	if err := d.objs.XlbIfMacs.Update(uint32(ifindex), &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("dataplane: record the MAC %s of ifindex %d: %w", mac, ifindex, err)
	}
	return d.fillIfMACSlotLocked(ifindex, v.Addr)
}

// The slots of xlb_if_mac_slots (bpf/ours.h): interface ifindex's address
// also sits in slot ifindex % XLB_MAX_INTERFACES when no other interface
// holds that slot, so the data path reads it with an array access; any
// other interface's is read from xlb_if_macs alone. The data path reads a
// slot's ifindex first, then its address, so a slot is taken by writing
// the address with ifindex 0 (unused), then the ifindex, and given up by
// writing ifindex 0 with the address unchanged: it never reads an ifindex
// with another interface's or a half-written address.

func ifMACSlot(ifindex int) uint32 { return uint32(ifindex) % uint32(xlbXlbLimitsXLB_MAX_INTERFACES) }

// clearIfMACSlotLocked gives ifindex's slot up when ifindex holds it.
// Callers hold d.mu.
func (d *Dataplane) clearIfMACSlotLocked(ifindex int) error {
	var s xlbIfMacSlot
	if err := d.objs.XlbIfMacSlots.Lookup(ifMACSlot(ifindex), &s); err != nil {
		return fmt.Errorf("dataplane: read the MAC slot of ifindex %d: %w", ifindex, err)
	}
	if s.Ifindex != uint32(ifindex) {
		return nil
	}
	s.Ifindex = 0
	if err := d.objs.XlbIfMacSlots.Update(ifMACSlot(ifindex), &s, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("dataplane: clear the MAC slot of ifindex %d: %w", ifindex, err)
	}
	return nil
}

// fillIfMACSlotLocked writes addr as ifindex's into its slot when the
// slot is unused. Callers hold d.mu.
func (d *Dataplane) fillIfMACSlotLocked(ifindex int, addr [6]byte) error {
	var s xlbIfMacSlot
	if err := d.objs.XlbIfMacSlots.Lookup(ifMACSlot(ifindex), &s); err != nil {
		return fmt.Errorf("dataplane: read the MAC slot of ifindex %d: %w", ifindex, err)
	}
	if s.Ifindex != 0 {
		return nil // another interface's
	}
	s.Addr = addr
	for _, s.Ifindex = range []uint32{0, uint32(ifindex)} {
		if err := d.objs.XlbIfMacSlots.Update(ifMACSlot(ifindex), &s, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("dataplane: record the MAC of ifindex %d in its slot: %w", ifindex, err)
		}
	}
	return nil
}

// dropIfMACLocked removes the address of interface ifindex. Callers hold
// d.mu.
func (d *Dataplane) dropIfMACLocked(ifindex int) error {
	if err := d.clearIfMACSlotLocked(ifindex); err != nil {
		return err
	}
	if err := d.objs.XlbIfMacs.Delete(uint32(ifindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("dataplane: forget the MAC of ifindex %d: %w", ifindex, err)
	}
	return nil
}

// InterfaceMAC is the address the data path takes as interface ifindex's
// own (nil, nil: none recorded, every unicast frame is accepted there).
func (d *Dataplane) InterfaceMAC(ifindex int) (net.HardwareAddr, error) {
	var v xlbIfMac
	err := d.objs.XlbIfMacs.Lookup(uint32(ifindex), &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dataplane: read the MAC of ifindex %d: %w", ifindex, err)
	}
	return net.HardwareAddr(v.Addr[:]), nil
}

// attachedIfindexLocked reports whether the interface ifindex is
// attached. Callers hold d.mu.
func (d *Dataplane) attachedIfindexLocked(ifindex int) bool {
	for _, a := range d.attached {
		if a.Ifindex == ifindex {
			return true
		}
	}
	return false
}
