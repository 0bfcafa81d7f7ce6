package testnet

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// VethEnd is one end of a veth pair to create with AddVeth.
type VethEnd struct {
	// Netlink is a handle of the namespace the end lives in; nil in the
	// second end means the first end's namespace.
	Netlink *netlink.Handle
	// Netns is the same namespace, needed to create the second end there
	// directly; ignored in the first end and when the second end's Netlink
	// is nil.
	Netns netns.NsHandle
	Name  string           // at most 15 characters
	MAC   net.HardwareAddr // nil: the kernel picks one
	Addr  netip.Prefix     // IPv4 address to add; zero: none
	// Master is a bridge in the same namespace to make the end a port of;
	// "" for none.
	Master string
}

// VethIndexes are the ifindexes AddVeth gives the two ends, each inside
// its own namespace.
type VethIndexes struct{ A, B int }

// AddVeth creates the veth pair a—b with a in a.Netlink's namespace and b
// created directly in its own (so no end ever exists in another
// namespace), sets the MACs, masters and addresses and brings both ends
// up. A half-made pair is not removed: it goes with its namespace.
func AddVeth(a, b VethEnd) (VethIndexes, error) {
	var idx VethIndexes
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: a.Name, HardwareAddr: a.MAC},
		PeerName:         b.Name,
		PeerHardwareAddr: b.MAC,
	}
	if b.Netlink == nil {
		b.Netlink = a.Netlink
	} else {
		veth.PeerNamespace = netlink.NsFd(b.Netns)
	}
	for _, n := range []string{a.Name, b.Name} {
		if len(n) == 0 || len(n) > 15 {
			return idx, fmt.Errorf("testnet: veth name %q: want 1…15 characters", n)
		}
	}
	if err := a.Netlink.LinkAdd(veth); err != nil {
		return idx, fmt.Errorf("testnet: veth %s <-> %s: %w", a.Name, b.Name, err)
	}
	var err error
	if idx.A, err = a.setUp(); err != nil {
		return idx, err
	}
	if idx.B, err = b.setUp(); err != nil {
		return idx, err
	}
	return idx, nil
}

// setUp enslaves, addresses and raises an end that exists, and returns
// its ifindex.
func (e VethEnd) setUp() (int, error) {
	link, err := e.Netlink.LinkByName(e.Name)
	if err != nil {
		return 0, fmt.Errorf("testnet: %s: %w", e.Name, err)
	}
	if e.Master != "" {
		br, err := e.Netlink.LinkByName(e.Master)
		if err == nil {
			err = e.Netlink.LinkSetMasterByIndex(link, br.Attrs().Index)
		}
		if err != nil {
			return 0, fmt.Errorf("testnet: %s onto bridge %s: %w", e.Name, e.Master, err)
		}
	}
	if e.Addr.IsValid() {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: e.Addr.Addr().AsSlice(), Mask: net.CIDRMask(e.Addr.Bits(), 32)}}
		if err := e.Netlink.AddrAdd(link, a); err != nil {
			return 0, fmt.Errorf("testnet: address %s on %s: %w", e.Addr, e.Name, err)
		}
	}
	if err := e.Netlink.LinkSetUp(link); err != nil {
		return 0, fmt.Errorf("testnet: %s up: %w", e.Name, err)
	}
	return link.Attrs().Index, nil
}
