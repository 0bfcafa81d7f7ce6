package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// handshakeCollector exports xlb_backend_handshake_seconds{backend}, the
// data path's passive handshake latency (issue 14): per backend, the time
// from the SYN XLB forwarded to the backend's first SYN-ACK of the pair,
// as a histogram with the data path's buckets (dataplane.HandshakeBuckets:
// log-spaced from 50 µs to 3 s). The data path counts every handshake per
// CPU; the maintenance sample carries each backend id's sums
// (maintenance.BackendSample.Handshake), so a scrape shows the latest
// cycle's. As for the other per-backend series (backends.go), the backend
// label is the backend's name: backends that share one (a departed
// backend still draining and its successor) are summed, and ids the
// backend manager does not list are left out. A listed backend without a
// handshake has an empty histogram.
type handshakeCollector struct {
	descs

	seconds *prometheus.Desc
}

func newHandshakeCollector() *handshakeCollector {
	c := &handshakeCollector{}
	c.seconds = c.add("xlb_backend_handshake_seconds", "Time from the SYN XLB forwarded to the backend to the backend's first SYN-ACK, per connection, as the data path saw them pass (a retransmitted SYN keeps the first one's time; a backend slow to accept shows here before it fails), as of the latest maintenance cycle.", "backend")
	return c
}

// update implements collector.
func (c *handshakeCollector) update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error {
	if s == nil || s.Sample == nil {
		return errNoData
	}
	var names []string
	byName := map[string]*dataplane.Histogram{}
	for _, b := range s.Backends {
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
		ch <- prometheus.MustNewConstHistogram(c.seconds, h.Count, h.Sum.Seconds(), cumulative(h), name)
	}
	return nil
}

// cumulative is h's buckets as Prometheus counts them: each bound's count
// of handshakes at most that long (the data path's are per bucket), by
// bound in seconds. The +Inf bucket is the count.
func cumulative(h *dataplane.Histogram) map[float64]uint64 {
	out := make(map[float64]uint64, len(dataplane.HandshakeBuckets))
	var n uint64
	for k, le := range dataplane.HandshakeBuckets {
		n += h.Buckets[k]
		out[le] = n
	}
	return out
}
