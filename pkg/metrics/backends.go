package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

// backendStates are the values of xlb_backend_state{state}, in the order
// of precedence used when two listed backends share a name.
var backendStates = []string{"routable", "draining", "unreachable"}

// backendsCollector exports the backend set (from the backend manager,
// with Snapshot.BackendState's rules; DESIGN §3) and each listed backend's
// traffic (from the maintenance sample).
//
// The backend label is the backend's name. Backends that share a name (a
// departed backend still draining and its successor under the same name)
// are summed into one series; ids seen in the flow map that the backend
// manager does not know have no name and are left out.
type backendsCollector struct {
	store *snapshot.Store

	count, state                 *prometheus.Desc
	active, timewait, opened     *prometheus.Desc
	sentBytes, receivedBytes     *prometheus.Desc
	sentPackets, receivedPackets *prometheus.Desc
}

func newBackendsCollector(store *snapshot.Store) *backendsCollector {
	b := []string{"backend"}
	return &backendsCollector{
		store: store,
		count: prometheus.NewDesc("xlb_backends",
			"Backends by state: discovered (currently listed by the provider), routable (discovered and eligible for new connections), draining (no longer routable but still owning connection pairs). A backend can count in more than one state.",
			[]string{"state"}, nil),
		state: prometheus.NewDesc("xlb_backend_state",
			"State of each listed backend as the status API reports it: 1 for the current state (routable, draining, unreachable), 0 for the others.",
			[]string{"backend", "state"}, nil),
		active: prometheus.NewDesc("xlb_backend_connections_active",
			"Connections to the backend open or half-closed, as of the latest maintenance cycle.",
			b, nil),
		timewait: prometheus.NewDesc("xlb_backend_connections_timewait",
			"Closed connections to the backend kept for the 60 s time-wait interval, as of the latest maintenance cycle.",
			b, nil),
		opened: prometheus.NewDesc("xlb_backend_connections_opened_total",
			"Connections (pairs) the data path created toward the backend, as of the latest maintenance cycle.",
			b, nil),
		sentBytes: prometheus.NewDesc("xlb_backend_sent_bytes_total",
			"IPv4 bytes (headers included) forwarded from clients to the backend, as of the latest maintenance cycle.",
			b, nil),
		receivedBytes: prometheus.NewDesc("xlb_backend_received_bytes_total",
			"IPv4 bytes (headers included) forwarded from the backend to clients, as of the latest maintenance cycle.",
			b, nil),
		sentPackets: prometheus.NewDesc("xlb_backend_sent_packets_total",
			"Packets forwarded from clients to the backend, as of the latest maintenance cycle.",
			b, nil),
		receivedPackets: prometheus.NewDesc("xlb_backend_received_packets_total",
			"Packets forwarded from the backend to clients, as of the latest maintenance cycle.",
			b, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *backendsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.count, c.state, c.active, c.timewait, c.opened,
		c.sentBytes, c.receivedBytes, c.sentPackets, c.receivedPackets} {
		ch <- d
	}
}

// backendTotals is one backend name's share of a snapshot.
type backendTotals struct {
	state                                    string
	active, timewait, opened                 uint64
	sentBytes, receivedBytes, sentPk, recvPk uint64
}

// Collect implements prometheus.Collector.
func (c *backendsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.store.Load()
	if s == nil {
		return
	}
	var discovered, routable, draining int
	var names []string
	byName := map[string]*backendTotals{}
	for _, b := range s.Backends {
		if b.Discovered {
			discovered++
		}
		state, ok := s.BackendState(b)
		if !ok {
			continue
		}
		switch state {
		case "routable":
			routable++
		case "draining":
			draining++
		}
		t := byName[b.Name]
		if t == nil {
			t = &backendTotals{state: state}
			byName[b.Name] = t
			names = append(names, b.Name)
		} else if rank(state) < rank(t.state) {
			t.state = state
		}
		if s.Sample != nil {
			if bs, found := s.Sample.Backend(b.ID); found {
				t.active += bs.Active
				t.timewait += bs.TimeWait
				t.opened += bs.Stats.Opened
				t.sentBytes += bs.Stats.SentBytes
				t.receivedBytes += bs.Stats.ReceivedBytes
				t.sentPk += bs.Stats.SentPackets
				t.recvPk += bs.Stats.ReceivedPackets
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(discovered), "discovered")
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(routable), "routable")
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(draining), "draining")
	for _, name := range names {
		t := byName[name]
		for _, st := range backendStates {
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, boolValue(t.state == st), name, st)
		}
		if s.Sample == nil {
			continue
		}
		gauge := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), name)
		}
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), name)
		}
		gauge(c.active, t.active)
		gauge(c.timewait, t.timewait)
		counter(c.opened, t.opened)
		counter(c.sentBytes, t.sentBytes)
		counter(c.receivedBytes, t.receivedBytes)
		counter(c.sentPackets, t.sentPk)
		counter(c.receivedPackets, t.recvPk)
	}
}

// rank orders backend states by precedence (lower wins).
func rank(state string) int {
	for i, s := range backendStates {
		if s == state {
			return i
		}
	}
	return len(backendStates)
}
