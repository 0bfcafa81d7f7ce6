package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// backendsCollector exports the backend set (from the backend manager,
// with Snapshot.BackendState's rules; DESIGN §3) and each listed backend's
// traffic (from the maintenance sample).
//
// Every series has the service label (DESIGN §9): the counts of
// xlb_backends are per service, and a backend that serves two services
// has a series in each. The backend label is the backend's name. Within a
// service, backends that share a name (a departed backend still draining
// and its successor under the same name) are summed into one series; ids
// seen in the flow map that no backend manager knows have no name and are
// left out. Without perBackend (config metrics.per_backend: false) only
// xlb_backends and the services' scheduler series are exported.
//
// The scheduler series (issue 30) come from the snapshot too: each
// service's scheduler (xlb_service_scheduler_info), the table of a
// weighted round robin or Maglev service (snapshot.Service.Schedule: its
// size and rebuilds, the rebuilds from the table's own header, so they
// continue across hot upgrades), and each backend's weight and share of
// the table (snapshot.Service.TableShare; a name's backends' shares are
// summed, its weight is the one of the backend whose state it shows).
//
// A UDP service's backends (issue 31) have their UDP pair series
// (xlb_backend_udp_pairs_active, _opened_total) in place of the TCP-only
// ones (connections, time-wait, TCP timestamps; the handshake histogram
// too, handshakeCollector), so the series per backend do not grow; the
// traffic series are shared.
type backendsCollector struct {
	descs

	perBackend bool

	count, state, checks, timestamps *prometheus.Desc
	schedulerInfo, tableSize         *prometheus.Desc
	tableRebuilds, weight, share     *prometheus.Desc
	// tcp are the per-backend series of a TCP service's backends, udp
	// those of a UDP service's, and traffic those of both, all taken from
	// the sample.
	tcp, udp, traffic []backendSeries
}

// backendSeries is one per-backend series: its type and its value in a
// name's summed maintenance.BackendSample.
type backendSeries struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(*maintenance.BackendSample) uint64
}

