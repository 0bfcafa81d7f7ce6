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
	if err := d.objs.XlbIfMacs.Update(uint32(ifindex), &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("dataplane: record the MAC %s of ifindex %d: %w", mac, ifindex, err)
	}
	return nil
}

// dropIfMACLocked removes the address of interface ifindex. Callers hold
// d.mu.
func (d *Dataplane) dropIfMACLocked(ifindex int) error {
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
