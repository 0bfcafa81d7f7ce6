package sched

import (
	"encoding/binary"
	"math/bits"
	"net/netip"

	"github.com/xlbproject/xlb/pkg/limits"
)

// The Maglev hashes of a new connection (DESIGN §9 maglev.hash): the Linux
// kernel's jhash (Bob Jenkins' lookup3, include/linux/jhash.h) over
// host-order 32-bit words with the fixed seed limits.SchedSeed, as the data
// path computes them (bpf/jhash.h sched_hash). Every host and every version
// computes the same value for the same connection, so hosts behind ECMP
// agree on its backend; TestHashGolden freezes the values.

const jhashInitval = 0xdeadbeef

// HashFiveTuple is the five_tuple hash of an IPv4 connection:
// jhash_3words(saddr, daddr, sport<<16 | dport, seed ^ proto), the
// addresses as host-order words (192.0.2.1 is 0xc0000201).
func HashFiveTuple(saddr, daddr netip.Addr, sport, dport uint16, proto uint8) uint32 {
	return jhash3(word(saddr), word(daddr), uint32(sport)<<16|uint32(dport), uint32(limits.SchedSeed)^uint32(proto))
}

// HashClientIP is the client_ip hash of an IPv4 client:
// jhash_1word(saddr, seed).
func HashClientIP(saddr netip.Addr) uint32 {
	return jhash1(word(saddr), uint32(limits.SchedSeed))
}

// word is an IPv4 address as a host-order word; 0 for any other.
func word(a netip.Addr) uint32 {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func jhash3(a, b, c, initval uint32) uint32 {
	return jhashNwords(a, b, c, initval+jhashInitval+3<<2)
}

func jhash1(a, initval uint32) uint32 {
	return jhashNwords(a, 0, 0, initval+jhashInitval+1<<2)
}

// jhashNwords is the kernel's __jhash_nwords: the initval added to each
// word, then __jhash_final.
func jhashNwords(a, b, c, initval uint32) uint32 {
	a += initval
	b += initval
	c += initval
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}