func newBackendsCollector(perBackend bool) *backendsCollector {
	c := &backendsCollector{perBackend: perBackend}
	c.count = c.add("xlb_backends", "Backends of the service by state: discovered (currently listed by the provider), routable (discovered and eligible for new connections), unhealthy (discovered but failing its active health checks: no new connections, its connections untouched), draining (no longer routable but still owning connection pairs), unreachable (discovered but without a route or neighbour: no new connections). A backend can count in more than one state.", "service", "state")
	c.state = c.add("xlb_backend_state", "State of each listed backend as the status API reports it: 1 for the current state (routable, unhealthy, draining, unreachable), 0 for the others.", "service", "backend", "state")
	c.timestamps = c.add("xlb_backend_tcp_timestamps", "Whether the backend's last SYN-ACK to a client SYN with TCP timestamps carried them, as of the latest maintenance cycle: 1 for the current state (yes; no: its net.ipv4.tcp_timestamps is 0, so XLB leaves its pairs' timestamps as they are; unknown: none seen yet), 0 for the others.", "service", "backend", "state")
	c.checks = c.add("xlb_backend_health_checks_total", "Active health checks of the backend by result (ok, fail) since it was discovered; only with health_check configured.", "service", "backend", "result")
	c.schedulerInfo = c.add("xlb_service_scheduler_info", "A metric with a constant '1' value for each service, labeled by its scheduler (round_robin, weighted_round_robin, maglev).", "service", "scheduler")
	c.tableSize = c.add("xlb_scheduler_table_size", "Entries of the schedule of a weighted_round_robin or maglev service: the Maglev table's slots, or the weighted round robin cycle's length; 0 before the first schedule (new connections are then picked round robin: xlb_scheduler_fallbacks_total).", "service")
	c.tableRebuilds = c.add("xlb_scheduler_table_rebuilds_total", "Schedules built for a weighted_round_robin or maglev service since it took its id (each change of its routable backends, their names or weights builds one and swaps it in whole); kept in the schedule, so counted across hot upgrades.", "service")
	c.weight = c.add("xlb_backend_weight", "Weight of the backend (backend weight, or a Kubernetes Service's weight annotation; 0..256): its share of new connections relative to the others' under weighted_round_robin and maglev, 0 for no new connections; round_robin ignores it.", "service", "backend")
	c.share = c.add("xlb_backend_table_share", "Share (0..1) of the service's new connections the data path is scheduled to give the backend: its slots in the service's schedule over the schedule's size, or 1/n of the n routable backends under round_robin; 0 outside the routable set.", "service", "backend")
	type B = maintenance.BackendSample
	type series = []struct {
		name, help string
		typ        prometheus.ValueType
		value      func(*B) uint64
	}
	for _, set := range []struct {
		to     *[]backendSeries
		series series
	}{{&c.tcp, series{
		{"xlb_backend_connections_active", "Connections to the backend open or half-closed, as of the latest maintenance cycle.",
			prometheus.GaugeValue, func(b *B) uint64 { return b.Active }},
		{"xlb_backend_connections_timewait", "Closed connections to the backend kept for the " + timeWait + " time-wait interval, as of the latest maintenance cycle.",
			prometheus.GaugeValue, func(b *B) uint64 { return b.TimeWait }},
		{"xlb_backend_connections_opened_total", "Connections (pairs) the data path created toward the backend, as of the latest maintenance cycle.",
			prometheus.CounterValue, func(b *B) uint64 { return b.Stats.Opened }},
	}}, {&c.udp, series{
		{"xlb_backend_udp_pairs_active", "Live UDP pairs to the backend (UDP services only), as of the latest maintenance cycle.",
			prometheus.GaugeValue, func(b *B) uint64 { return b.UDPActive }},
		{"xlb_backend_udp_pairs_opened_total", "UDP pairs the data path created toward the backend (UDP services only), as of the latest maintenance cycle.",
			prometheus.CounterValue, func(b *B) uint64 { return b.UDPOpened }},
	}}, {&c.traffic, series{
		{"xlb_backend_sent_bytes_total", "IPv4 bytes (headers included) forwarded from clients to the backend, as of the latest maintenance cycle.",
			prometheus.CounterValue, func(b *B) uint64 { return b.Stats.SentBytes }},
		{"xlb_backend_received_bytes_total", "IPv4 bytes (headers included) forwarded from the backend to clients, as of the latest maintenance cycle.",
			prometheus.CounterValue, func(b *B) uint64 { return b.Stats.ReceivedBytes }},
		{"xlb_backend_sent_packets_total", "Packets forwarded from clients to the backend, as of the latest maintenance cycle.",
			prometheus.CounterValue, func(b *B) uint64 { return b.Stats.SentPackets }},
		{"xlb_backend_received_packets_total", "Packets forwarded from the backend to clients, as of the latest maintenance cycle.",
			prometheus.CounterValue, func(b *B) uint64 { return b.Stats.ReceivedPackets }},
	}}} {
		for _, s := range set.series {
			*set.to = append(*set.to, backendSeries{desc: c.add(s.name, s.help, "service", "backend"), typ: s.typ, value: s.value})
		}
	}
	return c
}

// backendTotals is one backend name's share of a snapshot: the state it
// shows and its backends' samples summed.
type backendTotals struct {
	state api.BackendState
	sum   maintenance.BackendSample
	// checked: some backend of the name has health checks; ok and failed
	// sum their results.
	checked    bool
	ok, failed uint64
	timestamps api.Timestamps
	// weight is the backend's whose state the name shows; share sums the
	// name's backends' table shares.
	weight uint16
	share  float64
}

// add sums one backend's sample into t; its timestamp state is the
// first of api.TimestampStates among the name's backends.
func (t *backendTotals) add(b maintenance.BackendSample) {
	if w := b.Timestamps.Word(); tsRank(w) < tsRank(t.timestamps) {
		t.timestamps = w
	}
	t.sum.Active += b.Active
	t.sum.TimeWait += b.TimeWait
	t.sum.Stats.Opened += b.Stats.Opened
	t.sum.UDPActive += b.UDPActive
	t.sum.UDPOpened += b.UDPOpened
	t.sum.Stats.SentBytes += b.Stats.SentBytes
	t.sum.Stats.ReceivedBytes += b.Stats.ReceivedBytes
	t.sum.Stats.SentPackets += b.Stats.SentPackets
	t.sum.Stats.ReceivedPackets += b.Stats.ReceivedPackets
}

