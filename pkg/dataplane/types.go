package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// FlowKey is the exact 5-tuple plus direction of one directional flow entry,
// as seen on the wire before rewriting (bpf/layout.h struct flow_key, 16
// bytes, padding zeroed). Address and port fields are in network byte order.
type FlowKey = xlbFlowKey

// FlowValue is one directional entry: the rewrite recipe, the pair link
// (Peer, Generation, BackendId) and state (bpf/layout.h struct flow_value).
type FlowValue = xlbFlowValue

// Direction of a flow entry.
type Direction uint8

const (
	// DirClient marks the forward entry: client -> listen:local_port.
	DirClient Direction = Direction(xlbXlbDirXLB_DIR_CLIENT)
	// DirBackend marks the reverse entry: backend:remote_port -> SNAT ip:port.
	DirBackend Direction = Direction(xlbXlbDirXLB_DIR_BACKEND)
)

// Close-state bits held on a pair's forward entry (FlowValue.Flags).
const (
	FlagFINClient   = uint32(xlbXlbFlowFlagsXLB_F_FIN_CLIENT)
	FlagFINBackend  = uint32(xlbXlbFlowFlagsXLB_F_FIN_BACKEND)
	FlagRSTClient   = uint32(xlbXlbFlowFlagsXLB_F_RST_CLIENT)
	FlagRSTBackend  = uint32(xlbXlbFlowFlagsXLB_F_RST_BACKEND)
	FlagInitBackend = uint32(xlbXlbFlowFlagsXLB_F_INIT_BACKEND)
)

// MaxBackends is the number of backend ids (0..MaxBackends-1) and the largest
// routable set the data path accepts.
const MaxBackends = 1024

// MaxPorts is the number of port mappings per listen address.
const MaxPorts = 8

const protoTCP = 6

// be32 converts an IPv4 address to the in-memory form of a __be32 field.
func be32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

// addrFromBE32 is the inverse of be32.
func addrFromBE32(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// be16 converts a host-order port to the in-memory form of a __be16 field.
func be16(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

// portFromBE16 is the inverse of be16.
func portFromBE16(v uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], v)
	return binary.BigEndian.Uint16(b[:])
}

// NewFlowKey builds a TCP flow key from host-order values.
func NewFlowKey(src netip.AddrPort, dst netip.AddrPort, dir Direction) FlowKey {
	return FlowKey{
		SaddrBe: be32(src.Addr()),
		DaddrBe: be32(dst.Addr()),
		SportBe: be16(src.Port()),
		DportBe: be16(dst.Port()),
		Proto:   protoTCP,
		Dir:     uint8(dir),
	}
}

// Src returns the key's source address and port.
func (k FlowKey) Src() netip.AddrPort {
	return netip.AddrPortFrom(addrFromBE32(k.SaddrBe), portFromBE16(k.SportBe))
}

// Dst returns the key's destination address and port.
func (k FlowKey) Dst() netip.AddrPort {
	return netip.AddrPortFrom(addrFromBE32(k.DaddrBe), portFromBE16(k.DportBe))
}

// Direction returns which side of the pair the key belongs to.
func (k FlowKey) Direction() Direction { return Direction(k.Dir) }

func (k FlowKey) String() string {
	d := "client"
	if k.Direction() == DirBackend {
		d = "backend"
	}
	return fmt.Sprintf("%s->%s/%s", k.Src(), k.Dst(), d)
}

// NewSrc returns the source address and port the recipe writes.
func (v *FlowValue) NewSrc() netip.AddrPort {
	return netip.AddrPortFrom(addrFromBE32(v.SaddrBe), portFromBE16(v.SportBe))
}

// NewDst returns the destination address and port the recipe writes.
func (v *FlowValue) NewDst() netip.AddrPort {
	return netip.AddrPortFrom(addrFromBE32(v.DaddrBe), portFromBE16(v.DportBe))
}

// Terminal reports whether the pair's close state (forward entry flags) is
// terminal: both FINs seen, or a RST from either side.
func Terminal(flags uint32) bool {
	if flags&(FlagRSTClient|FlagRSTBackend) != 0 {
		return true
	}
	return flags&(FlagFINClient|FlagFINBackend) == FlagFINClient|FlagFINBackend
}
