package flow

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// BenchmarkSweepEntries is the userspace share of a cycle over 1,000,000
// pairs: classifying 2,000,000 entries already read (no syscalls), in the
// order a hash map returns them (pseudo-random).
func BenchmarkSweepEntries(b *testing.B) {
	const pairs = 1_000_000
	keys := make([]dataplane.FlowKey, 2*pairs)
	vals := make([]dataplane.FlowValue, 2*pairs)
	perm := make([]int, 2*pairs)
	x := uint64(88172645463325252)
	for i := range perm {
		perm[i] = i
	}
	for i := len(perm) - 1; i > 0; i-- { // xorshift Fisher-Yates
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		j := int(x % uint64(i+1))
		perm[i], perm[j] = perm[j], perm[i]
	}
	for i := range pairs {
		fk := dataplane.FlowKey{SaddrBe: uint32(i), DaddrBe: 1, SportBe: uint16(i), DportBe: 80, Proto: 6, Dir: 0}
		rk := dataplane.FlowKey{SaddrBe: uint32(i % 200), DaddrBe: 1, SportBe: 8080, DportBe: uint16(i), Proto: 6, Dir: 1}
		f, r := perm[2*i], perm[2*i+1]
		keys[f], keys[r] = fk, rk
		vals[f] = dataplane.FlowValue{Generation: uint32(i + 1), BackendId: uint32(i % 64), Peer: rk, LastSeen: 1000}
		vals[r] = dataplane.FlowValue{Generation: uint32(i + 1), BackendId: uint32(i % 64), Peer: fk, LastSeen: 1000}
	}
	var s sweep
	s.init(1)
	prevRst := map[pairID]struct{}{}
	suspect := newCellSet()
	b.ResetTimer()
	for b.Loop() {
		s.reset(1000, 300*250, 60*250, prevRst, suspect)
		for i := range keys {
			s.entry(&keys[i], &vals[i], false)
		}
		if s.active.total != pairs {
			b.Fatal(s.active.total)
		}
	}
}
