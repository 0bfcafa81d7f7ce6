package snapshot

import "github.com/xlbproject/xlb/pkg/dataplane"

// FIBWindow is the number of intervals between consecutive counter reads
// (maintenance samples, one a second) over which readiness judges next-hop
// failures (FIBHistory.Failing).
const FIBWindow = 3

// FIBHistory keeps the latest FIBWindow+1 reads of the two data-path
// counters readiness reason fib_lookup_failing is decided from: SYNs
// dropped for lack of a next hop (dataplane.Counters.FIBMiss) and pairs
// created (Counters.PairsCreated). It is a value (an array, no slice), so
// Store.Update's shallow copy copies it. The zero value holds no reads.
type FIBHistory struct {
	reads [FIBWindow + 1]fibRead // oldest first; the last n are set
	n     int
}

// fibRead is one read of the two counters.
type fibRead struct{ miss, created uint64 }

// add returns h with one more read, the oldest dropped once the window is
// full.
func (h FIBHistory) add(c dataplane.Counters) FIBHistory {
	r := fibRead{miss: c.FIBMiss, created: c.PairsCreated}
	if h.n < len(h.reads) {
		h.reads[h.n] = r
		h.n++
		return h
	}
	copy(h.reads[:], h.reads[1:])
	h.reads[len(h.reads)-1] = r
	return h
}

// Failing reports whether new connections are failing for lack of a next
// hop (issue 13: a sysctl reset made bpf_fib_lookup fail, every new SYN
// was dropped, and /readyz stayed 200). The rule, over the last FIBWindow
// intervals between counter reads (about 3 s):
//
//   - no pair was created in any of them (PairsCreated unchanged), and
//   - FIBMiss rose in the latest interval and in at least one other.
//
// So a steady stream of dropped SYNs with no connection getting through
// turns readiness to fib_lookup_failing within about three seconds, while
// one lost SYN (a backend whose neighbour is being resolved) does not;
// readiness comes back at the first read after a pair is created or after
// an interval without a miss. Counters that go backwards (a new flow map)
// count as "no rise" and "created", so a restart never reads as failing.
// Fewer than FIBWindow+1 reads: not failing.
func (h FIBHistory) Failing() bool {
	if h.n < len(h.reads) {
		return false
	}
	rises := 0
	for i := 1; i < len(h.reads); i++ {
		prev, cur := h.reads[i-1], h.reads[i]
		if cur.created != prev.created {
			return false
		}
		if cur.miss > prev.miss {
			rises++
		} else if i == len(h.reads)-1 {
			return false // no miss in the latest interval
		}
	}
	return rises >= 2
}
