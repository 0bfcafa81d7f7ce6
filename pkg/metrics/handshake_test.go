package metrics

import (
	"math"
	"net/netip"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// handshakes is a histogram of handshakes in the given buckets (one
// handshake each), lasting sum in all.
func handshakes(sum time.Duration, buckets ...int) dataplane.Histogram {
	h := dataplane.Histogram{Sum: sum}
	for _, k := range buckets {
		h.Buckets[k]++
		h.Count++
	}
	return h
}

// xlb_backend_handshake_seconds is one histogram per listed backend name
// with every other bound of the data path's (8 buckets and +Inf: issue 28
// item 9), cumulative and exact at each, the backends of one name summed
// (a draining one and its successor), unlisted ids left out, a listed
// backend without handshakes empty.
func TestHandshakeHistogram(t *testing.T) {
	ip := netip.MustParseAddr
	last := dataplane.HandshakeBounds
	snap := &snapshot.Snapshot{
		Name: "web-lb",
		Sample: &maintenance.Sample{Backends: []maintenance.BackendSample{
			{ID: 0, Handshake: handshakes(1500*time.Microsecond, 0, 0, 4)},
			{ID: 1, Active: 1, Handshake: handshakes(5*time.Second, last)},
			{ID: 2, Handshake: handshakes(300*time.Microsecond, 2)},
			{ID: 3, Handshake: handshakes(time.Second, 10)},
		}},
		Backends: []backend.Status{
			{ID: 0, Name: "web-a", IP: ip("198.51.100.11"), State: backend.Routable, Discovered: true},
			{ID: 1, Name: "web-a", IP: ip("198.51.100.21"), State: backend.Departed}, // draining: its pairs live on
			{ID: 2, Name: "web-b", IP: ip("198.51.100.12"), State: backend.Routable, Discovered: true},
			{ID: 3, Name: "web-c", IP: ip("198.51.100.13"), State: backend.Departed}, // gone: no pair
			{ID: 4, Name: "web-d", IP: ip("198.51.100.14"), State: backend.Routable, Discovered: true},
		},
	}
	var store snapshot.Store
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	f := fams["xlb_backend_handshake_seconds"]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("xlb_backend_handshake_seconds: %v", f)
	}
	// Exported bucket i is the data path's bound 2i+1: handshakes in the
	// data path's buckets 0 and 1 count from exported bucket 0 on, 4 from
	// 2 (bound 5) on, 2 from 1 (bound 3) on.
	want := map[string]struct {
		count uint64
		sum   float64
		at    map[int]uint64 // cumulative count at exported bucket i (until the next i listed)
	}{
		"web-a": {4, 5.0015, map[int]uint64{0: 2, 2: 3}},
		"web-b": {1, 0.0003, map[int]uint64{0: 0, 1: 1}},
		"web-d": {0, 0, map[int]uint64{0: 0}},
	}
	if len(f.GetMetric()) != len(want) {
		t.Errorf("%d series, want %d (%v)", len(f.GetMetric()), len(want), f.GetMetric())
	}
	for name, w := range want {
		m, ok := find(fams, "xlb_backend_handshake_seconds", map[string]string{"service": "web-lb", "backend": name})
		if !ok {
			t.Errorf("backend %s: no series", name)
			continue
		}
		h := m.GetHistogram()
		if h.GetSampleCount() != w.count || math.Abs(h.GetSampleSum()-w.sum) > 1e-9 {
			t.Errorf("backend %s: count %d sum %v, want %d and %v", name, h.GetSampleCount(), h.GetSampleSum(), w.count, w.sum)
		}
		var bounds []float64
		for k := 1; k < len(dataplane.HandshakeBuckets); k += 2 {
			bounds = append(bounds, dataplane.HandshakeBuckets[k])
		}
		bounds = append(bounds, math.Inf(1))
		if len(bounds) != 9 || bounds[len(bounds)-2] != 3 {
			t.Fatalf("the data path's bounds changed (%v): revisit handshakeBounds", dataplane.HandshakeBuckets)
		}
		if len(h.GetBucket()) != len(bounds) {
			t.Fatalf("backend %s: %d buckets, want %d", name, len(h.GetBucket()), len(bounds))
		}
		var cum uint64
		for k, b := range h.GetBucket() {
			if c, ok := w.at[k]; ok {
				cum = c
			}
			if k == len(bounds)-1 {
				cum = w.count
			}
			if b.GetUpperBound() != bounds[k] || b.GetCumulativeCount() != cum {
				t.Errorf("backend %s: bucket %d le=%v: %d, want le=%v: %d", name, k, b.GetUpperBound(), b.GetCumulativeCount(), bounds[k], cum)
			}
		}
	}
}
