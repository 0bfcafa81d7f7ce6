package sched

import "fmt"

// MaxWRRCycle is the longest weighted round robin cycle Build expands:
// 1024 members of weight 256 after the weights are divided by their gcd.
const MaxWRRCycle = 1024 * MaxWeight

// buildWRR expands nginx's smooth weighted round robin
// (ngx_http_upstream_get_peer, nginx 1.7.2+) for one whole cycle. The
// weights are first divided by their greatest common divisor g, so the
// cycle has L = Σw/g entries and member i appears w_i/g times in it. Each
// step adds every member's weight to its current weight, picks the member
// with the largest current weight (the first in (Name, IP) order among
// equals, as nginx picks the first maximum), and subtracts the total from
// the pick's. After L steps every current weight is back to 0, so the
// cycle repeats exactly and the data path's Entries[rr % L] is the
// sequence nginx would give: weights 3,1,1 give a b a c a. The cost is
// O(L·N).
func buildWRR(ms []Member, order []int) (Table, error) {
	g := uint32(0)
	for _, m := range ms {
		g = gcd(g, uint32(m.Weight))
	}
	n := len(order)
	w := make([]int64, n)
	var total int64
	for r, i := range order {
		w[r] = int64(uint32(ms[i].Weight) / g)
		total += w[r]
	}
	if total > MaxWRRCycle {
		return Table{}, fmt.Errorf("%w: %d entries after dividing the weights by %d, at most %d", ErrCycleLimit, total, g, MaxWRRCycle)
	}
	t := Table{Kind: WeightedRoundRobin, Len: uint32(total), Entries: make([]uint16, total), Slots: make([]uint32, len(ms))}
	cur := make([]int64, n)
	for k := range t.Entries {
		best := 0
		for r := range cur {
			cur[r] += w[r]
			if cur[r] > cur[best] {
				best = r
			}
		}
		cur[best] -= total
		i := order[best]
		t.Entries[k] = uint16(i)
		t.Slots[i]++
	}
	return t, nil
}

func gcd(a, b uint32) uint32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
