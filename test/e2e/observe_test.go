package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// nsClient is an HTTP client whose connections start inside h's namespace.
func nsClient(h *lab.Host) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return h.Dial(ctx, addr) },
	}}
}

// get fetches url from inside h, with Basic auth when user is set.
func get(t testing.TB, h *lab.Host, url, user, pass string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := nsClient(h).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const adminURL = "http://127.0.0.1:8642"

func statusDoc(t testing.TB, l *lab.Lab) api.Document {
	t.Helper()
	code, hdr, body := get(t, l.XLB, adminURL+"/api/v1/status", "", "")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	if hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q", hdr.Get("Cache-Control"))
	}
	var d api.Document
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// scrape fetches the metrics listener's page from inside the XLB
// namespace and parses it.
func scrape(t testing.TB, l *lab.Lab) map[string]*dto.MetricFamily {
	t.Helper()
	code, _, body := get(t, l.XLB, "http://192.0.2.10:9642/metrics", "", "")
	if code != 200 {
		t.Fatalf("metrics %d", code)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// metricValue is the value of the first series of name whose labels
// include labels (a counter's or a gauge's).
func metricValue(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("metric %s missing", name)
	}
	for _, m := range f.GetMetric() {
		match := true
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
				match = false
			}
		}
		if match {
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s%v not found", name, labels)
	return 0
}

// The status API and the metrics describe a running daemon field by field.
func TestStatusAndMetrics(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	p := startXLB(t, l, labConfig(l, ""))
	if code, _, body := get(t, l.XLB, adminURL+"/readyz", "", ""); code != 200 || body != "ready" {
		t.Fatalf("readyz %d %q", code, body)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 30; i++ {
		if err := echoThrough(l.Client(), rng, 1000); err != nil {
			t.Fatal(err)
		}
	}
	// wait for a maintenance sample that saw all 30 closed
	var d api.Document
	deadline := time.Now().Add(30 * time.Second)
	for {
		d = statusDoc(t, l)
		if d.Connections.ClosedTotal == 30 && d.Connections.TimeWait == 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections never reached 30 closed: %+v", d.Connections)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d.SchemaVersion != api.SchemaVersion || d.Name != "e2e" || d.Lifecycle != "running" || !d.Readiness.Ready || d.Readiness.Reason != "" {
		t.Fatalf("header fields: %+v", d)
	}
	if len(d.Dataplane.XDPAttachments) != 1 || d.Dataplane.XDPAttachments[0].Interface != "eth0" || d.Dataplane.XDPAttachments[0].Mode != "native" {
		t.Fatalf("attachments %+v", d.Dataplane.XDPAttachments)
	}
	if d.Dataplane.FlowMap.Capacity != 131072 || d.Dataplane.FlowMap.Entries != 60 {
		t.Fatalf("flow map %+v, want 60 of 131072 entries", d.Dataplane.FlowMap)
	}
	if d.Dataplane.SampledAtUnixMs == nil || d.Dataplane.SampleAgeMs == nil {
		t.Fatal("sample time missing")
	}
	if d.Listen.IP != "192.0.2.10" || len(d.Listen.Ports) != 1 || d.Listen.Ports[0].LocalPort != 80 || d.Listen.Ports[0].RemotePort != 8080 {
		t.Fatalf("listen %+v", d.Listen)
	}
	c := d.Connections
	if c.Active != 0 || c.OpenedTotal != 30 || c.ClosedTotal != 30 || c.OrphanedTotal != 0 || c.ClosedBy.ClientFIN != 30 {
		t.Fatalf("connections %+v", c)
	}
	if len(d.Backends) != 3 {
		t.Fatalf("backends %+v", d.Backends)
	}
	for i, b := range d.Backends {
		if b.Name != fmt.Sprintf("backend-%d", i+1) || b.IP != l.Backends[i].IP().String() || b.State != "routable" ||
			!b.AvailableForNewConnections || b.OpenedTotal != 10 || b.ActiveConnections != 0 || b.SentBytesTotal == 0 || b.ReceivedBytesTotal == 0 {
			t.Fatalf("backend %d: %+v", i, b)
		}
	}
	if d.Config.ReloadRequired || len(d.Config.ChangedKeys) != 0 || d.Config.Path != p.Config {
		t.Fatalf("config %+v", d.Config)
	}
	if u := d.Upgrades; u.Start != api.StartFresh || u.AdoptedPairs != 0 || u.OK != 0 || u.Failed != 0 || u.LastFailure != "" {
		t.Fatalf("upgrades %+v, want a fresh start", u)
	}

	fams := scrape(t, l)
	want := map[string][]string{ // DESIGN §4, §9 (the service label): name -> label names
		"xlb_build_info": {"branch", "goarch", "goos", "goversion", "revision", "tags", "version"}, "xlb_connections_active": {"service"}, "xlb_connections_timewait": {"service"},
		"xlb_connections_opened_total": {"service"}, "xlb_connections_closed_total": {"initiator", "reason", "service"},
		"xlb_connections_orphaned_total": {"service"}, "xlb_backends": {"service", "state"},
		"xlb_backend_connections_active": {"backend", "service"}, "xlb_backend_connections_opened_total": {"backend", "service"},
		"xlb_backend_sent_bytes_total": {"backend", "service"}, "xlb_backend_received_bytes_total": {"backend", "service"},
		"xlb_backend_sent_packets_total": {"backend", "service"}, "xlb_backend_received_packets_total": {"backend", "service"},
		"xlb_flow_map_entries": nil, "xlb_flow_map_capacity": nil, "xlb_flow_pair_invariant_violations_total": nil,
		"xlb_snat_port_exhausted_total": nil, "xlb_xdp_attached": {"interface", "mode"}, "xlb_shutdown_resets_total": nil,
		"xlb_config_reload_required": nil, "xlb_maintenance_duration_seconds": nil, "xlb_xdp_actions_total": {"action"},
		"xlb_hot_upgrades_total": {"result"}, "xlb_adopted_connection_pairs": nil,
	}
	for name, labels := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("metric %s missing", name)
			continue
		}
		for _, m := range f.GetMetric() {
			var got []string
			for _, lp := range m.GetLabel() {
				got = append(got, lp.GetName())
			}
			if strings.Join(got, ",") != strings.Join(labels, ",") {
				t.Errorf("%s labels %v, want %v", name, got, labels)
			}
		}
	}
	if v := metricValue(t, fams, "xlb_connections_closed_total", map[string]string{"initiator": "client", "reason": "fin"}); v != 30 {
		t.Fatalf("closed client/fin = %v", v)
	}
	if v := metricValue(t, fams, "xlb_backend_connections_opened_total", map[string]string{"backend": "backend-2"}); v != 10 {
		t.Fatalf("backend-2 opened = %v", v)
	}
	if v := metricValue(t, fams, "xlb_xdp_attached", map[string]string{"interface": "eth0", "mode": "native"}); v != 1 {
		t.Fatalf("xdp attached = %v", v)
	}
	for _, result := range []string{api.UpgradeOK, api.UpgradeFailed} {
		if v := metricValue(t, fams, "xlb_hot_upgrades_total", map[string]string{"result": result}); v != 0 {
			t.Fatalf("hot upgrades %s = %v on a fresh start", result, v)
		}
	}
	if v := metricValue(t, fams, "xlb_backends", map[string]string{"state": "routable"}); v != 3 {
		t.Fatalf("routable backends = %v", v)
	}
	// no label value anywhere is an address (clients are never labels)
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if _, err := netip.ParseAddr(lp.GetValue()); err == nil {
					t.Errorf("%s has label %s=%q, an address", name, lp.GetName(), lp.GetValue())
				}
			}
		}
	}
	stopXLB(t, l, p)
}

