package dataplane

import (
	"math"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// HandshakeBuckets are the data path's bounds (bpf/layout.h enum
// xlb_hs_bound, as the object's BTF holds it), in order, one per
// Histogram bucket but the last, and log-spaced from 50 µs to 3 s:
// round(50 µs x 60000^(k/15)).
func TestHandshakeBucketsAreTheDataPaths(t *testing.T) {
	spec, err := loadXlb()
	if err != nil {
		t.Fatal(err)
	}
	var enum *btf.Enum
	if err := spec.Types.TypeByName("xlb_hs_bound", &enum); err != nil {
		t.Fatal(err)
	}
	if len(enum.Values) != len(HandshakeBuckets) || len(HandshakeBuckets) != HandshakeBounds || len(Histogram{}.Buckets) != HandshakeBounds+1 {
		t.Fatalf("%d bounds in BTF, %d in HandshakeBuckets, HandshakeBounds %d, %d histogram buckets",
			len(enum.Values), len(HandshakeBuckets), HandshakeBounds, len(Histogram{}.Buckets))
	}
	for k, v := range enum.Values {
		if got := HandshakeBuckets[k]; got != float64(v.Value)/1e6 {
			t.Errorf("bound %d (%s): %g s in HandshakeBuckets, %d µs in the data path", k, v.Name, got, v.Value)
		}
		want := 50e-6 * math.Pow(60000, float64(k)/15)
		if math.Abs(HandshakeBuckets[k]-want) > 0.5e-6 {
			t.Errorf("bound %d: %g s, want %g s rounded to the microsecond", k, HandshakeBuckets[k], want)
		}
	}
}

// Histograms add bucket by bucket.
func TestHistogramAdd(t *testing.T) {
	a := Histogram{Count: 3, Sum: 7}
	a.Buckets[0], a.Buckets[HandshakeBounds] = 1, 2
	b := Histogram{Count: 1, Sum: 5}
	b.Buckets[0] = 1
	a.Add(b)
	if a.Count != 4 || a.Sum != 12 || a.Buckets[0] != 2 || a.Buckets[HandshakeBounds] != 2 {
		t.Fatalf("sum %+v", a)
	}
}
