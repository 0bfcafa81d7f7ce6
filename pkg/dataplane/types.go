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

// FlowValue is one directional entry: the rewrite recipe (its egress
// interface and MACs in the next-hop slot Nexthop names), the pair link
// (Generation, BackendId; the counterpart's key is Peer), the pair and
// entry state (Flags), its sender's TCP window (TrackSeq, TrackWin,
// Wscale) and, on a forward entry, its SYN's time for the handshake
// histogram (SynUs: CLOCK_MONOTONIC µs, low 32 bits; 0: not timed)
// (bpf/layout.h struct flow_value, 48 bytes). LastSeen holds the low 32
// bits of the data path's clock: compare it with Jiffies.Low32 and Age.
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
	// FlagClosedFIN and FlagClosedRST mark a terminal pair, set once by
	// the packet that ended it: both FINs (time-wait) or a RST.
	FlagClosedFIN = uint32(xlbXlbFlowFlagsXLB_F_CLOSED_FIN)
	FlagClosedRST = uint32(xlbXlbFlowFlagsXLB_F_CLOSED_RST)
	// FlagSYNACK: the backend's SYN-ACK went through; FlagEstablished:
	// the client ACKed it (both entries). A pair without FlagEstablished
	// is embryonic (DESIGN §6b).
	FlagSYNACK      = uint32(xlbXlbFlowFlagsXLB_F_SYNACK)
	FlagEstablished = uint32(xlbXlbFlowFlagsXLB_F_ESTABLISHED)
)

// Entry-state bits, on either entry (FlowValue.Flags).
const (
	// FlagACKSeen: the entry's sender has sent an ACK, so TrackSeq and
	// TrackWin hold its receive window.
	FlagACKSeen = uint32(xlbXlbFlowFlagsXLB_F_ACK_SEEN)
	// FlagPortFreed (reverse entry): the pair ended leaving the backend
	// no TIME_WAIT; its SNAT port is free to take over.
	FlagPortFreed = uint32(xlbXlbFlowFlagsXLB_F_PORT_FREED)
	// FlagHold (reverse entry): lone on purpose, keeping the SNAT port of
	// a replaced or time-wait-reaped pair whose backend closed first, while
	// its TIME_WAIT may last (ReapHold).
	FlagHold = uint32(xlbXlbFlowFlagsXLB_F_HOLD)
)

// Timestamp bits (FlowValue.Flags; bpf/tsopt.h).
const (
	// FlagTSSyn (forward entry): the client's SYN carried the timestamp
	// option; FlowValue.TsOff is the pair's offset.
	FlagTSSyn = uint32(xlbXlbFlowFlagsXLB_F_TS_SYN)
	// FlagTS (both entries): the backend's SYN-ACK carried timestamps too
	// (negotiated, RFC 7323 §3.2): every TSval toward the backend is
	// raised by TsOff, every TSecr toward the client lowered by it.
	FlagTS = uint32(xlbXlbFlowFlagsXLB_F_TS)
)

// UDP bits (FlowValue.Flags; layout 11, issue 31).
const (
	// FlagUDP (both entries, set at creation): a UDP pair.
	FlagUDP = uint32(xlbXlbFlowFlagsXLB_F_UDP)
	// FlagUDPReplied (both entries, forward first): the backend answered;
	// the stream timeout applies.
	FlagUDPReplied = uint32(xlbXlbFlowFlagsXLB_F_UDP_REPLIED)
)

const protoTCP = 6

// IP protocol numbers of FlowKey.Proto (and of a close event's key).
const (
	IPProtoTCP uint8 = 6
	IPProtoUDP uint8 = 17
)

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

// NewUDPFlowKey builds a UDP flow key from host-order values.
func NewUDPFlowKey(src netip.AddrPort, dst netip.AddrPort, dir Direction) FlowKey {
	k := NewFlowKey(src, dst, dir)
	k.Proto = IPProtoUDP
	return k
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

// Terminal reports whether a forward entry's flags mark its pair terminal
// (FlagClosedFIN or FlagClosedRST).
func Terminal(flags uint32) bool { return flags&(FlagClosedFIN|FlagClosedRST) != 0 }

// Peer returns the key of the counterpart of the entry v stored under k:
// the recipe read backwards, in the other direction, of k's protocol
// (bpf/flow.h flow_peer_key: a UDP pair's entries both carry FlagUDP).
func (v *FlowValue) Peer(k FlowKey) FlowKey {
	return FlowKey{
		SaddrBe: v.DaddrBe, DaddrBe: v.SaddrBe, SportBe: v.DportBe, DportBe: v.SportBe,
		Proto: k.Proto, Dir: k.Dir ^ 1,
	}
}

// Low32 is the part of a clock reading that flow entries and close events
// store.
func (j Jiffies) Low32() uint32 { return uint32(j) }

// Age is how long before now the 32-bit time t was, in ticks; 0 when t is
// not in the past (stamped after now was read). Exact for ages below 2^31
// ticks (bpf/layout.h struct flow_value).
func Age(now Jiffies, t uint32) Jiffies {
	d := int32(now.Low32() - t)
	if d <= 0 {
		return 0
	}
	return Jiffies(d)
}

// Widen returns the full clock reading whose low 32 bits are t, taking the
// one closest before now (or at most 2^31 ticks after it).
func Widen(now Jiffies, t uint32) Jiffies {
	return now - Jiffies(int64(int32(now.Low32()-t)))
}