// With admin.auth, the probes stay open and the API needs the password;
// without XLB_ADMIN_PASSWORD the daemon refuses to start.
func TestAdminAuth(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	cfg := labConfig(l, "admin:\n  address: 127.0.0.1\n  port: 8642\n  auth:\n    username: operator\n")

	p, err := startXLBEnv(t, l, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(60 * time.Second); err != nil || code != 1 {
		t.Fatalf("without a password: exit %d err %v, want 1", code, err)
	}
	if !strings.Contains(p.Log(), "XLB_ADMIN_PASSWORD") {
		t.Fatalf("the error does not name XLB_ADMIN_PASSWORD:\n%s", p.Log())
	}
	if mode, _ := l.XLB.XDPAttachMode("eth0"); mode != 0 {
		t.Fatal("a config that fails startup attached XDP")
	}

	p, err = startXLBEnv(t, l, cfg, []string{"XLB_ADMIN_PASSWORD=s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("xlb running", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, user, pass string
		code             int
	}{
		{"/healthz", "", "", 200}, {"/readyz", "", "", 200},
		{"/api/v1/status", "", "", 401}, {"/api/v1/status", "operator", "wrong", 401}, {"/api/v1/status", "operator", "s3cret", 200},
		{"/admin/", "", "", 401}, {"/admin/", "operator", "s3cret", 200},
	} {
		if code, _, _ := get(t, l.XLB, adminURL+c.path, c.user, c.pass); code != c.code {
			t.Errorf("GET %s as %q: %d, want %d", c.path, c.user, code, c.code)
		}
	}
	stopXLB(t, l, p)
}
