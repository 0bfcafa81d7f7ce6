package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

// udpCollector exports the UDP pairs (issue 31) as the latest maintenance
// sample saw them: per UDP service (snapshot.Snapshot.ServiceUDP) its live
// pairs by state, its pairs opened and expired, its first datagrams
// passed over its cap and the cap itself; instance-wide the first
// datagrams passed for want of a backend and the UDP fragments passed
// (maintenance.UDPSample). A TCP service has no UDP series, and the
// connection series (xlb_connections_*) never count a UDP pair. Nothing
// is exported before the first sample.
type udpCollector struct {
	descs

	active, opened, expired, overCap, unrepliedMax *prometheus.Desc
	noBackend, fragsPassed                         *prometheus.Desc
}

// UDP pair states: the state label of xlb_udp_pairs_active and
// xlb_udp_pairs_expired_total.
const (
	udpUnreplied = "unreplied"
	udpReplied   = "replied"
)

func newUDPCollector() *udpCollector {
	c := &udpCollector{}
	c.active = c.add("xlb_udp_pairs_active", "Live UDP pairs of the service by state: unreplied (the backend has not answered yet; what udp_unreplied_max caps) or replied, as of the latest maintenance cycle.", "service", "state")
	c.opened = c.add("xlb_udp_pairs_opened_total", "UDP pairs the data path created for the service (a client datagram with no pair), as of the latest maintenance cycle.", "service")
	c.expired = c.add("xlb_udp_pairs_expired_total", "UDP pairs of the service removed by their timeout, by state: unreplied (flow_table.udp_timeout_secs after their last datagram) or replied (udp_stream_timeout_secs after the later direction's last datagram), as of the latest maintenance cycle.", "service", "state")
	c.overCap = c.add("xlb_udp_pairs_over_cap_total", "First datagrams of the service passed to the kernel without a pair because it had udp_unreplied_max unreplied UDP pairs (a flood, or a backend that does not answer), since the service took its id, as of the latest maintenance cycle.", "service")
	c.unrepliedMax = c.add("xlb_udp_unreplied_max", "The service's udp_unreplied_max: the most UDP pairs without a reply it may hold.", "service")
	c.noBackend = c.add("xlb_udp_no_backend_total", "First datagrams of a UDP service passed to the kernel without a pair because no backend was routable (a full flow map and exhausted SNAT ports count in xlb_flow_table_full_total and xlb_snat_port_exhausted_total), as of the latest maintenance cycle.")
	c.fragsPassed = c.add("xlb_udp_fragments_passed_total", "UDP fragments to the listen address or a SNAT address passed to the kernel untouched (XLB does not balance fragmented datagrams), as of the latest maintenance cycle.")
	return c
}

// update implements collector.
func (c *udpCollector) update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error {
	if s == nil || s.Sample == nil {
		return errNoData
	}
	for _, svc := range s.ServiceList() {
		u, ok := s.ServiceUDP(svc)
		if !ok {
			continue
		}
		name := svc.Name
		gauge(ch, c.active, float64(u.Unreplied), name, udpUnreplied)
		gauge(ch, c.active, float64(u.Replied), name, udpReplied)
		counter(ch, c.opened, u.Opened, name)
		counter(ch, c.expired, u.ExpiredUnreplied, name, udpUnreplied)
		counter(ch, c.expired, u.ExpiredReplied, name, udpReplied)
		counter(ch, c.overCap, u.OverCap, name)
		gauge(ch, c.unrepliedMax, float64(u.UnrepliedMax), name)
	}
	counter(ch, c.noBackend, s.Sample.UDP.NoBackend)
	counter(ch, c.fragsPassed, s.Sample.UDP.FragsPassed)
	return nil
}
