package sched

import (
	"fmt"
	"math/big"

	"github.com/cespare/xxhash/v2"
)

// MaglevSizes are the Maglev table sizes MaglevSize chooses from: primes,
// each about twice the one before, the smallest being Cilium's default
// (16381) and the largest the documented limit (1048573). ValidMaglevSize
// accepts any prime between the two.
var MaglevSizes = [...]uint32{16381, 32749, 65521, 131071, 262139, 524287, 1048573}

// Maglev table size limits (DESIGN §9; docs/schedulers.md).
const (
	MinMaglevSize = 16381
	MaxMaglevSize = 1048573
	// MaglevSlotsPerMember is the rule for the default size: at least 500
	// slots per member. Cilium's 100 per member (the paper's §5.3) gives
	// 1.1–1.7 % collateral for 50..500 members when one is removed;
	// 500 keeps the worst measured removal under 1 % (0.93 %) for
	// 3..1000 members (TestMaglevRemovalCollateral,
	// BenchmarkMaglevCollateral).
	MaglevSlotsPerMember = 500
	// MinSlotsPerMember is the least a configured table may give each
	// member: a service with more static backends than size/100 is
	// refused (the rule), a Kubernetes one is built and shown
	// overfull.
	MinSlotsPerMember = 100
	// MaxMaglevMembers is the most members MaglevSize sizes a table for.
	MaxMaglevMembers = MaxMaglevSize / MaglevSlotsPerMember
)

// The fixed seeds of the member permutations (xxh64 over the member's
// name). Changing them, the hash or the population moves every client of
// every Maglev service on an upgrade, and breaks the agreement between
// hosts running different versions: TestMaglevGolden guards them.
const (
	maglevSeedOffset uint64 = 0x786c622d6f666673 // "xlb-offs"
	maglevSeedSkip   uint64 = 0x786c622d736b6970 // "xlb-skip"
)

// MaglevSize returns the default table size for n members: the smallest of
// MaglevSizes that is at least MaglevSlotsPerMember*n (16381 for up to 32
// members, 65521 for 100, 524287 for 1000). It returns 0 when n is more
// than MaxMaglevMembers (2097).
func MaglevSize(n int) uint32 {
	for _, m := range MaglevSizes {
		if uint64(max(n, 0))*MaglevSlotsPerMember <= uint64(m) {
			return m
		}
	}
	return 0
}

// MaglevMembers returns the most members a table of size m may be
// configured for: m/MinSlotsPerMember.
func MaglevMembers(m uint32) int {
	return int(m / MinSlotsPerMember)
}

// ValidMaglevSize returns nil when m is a prime within
// MinMaglevSize..MaxMaglevSize. The size must be prime for every member's
// skip to be coprime to it, so that its permutation visits every slot.
func ValidMaglevSize(m uint32) error {
	if m < MinMaglevSize || m > MaxMaglevSize {
		return fmt.Errorf("%w %d outside %d..%d", ErrTableSize, m, MinMaglevSize, MaxMaglevSize)
	}
	if !big.NewInt(int64(m)).ProbablyPrime(0) {
		return fmt.Errorf("%w %d is not prime", ErrTableSize, m)
	}
	return nil
}

// buildMaglev fills a table of size m (prime, m >= len(ms)).
//
// Each member i, in (Name, IP) order, has the permutation
// p_i(j) = (offset_i + j*skip_i) mod m with offset_i = xxh64(name,
// seedOffset) mod m and skip_i = xxh64(name, seedSkip) mod (m-1) + 1
// (Eisenbud et al., §3.4). The population is Katran's "V2" weighted one:
// members take turns in order; in each turn member i adds its weight to
// cum_i, and when cum_i reaches the largest weight it subtracts that weight
// and takes its next preferred free slot. A member of the largest weight
// takes a slot every turn, and member i on average w_i/w_max of them, so
// the shares are proportional to the weights. It stops when the m slots are
// filled.
func buildMaglev(ms []Member, order []int, m uint32) Table {
	n := len(order)
	offset := make([]uint32, n)
	skip := make([]uint32, n)
	next := make([]uint32, n) // j: how far member i went along its permutation
	cum := make([]uint32, n)
	var maxW uint32
	for r, i := range order {
		name := []byte(ms[i].key())
		offset[r] = uint32(xxh64(name, maglevSeedOffset) % uint64(m))
		skip[r] = uint32(xxh64(name, maglevSeedSkip)%uint64(m-1)) + 1
		maxW = max(maxW, uint32(ms[i].Weight))
	}
	const free = ^uint32(0)
	owner := make([]uint32, m) // slot -> rank in order
	for s := range owner {
		owner[s] = free
	}
	for filled := uint32(0); filled < m; {
		for r, i := range order {
			cum[r] += uint32(ms[i].Weight)
			if cum[r] < maxW {
				continue
			}
			cum[r] -= maxW
			s := uint32((uint64(offset[r]) + uint64(next[r])*uint64(skip[r])) % uint64(m))
			for owner[s] != free {
				next[r]++
				s = uint32((uint64(offset[r]) + uint64(next[r])*uint64(skip[r])) % uint64(m))
			}
			next[r]++
			owner[s] = uint32(r)
			if filled++; filled == m {
				break
			}
		}
	}
	t := Table{Kind: Maglev, Len: m, Entries: make([]uint16, m), Slots: make([]uint32, len(ms))}
	for s, r := range owner {
		i := order[r]
		t.Entries[s] = uint16(i)
		t.Slots[i]++
	}
	return t
}

// xxh64 is XXH64 of b with the given seed.
func xxh64(b []byte, seed uint64) uint64 {
	d := xxhash.NewWithSeed(seed)
	_, _ = d.Write(b) // never fails
	return d.Sum64()
}
