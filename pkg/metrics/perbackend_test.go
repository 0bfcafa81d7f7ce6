package metrics

import (
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// seriesPerBackend is the count docs/observability.md gives (issue 28
// item 9): xlb_backend_state (4), xlb_backend_tcp_timestamps (3), the 7
// traffic series, the handshake histogram (8 buckets, +Inf, sum and
// count), xlb_backend_weight and xlb_backend_table_share (issue 30), and
// 2 more with health checks.
//
// A UDP service's backend (issue 31) has xlb_backend_state (4), the 2
// UDP pair series and the 4 bytes and packets series, its weight and its
// table share: 12, 14 with health checks.
const (
	seriesPerBackend       = 27
	seriesPerBackendHealth = 29
	seriesPerBackendUDP    = 12
)

// seriesByBackend counts the series of fams with a backend label, by
// backend (a histogram's buckets, sum and count each one series, as
// Prometheus stores them).
func seriesByBackend(fams map[string]*dto.MetricFamily) map[string]int {
	n := map[string]int{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			b, ok := labelsOf(m)["backend"]
			if !ok {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				n[b] += len(h.GetBucket()) + 2 // the buckets (+Inf among them), _sum, _count
				if bs := h.GetBucket(); len(bs) == 0 || !math.IsInf(bs[len(bs)-1].GetUpperBound(), 1) {
					n[b]++ // +Inf, implied
				}
				continue
			}
			n[b]++
		}
	}
	return n
}

// metrics.per_backend (issue 28 item 9): with it, each backend has the
// documented number of series, and the instance's totals equal their
// sums; without it (OmitPerBackend) no series has a backend label, while
// the totals stay with the same values and every collector succeeds.
func TestPerBackendSwitch(t *testing.T) {
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	with, _ := testServer(t, &store)
	log, _ := logtest.NewNullLogger()
	without, err := New(Options{Store: &store, Log: log, Now: func() time.Time { return fixtureNow }, OmitPerBackend: true})
	if err != nil {
		t.Fatal(err)
	}
	on, _ := scrape(t, with)
	off, _ := scrape(t, without)

	// backend-1 and backend-5 have health checks; backend-4 is not listed.
	want := map[string]int{"backend-1": seriesPerBackendHealth, "backend-2": seriesPerBackend, "backend-3": seriesPerBackend, "backend-5": seriesPerBackendHealth}
	got := seriesByBackend(on)
	for b, n := range want {
		if got[b] != n {
			t.Errorf("%s: %d series, want %d", b, got[b], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series by backend %v, want %v", got, want)
	}

	sum := func(name string, labels map[string]string) float64 {
		var s float64
		for _, m := range on[name].GetMetric() {
			l := labelsOf(m)
			match := true
			for k, v := range labels {
				match = match && l[k] == v
			}
			if match {
				s += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return s
	}
	for _, c := range []struct {
		total, perBackend string
		labels            map[string]string
	}{
		{"xlb_connections_active", "xlb_backend_connections_active", nil},
		{"xlb_connections_timewait", "xlb_backend_connections_timewait", nil},
		{"xlb_connections_opened_total", "xlb_backend_connections_opened_total", nil},
	} {
		svc := map[string]string{"service": "web-lb"}
		if tot, s := value(t, on, c.total, svc), sum(c.perBackend, svc); tot != s {
			t.Errorf("%s %v, but the sum of %s is %v", c.total, tot, c.perBackend, s)
		}
	}
	for _, st := range api.BackendStates() {
		l := map[string]string{"service": "web-lb", "state": string(st)}
		if tot, s := value(t, on, "xlb_backends", l), sum("xlb_backend_state", l); tot != s {
			t.Errorf("xlb_backends{state=%q} %v, but %v backends have xlb_backend_state{state=%q} 1", st, tot, s, st)
		}
	}

	if n := seriesByBackend(off); len(n) != 0 {
		t.Errorf("per-backend series left with per_backend false: %v", n)
	}
	for _, name := range []string{"xlb_connections_active", "xlb_connections_timewait", "xlb_connections_opened_total", "xlb_backends"} {
		for _, m := range on[name].GetMetric() {
			l := labelsOf(m)
			if a, b := value(t, on, name, l), value(t, off, name, l); a != b {
				t.Errorf("%s%v: %v with per-backend series, %v without", name, l, a, b)
			}
		}
	}
	for _, m := range off["xlb_scrape_collector_success"].GetMetric() {
		if m.GetGauge().GetValue() != 1 {
			t.Errorf("xlb_scrape_collector_success%v = 0 without per-backend series", labelsOf(m))
		}
	}
}
