package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

// bgpCollector exports the embedded BGP speaker (DESIGN §6a) from
// Snapshot.BGP: xlb_bgp_peer_up{peer} (the peer label is the configured
// address, an operator's choice, never a client) and
// xlb_bgp_announced_routes. Without a bgp section it exports nothing and
// succeeds.
type bgpCollector struct {
	descs

	peerUp, announced *prometheus.Desc
}

func newBGPCollector() *bgpCollector {
	c := &bgpCollector{}
	c.peerUp = c.add("xlb_bgp_peer_up", "1 while the BGP session with the configured peer is established, 0 otherwise.", "peer")
	c.announced = c.add("xlb_bgp_announced_routes", "Prefixes announced now to at least one established peer: the configured ones while the instance is ready, not drained and not shutting down, else 0.")
	return c
}

// update implements collector.
func (c *bgpCollector) update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error {
	if s == nil {
		return errNoData
	}
	if s.BGP == nil {
		return nil
	}
	for _, p := range s.BGP.Peers {
		gauge(ch, c.peerUp, boolValue(p.State == snapshot.BGPEstablished), p.Address.String())
	}
	gauge(ch, c.announced, float64(len(s.BGP.Announced)))
	return nil
}
