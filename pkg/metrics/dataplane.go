package metrics

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// CountersFunc returns the data path's global counters summed over CPUs;
// the daemon passes (*dataplane.Dataplane).Counters. It is called once per
// scrape, concurrently with everything else the daemon does. It returns
// (an error wrapping) ErrNoDataplane while no data path is loaded.
type CountersFunc func() (dataplane.Counters, error)

// ErrNoDataplane is what a CountersFunc returns before the data path is
// loaded or after it was closed: the data-path counter series are then
// absent from the scrape, without a warning and without
// xlb_scrape_collector_success. Any other error is a failed read.
var ErrNoDataplane = errors.New("metrics: no data path loaded")

// xdpActions names dataplane.Counters.Actions by index.
var xdpActions = [5]string{"aborted", "drop", "pass", "tx", "redirect"}

// dataplaneCollector exports the data path's event counters (DESIGN §4,
// §5): from CountersFunc at scrape time, or from the latest sample's copy
// when no CountersFunc is given (see the package documentation).
type dataplaneCollector struct {
	store    *snapshot.Store
	counters CountersFunc
	log      logrus.FieldLogger
	failing  atomic.Bool

	actions, snatExhausted, shutdownResets, tableFull, noBackend *prometheus.Desc
	fibMiss, ttlExceeded, synReused, pairsReplaced, invariant    *prometheus.Desc
	success                                                      *prometheus.Desc
}

func newDataplaneCollector(store *snapshot.Store, counters CountersFunc, log logrus.FieldLogger) *dataplaneCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &dataplaneCollector{
		store: store, counters: counters, log: log,
		actions:        desc("xlb_xdp_actions_total", "XDP verdicts returned by the XDP program, by action (aborted, drop, pass, tx, redirect).", "action"),
		snatExhausted:  desc("xlb_snat_port_exhausted_total", "SYNs answered with a RST because no SNAT port was free toward the chosen backend."),
		shutdownResets: desc("xlb_shutdown_resets_total", "RSTs sent in reply to packets while the shutdown flag was set (shutdown window)."),
		tableFull:      desc("xlb_flow_table_full_total", "SYNs answered with a RST because the flow map was full (flow_table.max_connections)."),
		noBackend:      desc("xlb_no_backend_resets_total", "SYNs answered with a RST because no backend was routable."),
		fibMiss:        desc("xlb_fib_miss_total", "SYNs dropped because the next hop toward the backend was not resolved."),
		ttlExceeded:    desc("xlb_ttl_exceeded_total", "Packets passed to the host stack because their TTL would expire when forwarded."),
		synReused:      desc("xlb_syn_retransmits_total", "Retransmitted SYNs that reused the live pair of their connection."),
		pairsReplaced:  desc("xlb_flow_pairs_replaced_total", "Closed or reset pairs replaced by a new SYN on the same tuple."),
		invariant: desc("xlb_flow_pair_invariant_violations_total",
			"Half pairs seen: FIN/RST packets the data path met on an entry without a valid counterpart, plus lone entries the maintenance loop repaired, both since the flow map was created."),
		success: desc("xlb_scrape_collector_success", "1 when the collector read its source in this scrape, 0 when it failed (the error is logged).", "collector"),
	}
}

// Describe implements prometheus.Collector.
func (c *dataplaneCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.actions, c.snatExhausted, c.shutdownResets, c.tableFull,
		c.noBackend, c.fibMiss, c.ttlExceeded, c.synReused, c.pairsReplaced, c.invariant, c.success} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *dataplaneCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.store.Load()
	var repairs uint64
	if s != nil && s.Sample != nil {
		repairs = s.Sample.InvariantRepairs
	}
	var n dataplane.Counters
	if c.counters != nil {
		var err error
		n, err = c.counters()
		if errors.Is(err, ErrNoDataplane) {
			return
		}
		ok := err == nil
		ch <- prometheus.MustNewConstMetric(c.success, prometheus.GaugeValue, boolValue(ok), "dataplane")
		if !ok {
			if !c.failing.Swap(true) {
				c.log.WithError(err).Warn("metrics: cannot read the data path counters; their series are left out until the read succeeds")
			}
			return
		}
		if c.failing.Swap(false) {
			c.log.Info("metrics: data path counters readable again")
		}
	} else {
		if s == nil || s.Sample == nil {
			return
		}
		n = s.Sample.Counters
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for i, a := range xdpActions {
		counter(c.actions, n.Actions[i], a)
	}
	counter(c.snatExhausted, n.SNATExhausted)
	counter(c.shutdownResets, n.ShutdownResets)
	counter(c.tableFull, n.TableFull)
	counter(c.noBackend, n.NoBackend)
	counter(c.fibMiss, n.FIBMiss)
	counter(c.ttlExceeded, n.TTLExceeded)
	counter(c.synReused, n.SYNReused)
	counter(c.pairsReplaced, n.PairsReplaced)
	counter(c.invariant, n.InvariantViolations+repairs)
}
