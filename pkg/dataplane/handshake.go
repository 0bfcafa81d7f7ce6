package dataplane

import (
	"fmt"
	"time"
)

// Passive handshake latency (issue 14): the data path stamps the SYN that
// creates a pair and, when the backend's first SYN-ACK of the pair goes
// through, adds the time between them to that backend's histogram, per
// CPU (bpf/handshake.h). A retransmitted SYN keeps the first one's time,
// so a backend that drops SYNs shows the client's retransmission delay; a
// retransmitted SYN-ACK is not counted again; pairs taken over from
// layout 3 pins, whose SYNs were not stamped, are never counted. No
// packet costs userspace anything: HandshakeHistograms reads the sums.

// HandshakeBuckets are the upper bounds of the handshake histogram's
// buckets in seconds, ascending: log-spaced from 50 µs to 3 s
// (bpf/layout.h XLB_HS_BOUNDS_US, their one definition, in whole
// microseconds). A handshake longer than the last one counts in the
// histogram's last bucket (+Inf). Read-only.
var HandshakeBuckets = micros(
	xlbXlbHsBoundXLB_HS_LE_0, xlbXlbHsBoundXLB_HS_LE_1, xlbXlbHsBoundXLB_HS_LE_2, xlbXlbHsBoundXLB_HS_LE_3,
	xlbXlbHsBoundXLB_HS_LE_4, xlbXlbHsBoundXLB_HS_LE_5, xlbXlbHsBoundXLB_HS_LE_6, xlbXlbHsBoundXLB_HS_LE_7,
	xlbXlbHsBoundXLB_HS_LE_8, xlbXlbHsBoundXLB_HS_LE_9, xlbXlbHsBoundXLB_HS_LE_10, xlbXlbHsBoundXLB_HS_LE_11,
	xlbXlbHsBoundXLB_HS_LE_12, xlbXlbHsBoundXLB_HS_LE_13, xlbXlbHsBoundXLB_HS_LE_14, xlbXlbHsBoundXLB_HS_LE_15,
)

// micros converts bounds in microseconds to seconds.
func micros(us ...xlbXlbHsBound) []float64 {
	out := make([]float64, len(us))
	for i, u := range us {
		out[i] = float64(u) / 1e6
	}
	return out
}

// Histogram is one backend's handshake latency histogram, summed over
// CPUs: how long the backend took to answer the first SYN of each pair
// with its first SYN-ACK, as the data path saw them pass. Buckets are NOT
// cumulative: Buckets[k] counts the handshakes longer than
// HandshakeBuckets[k-1] (0 for k = 0) and at most HandshakeBuckets[k];
// Buckets[HandshakeBounds] those longer than the last bound. Count is
// their sum, Sum the handshakes' total duration (microsecond
// resolution). Every field is monotonic until ResetBackend.
type Histogram struct {
	Buckets [HandshakeBounds + 1]uint64
	Count   uint64
	Sum     time.Duration
}

// Add adds o's handshakes to h (two backends' histograms summed).
func (h *Histogram) Add(o Histogram) {
	for k := range h.Buckets {
		h.Buckets[k] += o.Buckets[k]
	}
	h.Count += o.Count
	h.Sum += o.Sum
}

// HandshakeHistograms reads every member id's handshake histogram,
// indexed by member id (MaxMembers of them; one that never saw a handshake
// has an empty one), summed over CPUs, with one BPF_MAP_LOOKUP_BATCH
// where the host allows it (FeatureBatchOps), else key by key.
func (d *Dataplane) HandshakeHistograms() ([]Histogram, error) {
	const cells = int(xlbXlbLimitsXLB_HS_CELLS)
	raw, ncpu, err := readArray[uint64](d, d.objs.XlbHandshake, int(xlbXlbLimitsXLB_HANDSHAKE_CELLS))
	if err != nil {
		return nil, fmt.Errorf("dataplane: read the handshake histograms: %w", err)
	}
	out := make([]Histogram, MaxMembers)
	for id := range out {
		h := &out[id]
		for c := range cells {
			var n uint64
			for _, v := range raw[(id*cells+c)*ncpu : (id*cells+c+1)*ncpu] {
				n += v
			}
			if c == int(xlbXlbHsCellXLB_HS_SUM_US) {
				h.Sum = time.Duration(n) * time.Microsecond
				continue
			}
			h.Buckets[c] = n
			h.Count += n
		}
	}
	return out, nil
}
