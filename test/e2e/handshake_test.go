package e2e

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/xlbproject/xlb/test/lab"
)

// handshakeCounts is each backend's xlb_backend_handshake_seconds count
// and sum in a scrape, by backend name; missing when the family is.
func handshakeCounts(fams map[string]*dto.MetricFamily) (map[string]uint64, map[string]float64, bool) {
	f, ok := fams["xlb_backend_handshake_seconds"]
	if !ok {
		return nil, nil, false
	}
	counts, sums := map[string]uint64{}, map[string]float64{}
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "backend" {
				counts[lp.GetValue()] = m.GetHistogram().GetSampleCount()
				sums[lp.GetValue()] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return counts, sums, true
}

// The handshake histogram counts every connection (issue 14, passive
// handshake latency): N connections through the daemon, from a few
// clients at once, make xlb_backend_handshake_seconds_count sum to N over
// the backends, each backend's count equal to the connections it accepted
// (its echo server's count) and to xlb_backend_connections_opened_total.
func TestHandshakeHistogramCountsEveryConnection(t *testing.T) {
	for _, topo := range []lab.Topology{lab.OneArm, lab.TwoArm} {
		t.Run(topo.String(), func(t *testing.T) {
			l := lab.New(t, lab.Options{Topology: topo})
			startXLB(t, l, labConfig(l, ""))
			const workers, each = 3, 30
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 14))
					for i := range each {
						if err := echoThrough(l.Client(), rng, 1+rng.IntN(4096)); err != nil {
							errs <- fmt.Errorf("worker %d connection %d: %w", w, i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			const n = workers * each
			waitCompleted(t, l, n)
			accepted := map[string]uint64{}
			for i, b := range l.Backends {
				accepted[fmt.Sprintf("backend-%d", i+1)] = uint64(b.Stats().Accepted)
			}

			// The sample that carries the histograms comes each second:
			// poll with a generous bound.
			var counts map[string]uint64
			var sums map[string]float64
			deadline := time.Now().Add(30 * time.Second)
			for {
				fams := scrape(t, l)
				c, s, ok := handshakeCounts(fams)
				var total uint64
				for _, v := range c {
					total += v
				}
				if ok && total == n {
					counts, sums = c, s
					for name, want := range accepted {
						if opened := metricValue(t, fams, "xlb_backend_connections_opened_total", map[string]string{"backend": name}); uint64(opened) != counts[name] {
							t.Errorf("%s: %d handshakes, %v connections opened", name, counts[name], opened)
						}
						if counts[name] != want {
							t.Errorf("%s: %d handshakes, its server accepted %d connections", name, counts[name], want)
						}
						if counts[name] > 0 && sums[name] <= 0 {
							t.Errorf("%s: %d handshakes summing to %v s", name, counts[name], sums[name])
						}
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("handshakes counted %v (sum %d, family present %v) after 30 s, want %d in all (accepted %v)", c, total, ok, n, accepted)
				}
				time.Sleep(200 * time.Millisecond)
			}
			t.Logf("%s: %d connections: handshakes per backend %v, mean %v",
				topo, n, counts, time.Duration(sumOf(sums)/float64(n)*float64(time.Second)).Round(time.Microsecond))
		})
	}
}

// sumOf adds the values of m.
func sumOf(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}
