package floor

import "encoding/binary"

// The floor balancer's checksum deltas, computed once per backend when it
// loads, exactly as bpf/flow.h recipe_csum computes a flow entry's (RFC
// 1624 incremental update, bpf/csum.h): 16-bit words as they sit in memory
// read as host words, accumulated as ~old + new, folded twice with
// end-around carry. Go repeats the arithmetic word for word so that the
// packet path applies the same deltas XLB applies.

// nativeBE32 is a 4-byte network-order field read as a host word (a
// struct's *_be field as the BPF program holds it).
func nativeBE32(b [4]byte) uint32 { return binary.NativeEndian.Uint32(b[:]) }

// nativeBE16 is a port in network order read as a host word.
func nativeBE16(port uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], port)
	return binary.NativeEndian.Uint16(b[:])
}

func csumReplace32(acc, old, new uint32) uint32 {
	acc += uint32(^uint16(old))
	acc += uint32(^uint16(old >> 16))
	acc += uint32(uint16(new))
	acc += uint32(uint16(new >> 16))
	return acc
}

func csumReplace16(acc uint32, old, new uint16) uint32 {
	return acc + uint32(^old) + uint32(new)
}

func csumFold32(s uint32) uint16 {
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return uint16(s)
}

// rewrite is one NAT rewrite of a segment's addresses and ports, every
// field a host word of the network-order value (nativeBE32, nativeBE16).
type rewrite struct {
	fromSaddr, fromDaddr, toSaddr, toDaddr uint32
	fromSport, fromDport, toSport, toDport uint16
}

// deltas returns the folded IPv4 header delta and the TCP delta (pseudo
// header addresses plus both ports) of r, as recipe_csum does.
func (r rewrite) deltas() (ip, l4 uint16) {
	acc := csumReplace32(0, r.fromSaddr, r.toSaddr)
	acc = csumReplace32(acc, r.fromDaddr, r.toDaddr)
	l := csumReplace16(acc, r.fromSport, r.toSport)
	l = csumReplace16(l, r.fromDport, r.toDport)
	return csumFold32(acc), csumFold32(l)
}
