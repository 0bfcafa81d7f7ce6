package snapshot

import (
	"sort"
	"time"
)

// maintenanceBuckets are the upper bounds, in seconds, of the buckets of
// MaintenanceDurations (xlb_maintenance_duration_seconds): from a cycle
// over an idle flow map (well under a millisecond) to one that reads a
// large slice of a full map and removes thousands of pairs (a second or
// more on a busy host).
var maintenanceBuckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// DurationHistogram counts durations into the fixed maintenanceBuckets,
// as a Prometheus histogram does. The zero value is empty. It is a plain
// value: Observe returns a new one, so a histogram held by a published
// Snapshot never changes.
type DurationHistogram struct {
	// perBucket[i] counts observations above bound i-1 and at most
	// bound i; observations above the last bound count only in Count.
	perBucket [len(maintenanceBuckets)]uint64
	// Count is the number of observations and Sum their total in seconds.
	Count uint64
	Sum   float64
}

// Observe returns h with d added.
func (h DurationHistogram) Observe(d time.Duration) DurationHistogram {
	v := d.Seconds()
	if i := sort.SearchFloat64s(maintenanceBuckets[:], v); i < len(maintenanceBuckets) {
		h.perBucket[i]++
	}
	h.Count++
	h.Sum += v
	return h
}

// Buckets returns, for each bucket's upper bound in seconds, the number of
// observations at or below it (cumulative, as
// prometheus.MustNewConstHistogram takes them). Every bound is present,
// with 0 in an empty histogram.
func (h DurationHistogram) Buckets() map[float64]uint64 {
	out := make(map[float64]uint64, len(maintenanceBuckets))
	var cum uint64
	for i, le := range maintenanceBuckets {
		cum += h.perBucket[i]
		out[le] = cum
	}
	return out
}
