package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// timeWait is maintenance.TimeWait as the help texts say it: "60 s".
var timeWait = fmt.Sprintf("%d s", int64(maintenance.TimeWait/time.Second))

// snatHold is maintenance.SNATHold as the help texts say it: "70 s".
var snatHold = fmt.Sprintf("%d s", int64(maintenance.SNATHold/time.Second))

// connectionsCollector exports the connection pairs and the flow map as the
// latest maintenance sample saw them (maintenance.Sample; DESIGN §4
// counting rule). The connection series are per service (DESIGN §9: the
// service label; snapshot.Snapshot.ServiceConnections): the gauges summed
// over each service's backends, the counters the service's since it took
// its id; their sum over service is the instance's. The flow map series
// are instance-wide. Nothing is exported before the first sample. While
// cycles fail, the series repeat the latest successful cycle's figures
// (xlb_maintenance_failing is then 1).
type connectionsCollector struct {
	descs

	active, timewait, opened, closed, orphaned *prometheus.Desc
	embryonic                                  *prometheus.Desc
	entries, capacity                          *prometheus.Desc
}

func newConnectionsCollector() *connectionsCollector {
	c := &connectionsCollector{}
	c.active = c.add("xlb_connections_active", "Connections of the service open or half-closed (neither both FINs nor a RST seen yet), as of the latest maintenance cycle.", "service")
	c.timewait = c.add("xlb_connections_timewait", "Closed connections of the service (both FINs seen) whose pair is kept for the "+timeWait+" time-wait interval, as of the latest maintenance cycle.", "service")
	c.opened = c.add("xlb_connections_opened_total", "Connections (pairs) the data path created for the service, as of the latest maintenance cycle.", "service")
	c.closed = c.add("xlb_connections_closed_total", "Connections of the service closed, counted once by the data path at the packet that makes the pair terminal (the second FIN or a RST), by who closed first (client or backend) and how (fin or rst), as of the latest maintenance cycle. Orphan removals are not included.", "service", "initiator", "reason")
	c.orphaned = c.add("xlb_connections_orphaned_total", "Idle connection pairs of the service removed after orphan_ttl_secs without a packet in either direction, as of the latest maintenance cycle.", "service")
	c.embryonic = c.add("xlb_connections_embryonic_expired_total", "Connection pairs of the service whose handshake never completed (no client ACK of the backend's SYN-ACK), removed flow_table.embryonic_ttl_secs after their SYN, as of the latest maintenance cycle. Not included in xlb_connections_closed_total.", "service")
	c.entries = c.add("xlb_flow_map_entries", "Directional entries in the flow map (two per connection pair, one per SNAT port held for a backend's TIME_WAIT: xlb_maintenance_hold_scheduled), as of the latest maintenance cycle.")
	c.capacity = c.add("xlb_flow_map_capacity", "Maximum directional entries of the flow map (two per connection pair of flow_table.max_connections).")
	return c
}

// update implements collector.
func (c *connectionsCollector) update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error {
	if s == nil || s.Sample == nil {
		return errNoData
	}
	for _, svc := range s.ServiceList() {
		x, name := s.ServiceConnections(svc), svc.Name
		gauge(ch, c.active, float64(x.Active), name)
		gauge(ch, c.timewait, float64(x.TimeWait), name)
		counter(ch, c.opened, x.Opened, name)
		counter(ch, c.closed, x.Closed.ClientFIN, name, "client", "fin")
		counter(ch, c.closed, x.Closed.ClientRST, name, "client", "rst")
		counter(ch, c.closed, x.Closed.BackendFIN, name, "backend", "fin")
		counter(ch, c.closed, x.Closed.BackendRST, name, "backend", "rst")
		counter(ch, c.orphaned, x.Orphaned, name)
		counter(ch, c.embryonic, x.EmbryonicExpired, name)
	}
	gauge(ch, c.entries, float64(s.Sample.FlowEntries))
	gauge(ch, c.capacity, float64(s.Sample.FlowCapacity))
	return nil
}
