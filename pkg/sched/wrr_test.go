package sched

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// members returns members named b00, b01, ... with the given weights and
// addresses 2001:db8::1, 2001:db8::2, ...
func members(ws ...uint16) []Member {
	ms := make([]Member, len(ws))
	for i, w := range ws {
		ms[i] = Member{Name: fmt.Sprintf("b%02d", i), IP: netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte((i + 1) >> 8), 15: byte(i + 1)}), Weight: w}
	}
	return ms
}

// longestRun returns the longest run of one member in the cycle repeated,
// so a run across the wrap counts.
func longestRun(e []uint16) int {
	best, run := 0, 0
	for k := range 2 * len(e) {
		if k > 0 && e[k%len(e)] == e[(k-1)%len(e)] {
			run++
		} else {
			run = 1
		}
		best = max(best, run)
	}
	return min(best, len(e))
}

func TestSmoothWRR(t *testing.T) {
	for _, tc := range []struct {
		weights []uint16
		want    string // the cycle, members as letters; "" for not checked
	}{
		{[]uint16{3, 1, 1}, "abaca"},
		{[]uint16{1, 1, 1}, "abc"},
		{[]uint16{5, 1, 1}, "aabacaa"},
		{[]uint16{6, 2, 2}, "abaca"}, // divided by the gcd 2
		{[]uint16{2, 3}, "babab"},
		{[]uint16{256}, "a"},
		{[]uint16{1, 256}, ""},
		{[]uint16{7, 5, 3, 2, 1}, ""},
		{[]uint16{100, 99, 1, 50, 3, 3, 200}, ""},
	} {
		t.Run(fmt.Sprint(tc.weights), func(t *testing.T) {
			ms := members(tc.weights...)
			tab, err := Build(WeightedRoundRobin, ms, 0)
			if err != nil {
				t.Fatal(err)
			}
			var g, sum, wmax uint32
			for _, w := range tc.weights {
				g = gcd(g, uint32(w))
				sum += uint32(w)
				wmax = max(wmax, uint32(w))
			}
			if tab.Len != sum/g || len(tab.Entries) != int(tab.Len) {
				t.Fatalf("Len %d, %d entries; want %d", tab.Len, len(tab.Entries), sum/g)
			}
			// Exact shares per cycle.
			count := make([]uint32, len(ms))
			for _, e := range tab.Entries {
				count[e]++
			}
			for i, w := range tc.weights {
				if count[i] != uint32(w)/g || tab.Slots[i] != count[i] {
					t.Errorf("member %d: %d entries, Slots %d; want %d", i, count[i], tab.Slots[i], uint32(w)/g)
				}
			}
			// Smoothness: the heaviest member can't do better than
			// spreading its turns among the others' ones, so the longest
			// run, across the wrap too, is at most ceil(wmax/rest)+1.
			limit := int(tab.Len)
			if rest := sum - wmax; rest > 0 {
				limit = int((wmax+rest-1)/rest) + 1
			}
			if r := longestRun(tab.Entries); r > limit {
				t.Errorf("longest run %d, want at most %d", r, limit)
			}
			if tc.want != "" {
				got := make([]byte, len(tab.Entries))
				for k, e := range tab.Entries {
					got[k] = byte('a' + e)
				}
				if string(got) != tc.want {
					t.Errorf("cycle %s, want %s", got, tc.want)
				}
			}
		})
	}
}

// TestSmoothWRRInputOrder: the cycle names the same backends whatever the
// order the members are given in.
func TestSmoothWRRInputOrder(t *testing.T) {
	ms := members(3, 1, 1, 4)
	rev := []Member{ms[3], ms[2], ms[1], ms[0]}
	a, err := Build(WeightedRoundRobin, ms, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(WeightedRoundRobin, rev, 0)
	if err != nil {
		t.Fatal(err)
	}
	for k := range a.Entries {
		if ms[a.Entries[k]] != rev[b.Entries[k]] {
			t.Fatalf("entry %d: %s given in order, %s given reversed", k, ms[a.Entries[k]].Name, rev[b.Entries[k]].Name)
		}
	}
}

// TestSmoothWRRLargestCycle: 1024 members of coprime weights up to 256
// make the longest cycle allowed; one more entry is refused.
func TestSmoothWRRLargestCycle(t *testing.T) {
	ws := make([]uint16, 1024)
	for i := range ws {
		ws[i] = 256
	}
	ws[0] = 255 // gcd 1: the cycle is 1024*256-1 entries
	start := time.Now()
	tab, err := Build(WeightedRoundRobin, members(ws...), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a cycle of %d entries over %d members built in %v", tab.Len, len(ws), time.Since(start))
	if tab.Len != MaxWRRCycle-1 {
		t.Fatalf("Len %d, want %d", tab.Len, MaxWRRCycle-1)
	}
	ws = append(ws, 2)
	if _, err := Build(WeightedRoundRobin, members(ws...), 0); err == nil {
		t.Fatalf("a cycle of %d entries was built", MaxWRRCycle+1)
	}
}
