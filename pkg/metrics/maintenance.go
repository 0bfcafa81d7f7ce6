package metrics

import "github.com/prometheus/client_golang/prometheus"

// maintenanceBuckets span a maintenance cycle's duration in seconds, from
// an idle flow map (well under a millisecond) to a cycle that reads a
// large slice of a full map and removes thousands of pairs (a second or
// more on a busy host).
var maintenanceBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newMaintenanceHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "xlb_maintenance_duration_seconds",
		Help:    "Wall-clock duration of maintenance cycles (close events, due time-waits, one slice of the flow map walk, the reaper's removals and the sample), one observation per successful cycle.",
		Buckets: maintenanceBuckets,
	})
}
