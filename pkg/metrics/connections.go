package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

// connectionsCollector exports the connection pairs and the flow map as the
// latest maintenance sample saw them (maintenance.Sample; DESIGN §4
// counting rule), and the maintenance loop's health, close events and walk.
// Nothing is exported before the first sample. While cycles fail, the pair,
// close event and walk series repeat the latest successful cycle's figures
// and xlb_maintenance_failing is 1.
type connectionsCollector struct {
	store *snapshot.Store
	now   func() time.Time

	active, timewait, opened, closed, orphaned  *prometheus.Desc
	entries, capacity                           *prometheus.Desc
	sampleAge, cycles, errors, failing          *prometheus.Desc
	eventsRead, eventsLost, walkPasses, twSched *prometheus.Desc
}

func newConnectionsCollector(store *snapshot.Store, now func() time.Time) *connectionsCollector {
	return &connectionsCollector{
		store: store, now: now,
		active: prometheus.NewDesc("xlb_connections_active",
			"Connections open or half-closed (neither both FINs nor a RST seen yet), as of the latest maintenance cycle.",
			nil, nil),
		timewait: prometheus.NewDesc("xlb_connections_timewait",
			"Closed connections (both FINs seen) whose pair is kept for the 60 s time-wait interval, as of the latest maintenance cycle.",
			nil, nil),
		opened: prometheus.NewDesc("xlb_connections_opened_total",
			"Connections (pairs) the data path created, as of the latest maintenance cycle.",
			nil, nil),
		closed: prometheus.NewDesc("xlb_connections_closed_total",
			"Connections closed, counted once by the data path at the packet that makes the pair terminal (the second FIN or a RST), by who closed first (client or backend) and how (fin or rst), as of the latest maintenance cycle. Orphan removals are not included.",
			[]string{"initiator", "reason"}, nil),
		orphaned: prometheus.NewDesc("xlb_connections_orphaned_total",
			"Idle connection pairs removed after orphan_ttl_secs without a packet in either direction, since the flow map was created, as of the latest maintenance cycle.",
			nil, nil),
		entries: prometheus.NewDesc("xlb_flow_map_entries",
			"Directional entries in the flow map (two per connection pair), as of the latest maintenance cycle.",
			nil, nil),
		capacity: prometheus.NewDesc("xlb_flow_map_capacity",
			"Maximum directional entries of the flow map (two per connection pair of flow_table.max_connections).",
			nil, nil),
		sampleAge: prometheus.NewDesc("xlb_maintenance_sample_age_seconds",
			"Seconds since the latest maintenance sample was taken; failed cycles publish samples too, so it grows only when the maintenance loop stopped or hangs. Readiness reports dataplane_sample_stale past max(3 cycles, 5 s).",
			nil, nil),
		cycles: prometheus.NewDesc("xlb_maintenance_cycles_total",
			"Successful maintenance cycles since this process started its maintenance loop.",
			nil, nil),
		errors: prometheus.NewDesc("xlb_maintenance_errors_total",
			"Failed maintenance cycles (clock, close event, flow map or counter read, or reaper run refused) since this process started its maintenance loop. The data path keeps forwarding; pairs are not cleaned up until a cycle succeeds.",
			nil, nil),
		failing: prometheus.NewDesc("xlb_maintenance_failing",
			"1 while the latest maintenance cycle failed (connection and flow map series then repeat the latest successful cycle's figures; the error is in the status API's maintenance.last_error), 0 otherwise.",
			nil, nil),
		eventsRead: prometheus.NewDesc("xlb_close_events_total",
			"Close events (one per pair that became terminal) the maintenance loop read from the data path since this process started its maintenance loop, as of the latest maintenance cycle. The status API's maintenance.close_events.path says whether they come through the ring buffer or the per-CPU queues.",
			nil, nil),
		eventsLost: prometheus.NewDesc("xlb_close_events_lost_total",
			"Close events that never reached the maintenance loop: the ring buffer was full (counted since the flow map was created) or a per-CPU queue slot was overwritten before it was read (since this process started its maintenance loop). The walk removes those pairs instead, at most one pass late.",
			nil, nil),
		walkPasses: prometheus.NewDesc("xlb_maintenance_walk_passes_total",
			"Complete passes of the maintenance loop's incremental walk over the flow map since this process started its maintenance loop; a pass visits every entry and takes at most orphan_ttl_secs/10 seconds.",
			nil, nil),
		twSched: prometheus.NewDesc("xlb_maintenance_timewait_scheduled",
			"Pairs the maintenance loop holds for removal at the end of their 60 s time-wait (from their close events), as of the latest maintenance cycle. Differs from xlb_connections_timewait by pairs whose close event was lost (the walk removes them) and pairs a new SYN replaced (still scheduled).",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *connectionsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.timewait, c.opened, c.closed, c.orphaned,
		c.entries, c.capacity, c.sampleAge, c.cycles, c.errors, c.failing,
		c.eventsRead, c.eventsLost, c.walkPasses, c.twSched} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *connectionsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.store.Load()
	if s == nil || s.Sample == nil {
		return
	}
	x := s.Sample
	gauge := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.active, x.Active)
	gauge(c.timewait, x.TimeWait)
	counter(c.opened, x.Opened)
	counter(c.closed, x.Closed.ClientFIN, "client", "fin")
	counter(c.closed, x.Closed.ClientRST, "client", "rst")
	counter(c.closed, x.Closed.BackendFIN, "backend", "fin")
	counter(c.closed, x.Closed.BackendRST, "backend", "rst")
	counter(c.orphaned, x.Orphaned)
	gauge(c.entries, x.FlowEntries)
	gauge(c.capacity, x.FlowCapacity)
	ch <- prometheus.MustNewConstMetric(c.sampleAge, prometheus.GaugeValue, max(0, s.SampleAge(c.now()).Seconds()))
	counter(c.cycles, x.Cycle)
	counter(c.errors, x.Maintenance.Errors)
	ch <- prometheus.MustNewConstMetric(c.failing, prometheus.GaugeValue, boolValue(x.Maintenance.Failing()))
	counter(c.eventsRead, x.CloseEvents.Read)
	counter(c.eventsLost, x.CloseEvents.Lost)
	counter(c.walkPasses, x.Walk.Passes)
	gauge(c.twSched, x.CloseEvents.TimeWaitScheduled)
}
