package metrics

import (
	"errors"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/configwatch"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// sampleDerived are the series that exist only once a maintenance sample
// has been published.
var sampleDerived = []string{
	"xlb_connections_active", "xlb_connections_timewait", "xlb_connections_opened_total",
	"xlb_connections_closed_total", "xlb_connections_orphaned_total",
	"xlb_flow_map_entries", "xlb_flow_map_capacity", "xlb_maintenance_sample_age_seconds",
	"xlb_backend_connections_active", "xlb_backend_connections_opened_total",
	"xlb_backend_sent_bytes_total", "xlb_backend_received_bytes_total",
	"xlb_backend_sent_packets_total", "xlb_backend_received_packets_total",
	"xlb_maintenance_cycles_total", "xlb_maintenance_errors_total", "xlb_maintenance_failing",
	"xlb_close_events_total", "xlb_close_events_lost_total",
	"xlb_maintenance_walk_passes_total", "xlb_maintenance_timewait_scheduled",
}

func TestBeforeFirstSample(t *testing.T) {
	snap := fixtureSnapshot()
	snap.Sample = nil
	snap.Lifecycle = api.Starting
	snap.Config = configwatch.State{Path: snap.Config.Path}
	var store snapshot.Store
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	for _, name := range sampleDerived {
		if _, ok := fams[name]; ok {
			t.Errorf("%s exported before the first sample", name)
		}
	}
	type L = map[string]string
	for _, c := range []struct {
		name   string
		labels L
		want   float64
	}{
		{"xlb_xdp_attached", L{"interface": "eth0", "mode": "native"}, 1},
		{"xlb_config_reload_required", nil, 0},
		{"xlb_ready", nil, 0},
		{"xlb_lifecycle_state", L{"state": "starting"}, 1},
		{"xlb_backends", L{"service": "web-lb", "state": "routable"}, 1},
		{"xlb_backends", L{"service": "web-lb", "state": "draining"}, 0}, // no sample: no pairs known
		{"xlb_backend_state", L{"service": "web-lb", "backend": "backend-2", "state": "unreachable"}, 1},
		{"xlb_snat_port_exhausted_total", nil, float64(liveCounters.SNATExhausted)},
		{"xlb_flow_pair_invariant_violations_total", nil, float64(liveCounters.InvariantViolations)},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := fams["xlb_build_info"]; !ok {
		t.Error("xlb_build_info missing")
	}
}

func TestNothingPublished(t *testing.T) {
	var store snapshot.Store
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	if _, ok := fams["xlb_build_info"]; !ok {
		t.Error("xlb_build_info missing")
	}
	if _, ok := fams["xlb_maintenance_duration_seconds"]; !ok {
		t.Error("xlb_maintenance_duration_seconds missing")
	}
	for name := range fams {
		switch name {
		case "xlb_build_info", "xlb_maintenance_duration_seconds":
		default:
			if len(name) > 4 && name[:4] == "xlb_" {
				t.Errorf("%s exported before any snapshot", name)
			}
		}
	}
}

// A failed counter read (Snapshot.CountersError) leaves the data-path
// series out with xlb_scrape_collector_success 0, warns once and says when
// the counters are back.
func TestCountersErrorLeavesThemOut(t *testing.T) {
	var store snapshot.Store
	failed := fixtureSnapshot()
	failed.SetCounters(dataplane.Counters{}, errors.New("map gone"))
	store.Publish(failed)
	srv, hook := testServer(t, &store)
	for range 2 {
		fams, _ := scrape(t, srv)
		if got := value(t, fams, "xlb_scrape_collector_success", map[string]string{"collector": "dataplane"}); got != 0 {
			t.Errorf("success = %v, want 0", got)
		}
		for _, name := range []string{"xlb_xdp_actions_total", "xlb_snat_port_exhausted_total", "xlb_shutdown_resets_total", "xlb_flow_pair_invariant_violations_total"} {
			if _, ok := fams[name]; ok {
				t.Errorf("%s exported although the counters could not be read", name)
			}
		}
		if _, ok := fams["xlb_connections_active"]; !ok {
			t.Error("sample series missing when only the counters fail")
		}
		if got := value(t, fams, "xlb_scrape_collector_success", map[string]string{"collector": "connections"}); got != 1 {
			t.Errorf("connections success = %v, want 1", got)
		}
	}
	store.Publish(fixtureSnapshot())
	fams, _ := scrape(t, srv)
	if got := value(t, fams, "xlb_shutdown_resets_total", nil); got != float64(liveCounters.ShutdownResets) {
		t.Errorf("after recovery xlb_shutdown_resets_total = %v", got)
	}
	if got := value(t, fams, "xlb_scrape_collector_success", map[string]string{"collector": "dataplane"}); got != 1 {
		t.Errorf("after recovery success = %v, want 1", got)
	}
	var warns, infos int
	for _, e := range hook.AllEntries() {
		switch e.Level {
		case logrus.WarnLevel:
			warns++
			if e.Message != "metrics: cannot read the data path counters; their series are left out until the read succeeds" || e.Data[logrus.ErrorKey].(error).Error() != "map gone" {
				t.Errorf("warning %q %v", e.Message, e.Data)
			}
		case logrus.InfoLevel:
			infos++
			if e.Message != "metrics: data path counters readable again" {
				t.Errorf("info %q", e.Message)
			}
		}
	}
	if warns != 1 || infos != 1 {
		t.Errorf("logged %d warnings and %d infos, want one of each (failure, recovery): %v", warns, infos, hook.AllEntries())
	}
}

// Every XLB collector reports its success once a snapshot is published;
// one whose source is not there yet (here the sample) reports nothing.
func TestCollectorSuccess(t *testing.T) {
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	collectors := []string{"instance", "connections", "udp", "maintenance", "backends", "dataplane", "handshake", "bgp"}
	for _, name := range collectors {
		if got := value(t, fams, "xlb_scrape_collector_success", map[string]string{"collector": name}); got != 1 {
			t.Errorf("%s success = %v, want 1", name, got)
		}
	}
	if n := len(fams["xlb_scrape_collector_success"].GetMetric()); n != len(collectors) {
		t.Errorf("%d success series, want %d", n, len(collectors))
	}
	noSample := fixtureSnapshot()
	noSample.Sample, noSample.Counters = nil, nil
	store.Publish(noSample)
	fams, _ = scrape(t, srv)
	for _, name := range []string{"connections", "udp", "dataplane", "handshake"} {
		if _, ok := find(fams, "xlb_scrape_collector_success", map[string]string{"collector": name}); ok {
			t.Errorf("%s reports success before its source exists", name)
		}
	}
}

// The status document and the metrics show the same counters: both read
// the snapshot's latest counter read, also when it is newer than the
// sample (the shutdown window, when no cycle runs).
func TestSameCountersAsStatus(t *testing.T) {
	snap := fixtureSnapshot()
	snap.AddSample(snap.Sample)
	during := liveCounters
	during.ShutdownResets += 1000
	snap.SetCounters(during, nil)
	snap.Lifecycle = api.ShuttingDown
	var store snapshot.Store
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	doc := status.Build(snap, fixtureNow)
	c := doc.Dataplane.Counters
	for name, want := range map[string]uint64{
		"xlb_shutdown_resets_total":     c.ShutdownResetsTotal,
		"xlb_snat_port_exhausted_total": c.SNATPortExhaustedTotal,
		"xlb_flow_table_full_total":     c.TableFullTotal,
		"xlb_no_backend_resets_total":   c.NoBackendTotal,
		"xlb_fib_miss_total":            c.FIBMissTotal,
		"xlb_syn_retransmits_total":     c.SYNReusedTotal,
		"xlb_flow_pairs_replaced_total": c.PairsReplacedTotal,
		"xlb_ttl_exceeded_total":        c.TTLExceededTotal,
	} {
		if got := value(t, fams, name, nil); got != float64(want) {
			t.Errorf("%s = %v, status says %d", name, got, want)
		}
	}
	if got := value(t, fams, "xlb_xdp_actions_total", map[string]string{"action": "tx"}); got != float64(c.XDPActions.TX) {
		t.Errorf("tx = %v, status says %d", got, c.XDPActions.TX)
	}
	if c.ShutdownResetsTotal != during.ShutdownResets {
		t.Errorf("status shutdown resets %d, want the latest read %d", c.ShutdownResetsTotal, during.ShutdownResets)
	}
}

// A departed backend still draining and its successor under the same name
// make one series per name, summed.
func TestBackendsSharingANameAreSummed(t *testing.T) {
	snap := fixtureSnapshot()
	snap.Backends[2].Name = "backend-1" // draining, id 2
	var store snapshot.Store
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	b := map[string]string{"service": "web-lb", "backend": "backend-1"}
	x := snap.Sample
	if got, want := value(t, fams, "xlb_backend_connections_active", b), float64(x.Backends[0].Active+x.Backends[2].Active); got != want {
		t.Errorf("active = %v, want %v", got, want)
	}
	if got, want := value(t, fams, "xlb_backend_sent_bytes_total", b), float64(x.Backends[0].Stats.SentBytes+x.Backends[2].Stats.SentBytes); got != want {
		t.Errorf("sent bytes = %v, want %v", got, want)
	}
	if got := value(t, fams, "xlb_backend_state", map[string]string{"service": "web-lb", "backend": "backend-1", "state": "routable"}); got != 1 {
		t.Errorf("state routable = %v, want 1 (routable wins over draining)", got)
	}
	if n := len(fams["xlb_backend_connections_active"].GetMetric()); n != 3 {
		t.Errorf("%d backend series, want 3 (backend-1 twice summed, backend-2, backend-5)", n)
	}
}

// Before the first counter read the counters are absent, quietly.
func TestNoDataplaneYet(t *testing.T) {
	var store snapshot.Store
	snap := fixtureSnapshot()
	snap.Sample, snap.Counters = nil, nil
	store.Publish(snap)
	srv, hook := testServer(t, &store)
	fams, _ := scrape(t, srv)
	for _, name := range []string{"xlb_xdp_actions_total", "xlb_shutdown_resets_total"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s exported without a data path", name)
		}
	}
	if _, ok := find(fams, "xlb_scrape_collector_success", map[string]string{"collector": "dataplane"}); ok {
		t.Error("xlb_scrape_collector_success{collector=\"dataplane\"} exported before the first read")
	}
	if n := len(hook.AllEntries()); n != 0 {
		t.Errorf("%d log entries, want none: %v", n, hook.AllEntries())
	}
}

// A drained instance (DESIGN §6a) says so, and is not ready.
func TestDrainedGauge(t *testing.T) {
	snap := fixtureSnapshot()
	snap.Drained = true
	var store snapshot.Store
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	if got := value(t, fams, "xlb_drained", nil); got != 1 {
		t.Errorf("xlb_drained = %v, want 1", got)
	}
	if got := value(t, fams, "xlb_ready", nil); got != 0 {
		t.Errorf("xlb_ready = %v while drained, want 0", got)
	}
}

// A provider that never synced while the instance serves the routable set
// of its predecessor (issue 28) is stale, and the instance ready.
func TestProviderStaleGauge(t *testing.T) {
	snap := fixtureSnapshot()
	snap.ProviderSynced, snap.ProviderStale, snap.ProviderError = false, true, "kubernetes: list endpointslices: connection refused"
	var store snapshot.Store
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	if got := value(t, fams, "xlb_backend_provider_stale", map[string]string{"service": "web-lb"}); got != 1 {
		t.Errorf("xlb_backend_provider_stale = %v, want 1", got)
	}
	if got := value(t, fams, "xlb_ready", nil); got != 1 {
		t.Errorf("xlb_ready = %v while stale, want 1", got)
	}
}
