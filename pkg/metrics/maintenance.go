package metrics

import "github.com/prometheus/client_golang/prometheus"

// maintenanceBuckets span a maintenance cycle's duration in seconds, from
// an idle flow map (well under a millisecond) to a full 262144-pair map on
// a busy host (seconds).
var maintenanceBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newMaintenanceHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "xlb_maintenance_duration_seconds",
		Help:    "Wall-clock duration of maintenance cycles (flow map read, sweep and sample), one observation per successful cycle.",
		Buckets: maintenanceBuckets,
	})
}
