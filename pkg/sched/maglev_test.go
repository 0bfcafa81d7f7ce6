package sched

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"testing"
)

func TestMaglevSizes(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want uint32
	}{
		{0, 16381}, {1, 16381}, {32, 16381}, {33, 32749}, {65, 32749}, {66, 65521},
		{100, 65521}, {131, 65521}, {132, 131071}, {262, 131071}, {263, 262139},
		{524, 262139}, {525, 524287}, {1000, 524287}, {1048, 524287}, {1049, 1048573},
		{2097, 1048573}, {2098, 0}, {100000, 0},
	} {
		if got := MaglevSize(tc.n); got != tc.want {
			t.Errorf("MaglevSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	for _, m := range MaglevSizes {
		if err := ValidMaglevSize(m); err != nil {
			t.Errorf("ValidMaglevSize(%d): %v", m, err)
		}
	}
	for _, m := range []uint32{0, 16000, 16379, 16383, 65535, 131069, 131073, 262143, 1048576, 1048583} {
		if err := ValidMaglevSize(m); !errors.Is(err, ErrTableSize) {
			t.Errorf("ValidMaglevSize(%d) = %v, want ErrTableSize", m, err)
		}
	}
	for _, m := range []uint32{20011, 1048573} { // any prime in range
		if err := ValidMaglevSize(m); err != nil {
			t.Errorf("ValidMaglevSize(%d): %v", m, err)
		}
	}
	for _, tc := range []struct {
		m    uint32
		want int
	}{{16381, 163}, {65521, 655}, {1048573, 10485}} {
		if got := MaglevMembers(tc.m); got != tc.want {
			t.Errorf("MaglevMembers(%d) = %d, want %d", tc.m, got, tc.want)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    Kind
		ms   []Member
		size uint32
		want error
	}{
		{"maglev weight 0", Maglev, members(1, 0), 16381, ErrWeight},
		{"maglev weight 257", Maglev, members(257), 16381, ErrWeight},
		{"wrr weight 0", WeightedRoundRobin, members(0, 1), 0, ErrWeight},
		{"wrr weight 300", WeightedRoundRobin, members(300), 0, ErrWeight},
		{"size not prime", Maglev, members(1), 16383, ErrTableSize},
		{"size too small", Maglev, members(1), 16000, ErrTableSize},
		{"size too large", Maglev, members(1), 1048583, ErrTableSize},
		{"size not prime, no members", Maglev, nil, 16383, ErrTableSize},
		{"duplicate", Maglev, append(members(1, 2), members(3)...), 16381, ErrDuplicate},
		{"unknown kind", Kind(9), members(1), 16381, ErrKind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Build(tc.k, tc.ms, tc.size); !errors.Is(err, tc.want) {
				t.Errorf("Build = %v, want %v", err, tc.want)
			}
		})
	}
	for _, k := range []Kind{RoundRobin, WeightedRoundRobin, Maglev} {
		tab, err := Build(k, nil, 16381)
		if err != nil || tab.Len != 0 || len(tab.Entries) != 0 || tab.Kind != k {
			t.Errorf("%s, no members: %+v, %v; want Len 0", k, tab, err)
		}
	}
	// Round robin has no table and ignores weights.
	if tab, err := Build(RoundRobin, members(0, 1), 0); err != nil || tab.Len != 0 {
		t.Errorf("round robin: %+v, %v; want Len 0", tab, err)
	}
}

// checkFilled checks that every slot names a member and that Slots counts
// them.
func checkFilled(t *testing.T, tab Table, n int, m uint32) {
	t.Helper()
	if tab.Len != m || len(tab.Entries) != int(m) || len(tab.Slots) != n {
		t.Fatalf("Len %d, %d entries, %d Slots; want %d, %d, %d", tab.Len, len(tab.Entries), len(tab.Slots), m, m, n)
	}
	count := make([]uint32, n)
	for s, e := range tab.Entries {
		if int(e) >= n {
			t.Fatalf("slot %d names member %d of %d", s, e, n)
		}
		count[e]++
	}
	for i := range count {
		if count[i] != tab.Slots[i] {
			t.Fatalf("member %d: %d slots, Slots says %d", i, count[i], tab.Slots[i])
		}
	}
}

// TestMaglevSharesProportional: member i gets M·w_i/Σw slots within a
// bound that follows from Katran's population. After R whole turns member
// i has taken floor(R·w_i/w_max) slots, and the table fills during turn
// R+1, so its count is R·w_i/w_max within -1 and +w_i/w_max; summing over
// the N members, M is RΣw/w_max within -N and +Σw/w_max. Together:
// |count_i - M·w_i/Σw| <= 2 + N·w_i/Σw slots. The test asserts that bound
// and the issue's: within 1 % of M·w_i/Σw, or within 2 slots where that is
// under 100 slots (weight 1 beside weight 256). At the default sizes
// (MaglevSize, 500 slots per member) shares of weights 1..7 are 130 slots
// or more. The test logs the worst relative error.
func TestMaglevSharesProportional(t *testing.T) {
	for _, tc := range []struct {
		n       int
		weights func(i int) uint16
	}{
		{1, func(int) uint16 { return 1 }},
		{3, func(i int) uint16 { return uint16(i%7 + 1) }},
		{3, func(i int) uint16 { return []uint16{3, 1, 1}[i] }},
		{10, func(i int) uint16 { return uint16(i%7 + 1) }},
		{10, func(int) uint16 { return 1 }},
		{100, func(i int) uint16 { return uint16(i%7 + 1) }},
		{100, func(i int) uint16 { return []uint16{1, 256}[i%2] }},
		{1000, func(i int) uint16 { return uint16(i%7 + 1) }},
	} {
		ws := make([]uint16, tc.n)
		var sum float64
		for i := range ws {
			ws[i] = tc.weights(i)
			sum += float64(ws[i])
		}
		m := MaglevSize(tc.n)
		t.Run(fmt.Sprintf("N=%d/M=%d/w=%v", tc.n, m, ws[:min(tc.n, 4)]), func(t *testing.T) {
			tab, err := Build(Maglev, members(ws...), m)
			if err != nil {
				t.Fatal(err)
			}
			checkFilled(t, tab, tc.n, m)
			worst, worstSlots := 0.0, 0.0
			for i, w := range ws {
				want := float64(m) * float64(w) / sum
				diff := math.Abs(float64(tab.Slots[i]) - want)
				if bound := 2 + float64(tc.n)*float64(w)/sum; diff > bound {
					t.Errorf("member %d (weight %d): %d slots, want %.1f ± %.1f", i, w, tab.Slots[i], want, bound)
				}
				if diff > max(0.01*want, 2) {
					t.Errorf("member %d (weight %d): %d slots, want %.1f within 1 %% (or 2 slots)", i, w, tab.Slots[i], want)
				}
				worst = max(worst, diff/want)
				worstSlots = max(worstSlots, diff)
			}
			t.Logf("worst share error %.3f %% (%.1f slots)", 100*worst, worstSlots)
		})
	}
}

// TestMaglevDeterministic: the same members give the same table whatever
// their order, the table names the same backends, and a second build is
// identical.
func TestMaglevDeterministic(t *testing.T) {
	ms := members(4, 1, 2, 3, 1, 7, 2)
	perm := []int{3, 6, 0, 5, 1, 4, 2}
	shuffled := make([]Member, len(ms))
	for k, i := range perm {
		shuffled[k] = ms[i]
	}
	a, err := Build(Maglev, ms, 16381)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := Build(Maglev, ms, 16381)
	b, err := Build(Maglev, shuffled, 16381)
	if err != nil {
		t.Fatal(err)
	}
	for s := range a.Entries {
		if a.Entries[s] != a2.Entries[s] {
			t.Fatalf("slot %d: two builds differ", s)
		}
		if ms[a.Entries[s]] != shuffled[b.Entries[s]] {
			t.Fatalf("slot %d: %s in order, %s shuffled", s, ms[a.Entries[s]].Name, shuffled[b.Entries[s]].Name)
		}
	}
}

// TestMaglevRemovalCollateral removes one member of N and measures the
// collateral: the slots that change owner although their owner stayed, as
// a fraction of M. All of the removed member's slots move (their owner is
// gone); Maglev's property is that few others do. The issue asks for under
// 1 % at the documented size, the default MaglevSize(N) (500 slots per
// member or more): Cilium's 100 per member gave 1.1–1.7 % for N = 50..500.
// The test logs the measured collateral of 5 removals each;
// BenchmarkMaglevCollateral sweeps 20 removals.
func TestMaglevRemovalCollateral(t *testing.T) {
	for _, tc := range []struct {
		n        int
		m        uint32
		weighted bool // weights cycling 1..7, else all 1
	}{
		{3, MaglevSize(3), false},
		{10, MaglevSize(10), false},
		{10, MaglevSize(10), true},
		{100, MaglevSize(100), false},
		{100, MaglevSize(100), true},
		{1000, MaglevSize(1000), false},
	} {
		n, m := tc.n, tc.m
		t.Run(fmt.Sprintf("N=%d/M=%d/weighted=%v", n, m, tc.weighted), func(t *testing.T) {
			ws := make([]uint16, n)
			for i := range ws {
				ws[i] = 1
				if tc.weighted {
					ws[i] = uint16(i%7 + 1)
				}
			}
			ms := members(ws...)
			before, err := Build(Maglev, ms, m)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for _, gone := range []int{0, n / 3, n / 2, n - 1, (7 * n) / 10} {
				rest := append(append([]Member{}, ms[:gone]...), ms[gone+1:]...)
				after, err := Build(Maglev, rest, m)
				if err != nil {
					t.Fatal(err)
				}
				moved := 0
				for s := range before.Entries {
					was, is := ms[before.Entries[s]], rest[after.Entries[s]]
					if was == ms[gone] {
						if is == ms[gone] {
							t.Fatalf("slot %d still names the removed member", s)
						}
						continue
					}
					if was != is {
						moved++
					}
				}
				c := float64(moved) / float64(m)
				worst = max(worst, c)
				t.Logf("remove %s: %d of %d slots are collateral (%.3f %%), the removed one had %d", ms[gone].Name, moved, m, 100*c, before.Slots[gone])
				if c >= 0.01 {
					t.Errorf("remove %s: collateral %.3f %%, want under 1 %%", ms[gone].Name, 100*c)
				}
			}
			t.Logf("worst collateral %.3f %% of %d slots", 100*worst, m)
		})
	}
}

// TestMaglevGolden freezes one table. Maglev's point in XLB is that every
// host, and every version after an upgrade, sends a client to the same
// backend: the hash (seeded XXH64 of the name), the seeds, the order of
// the members and Katran's population are part of that contract. If this
// test fails, one of them changed and an upgrade would move clients
// between backends and make hosts running different versions disagree; do
// not update the digest unless that is intended and documented.
func TestMaglevGolden(t *testing.T) {
	ms := []Member{
		{Name: "web-3", IP: netip.MustParseAddr("198.51.100.13"), Weight: 2},
		{Name: "web-1", IP: netip.MustParseAddr("198.51.100.11"), Weight: 1},
		{Name: "web-2", IP: netip.MustParseAddr("198.51.100.12"), Weight: 3},
		{Name: "", IP: netip.MustParseAddr("2001:db8::7"), Weight: 256},
		{Name: "cache-a", IP: netip.MustParseAddr("203.0.113.5"), Weight: 100},
	}
	tab, err := Build(Maglev, ms, 16381)
	if err != nil {
		t.Fatal(err)
	}
	// The permutation hash alone, so a failure says which part changed.
	if got, want := xxh64([]byte("web-1"), maglevSeedOffset), uint64(0xd606cead0515dc1b); got != want {
		t.Errorf("the offset hash of \"web-1\" is %#x, want %#x: the hash or its seed changed", got, want)
	}
	if got, want := xxh64([]byte("web-1"), maglevSeedSkip), uint64(0x9ff5c47abd2bd4fd); got != want {
		t.Errorf("the skip hash of \"web-1\" is %#x, want %#x: the hash or its seed changed", got, want)
	}
	h := sha256.New()
	for _, e := range tab.Entries {
		_ = binary.Write(h, binary.LittleEndian, e)
	}
	const want = "ea25abe48a5b208be25f3cd8c987b272ddcb533245851bb079e08f57a58c8aaf"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("the Maglev table of the golden input changed: sha256 %s, want %s.\n"+
			"The hash, its seeds, the member order or the population changed: every Maglev client would move "+
			"on upgrade and hosts of different versions would disagree (slots %v, first entries %v)",
			got, want, tab.Slots, tab.Entries[:16])
	}
}