// update implements collector.
func (c *backendsCollector) update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error {
	if s == nil {
		return errNoData
	}
	for _, svc := range s.ServiceList() {
		c.service(s, svc, ch)
	}
	return nil
}

// service sends one service's series.
func (c *backendsCollector) service(s *snapshot.Snapshot, svc snapshot.Service, ch chan<- prometheus.Metric) {
	var discovered, routable, unhealthy, draining, unreachable int
	var names []string
	byName := map[string]*backendTotals{}
	for _, b := range svc.Backends {
		if b.Discovered {
			discovered++
		}
		state, ok := s.BackendState(b)
		if !ok {
			continue
		}
		switch state {
		case api.Routable:
			routable++
		case api.Unhealthy:
			unhealthy++
		case api.Draining:
			draining++
		case api.Unreachable:
			unreachable++
		}
		t := byName[b.Name]
		if t == nil {
			t = &backendTotals{state: state, timestamps: api.TimestampsUnknown, weight: b.Weight}
			byName[b.Name] = t
			names = append(names, b.Name)
		} else if rank(state) < rank(t.state) {
			t.state, t.weight = state, b.Weight
		}
		t.share += svc.TableShare(b)
		if h := b.Health; h != nil {
			t.checked = true
			t.ok += h.OK
			t.failed += h.Failed
		}
		if s.Sample != nil {
			if bs, found := s.Sample.Backend(b.ID); found {
				t.add(bs)
			}
		}
	}
	sv := svc.Name
	gauge(ch, c.count, float64(discovered), sv, "discovered")
	gauge(ch, c.count, float64(routable), sv, string(api.Routable))
	gauge(ch, c.count, float64(unhealthy), sv, string(api.Unhealthy))
	gauge(ch, c.count, float64(draining), sv, string(api.Draining))
	gauge(ch, c.count, float64(unreachable), sv, string(api.Unreachable))
	gauge(ch, c.schedulerInfo, 1, sv, svc.SchedulerName())
	if svc.TableScheduler() {
		gauge(ch, c.tableSize, float64(svc.Schedule.Len), sv)
		counter(ch, c.tableRebuilds, svc.Schedule.Rebuilds, sv)
	}
	if !c.perBackend {
		return
	}
	for _, name := range names {
		t := byName[name]
		gauge(ch, c.weight, float64(t.weight), sv, name)
		gauge(ch, c.share, t.share, sv, name)
		for _, st := range api.BackendStates() {
			gauge(ch, c.state, boolValue(t.state == st), sv, name, string(st))
		}
		if t.checked {
			ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(t.ok), sv, name, string(api.HealthCheckOK))
			ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(t.failed), sv, name, string(api.HealthCheckFail))
		}
		if s.Sample == nil {
			continue
		}
		own := c.tcp
		if svc.IsUDP() {
			own = c.udp
		}
		for _, series := range append(own[:len(own):len(own)], c.traffic...) {
			ch <- prometheus.MustNewConstMetric(series.desc, series.typ, float64(series.value(&t.sum)), sv, name)
		}
		if svc.IsUDP() {
			continue
		}
		for _, ts := range api.TimestampStates() {
			gauge(ch, c.timestamps, boolValue(t.timestamps == ts), sv, name, string(ts))
		}
	}
}

// tsRank orders timestamp states by precedence (lower wins;
// api.TimestampStates).
func tsRank(ts api.Timestamps) int {
	for i, s := range api.TimestampStates() {
		if s == ts {
			return i
		}
	}
	return len(api.TimestampStates())
}

// rank orders backend states by precedence (lower wins;
// api.BackendStates).
func rank(state api.BackendState) int {
	for i, s := range api.BackendStates() {
		if s == state {
			return i
		}
	}
	return len(api.BackendStates())
}
