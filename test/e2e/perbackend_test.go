package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/xlbproject/xlb/test/lab"
)

// backendLabelled lists the families of a scrape that have a series with
// a backend label.
func backendLabelled(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if labelValue(m, "backend") != "" {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// metrics.per_backend (issue 28 item 9) on the running daemon: with the
// default, each backend has its series and xlb_connections_opened_total
// is their sum; a reload with per_backend: false leaves every series with
// a backend label out, while the totals go on from where they were.
func TestMetricsPerBackendSwitch(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	cfg := labConfig(l, "")
	bin := installBinary(t, xlbBinary)
	p := startPinned(t, l, bin, cfg)
	const conns = 6
	for i := range conns {
		if err := l.Client().EchoCheck(listenAddr, []byte(fmt.Sprintf("conn %d\n", i)), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	opened, ok := waitCounter(t, l, "xlb_connections_opened_total", nil, 30*time.Second, func(v float64) bool { return v >= conns })
	if !ok {
		t.Fatalf("xlb_connections_opened_total %v, want %d", opened, conns)
	}
	fams := scrape(t, l)
	var sum float64
	names := map[string]bool{}
	for _, m := range fams["xlb_backend_connections_opened_total"].GetMetric() {
		sum += m.GetCounter().GetValue()
		names[labelValue(m, "backend")] = true
	}
	if total := metricValue(t, fams, "xlb_connections_opened_total", nil); total != sum || len(names) != len(l.Backends) {
		t.Errorf("xlb_connections_opened_total %v, the sum over %d backends %v; want equal, over %d backends", total, len(names), sum, len(l.Backends))
	}
	if got := backendLabelled(fams); len(got) == 0 {
		t.Fatalf("no per-backend series by default")
	}

	if err := os.WriteFile(p.Config, []byte(cfg+"metrics:\n  per_backend: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	from := p.Pid()
	if code, stderr := reload(t, bin, from); code != 0 {
		t.Fatalf("reload: exit %d, %s", code, stderr)
	}
	if _, err := p.WaitHandOff(from, swapTimeout); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitCounter(t, l, "xlb_connections_opened_total", nil, 30*time.Second, func(v float64) bool { return v == opened }); !ok {
		t.Errorf("xlb_connections_opened_total after the reload: want %v, where it was", opened)
	}
	fams = scrape(t, l)
	if got := backendLabelled(fams); len(got) != 0 {
		t.Errorf("series with a backend label with per_backend false: %s", strings.Join(got, ", "))
	}
	if v := metricValue(t, fams, "xlb_backends", map[string]string{"state": "routable"}); v != float64(len(l.Backends)) {
		t.Errorf("xlb_backends{state=\"routable\"} %v, want %d", v, len(l.Backends))
	}
	stopXLB(t, l, p)
}
