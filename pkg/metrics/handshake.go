package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// handshakeCollector exports xlb_backend_handshake_seconds{service,backend}, the
// data path's passive handshake latency (issue 14): per backend, the time
// from the SYN XLB forwarded to the backend's first SYN-ACK of the pair,
// as a histogram with the data path's buckets (dataplane.HandshakeBuckets:
// log-spaced from 50 µs to 3 s), of which every other bound is exported
// (handshakeBounds: 8, about 4.3 times apart from 104 µs to 3 s; the
// count at a bound is exact, the data path's buckets nesting in the
// exported ones). The data path counts every handshake per
// CPU; the maintenance sample carries each backend id's sums
// (maintenance.BackendSample.Handshake), so a scrape shows the latest
// cycle's. As for the other per-backend series (backends.go), the series
// has the service label and the backend label is the backend's name:
// within a service, backends that share one (a departed backend still
// draining and its successor) are summed, and ids no backend manager
// lists are left out. A listed backend without a
// handshake has an empty histogram. Without perBackend (config
// metrics.per_backend: false) nothing is exported.
type handshakeCollector struct {
	descs

	perBackend bool
	seconds    *prometheus.Desc
}

// handshakeBounds are the indices of the dataplane.HandshakeBuckets bounds
// exported (issue 28 item 9: 11 series per backend instead of 19): every
// other one, the last (3 s) included. 104 µs, 451 µs and 1.96 ms tell a
// LAN backend's kernel answer; 8.5 ms, 37 ms and 160 ms a slow or loaded
// one; 692 ms and 3 s SYNs the backend dropped (the client's first SYN
// retransmission comes after 1 s).
var handshakeBounds = func() []int {
	var ks []int
	for k := len(dataplane.HandshakeBuckets) - 1; k >= 0; k -= 2 {
		ks = append([]int{k}, ks...)
	}
	return ks
}()

func newHandshakeCollector(perBackend bool) *handshakeCollector {
	c := &handshakeCollector{perBackend: perBackend}
	c.seconds = c.add("xlb_backend_handshake_seconds", "Time from the SYN XLB forwarded to the backend to the backend's first SYN-ACK, per connection, as the data path saw them pass (a retransmitted SYN keeps the first one's time; a backend slow to accept shows here before it fails), as of the latest maintenance cycle.", "service", "backend")
	return c
}

// update implements collector.
func (c *handshakeCollector) update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error {
	if s == nil || s.Sample == nil {
		return errNoData
	}
	if !c.perBackend {
		return nil
	}
	for _, svc := range s.ServiceList() {
		if svc.IsUDP() {
			continue // no handshake (issue 31)
		}
		var names []string
		byName := map[string]*dataplane.Histogram{}
		for _, b := range svc.Backends {
			if _, listed := s.BackendState(b); !listed {
				continue
			}
			h := byName[b.Name]
			if h == nil {
				h = &dataplane.Histogram{}
				byName[b.Name] = h
				names = append(names, b.Name)
			}
			if bs, found := s.Sample.Backend(b.ID); found {
				h.Add(bs.Handshake)
			}
		}
		for _, name := range names {
			h := byName[name]
			ch <- prometheus.MustNewConstHistogram(c.seconds, h.Count, h.Sum.Seconds(), cumulative(h), svc.Name, name)
		}
	}
	return nil
}

// cumulative is h's buckets as Prometheus counts them at the exported
// bounds (handshakeBounds): each bound's count of handshakes at most that
// long (the data path's are per bucket), by bound in seconds. The +Inf
// bucket is the count.
func cumulative(h *dataplane.Histogram) map[float64]uint64 {
	out := make(map[float64]uint64, len(handshakeBounds))
	var n uint64
	next := 0
	for k := range dataplane.HandshakeBuckets {
		n += h.Buckets[k]
		if next < len(handshakeBounds) && handshakeBounds[next] == k {
			out[dataplane.HandshakeBuckets[k]] = n
			next++
		}
	}
	return out
}
