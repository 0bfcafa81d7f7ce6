package metrics

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/snapshot"
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
	snap.Lifecycle = snapshot.Starting
	snap.Config = snapshot.ConfigState{Path: snap.Config.Path}
	var store snapshot.Store
	store.Publish(snap)
	srv, _ := testServer(t, &store, liveCountersFunc)
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
		{"xlb_config_restart_required", nil, 0},
		{"xlb_ready", nil, 0},
		{"xlb_lifecycle_state", L{"state": "starting"}, 1},
		{"xlb_backends", L{"state": "routable"}, 1},
		{"xlb_backends", L{"state": "draining"}, 0}, // no sample: no pairs known
		{"xlb_backend_state", L{"backend": "backend-2", "state": "unreachable"}, 1},
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
	srv, _ := testServer(t, &store, nil)
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

func TestCountersErrorLeavesThemOut(t *testing.T) {
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	fail := true
	srv, hook := testServer(t, &store, func() (dataplane.Counters, error) {
		if fail {
			return dataplane.Counters{}, errors.New("map gone")
		}
		return liveCounters, nil
	})
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
	}
	fail = false
	fams, _ := scrape(t, srv)
	if got := value(t, fams, "xlb_shutdown_resets_total", nil); got != float64(liveCounters.ShutdownResets) {
		t.Errorf("after recovery xlb_shutdown_resets_total = %v", got)
	}
	var warns, infos int
	for _, e := range hook.AllEntries() {
		switch e.Level {
		case logrus.WarnLevel:
			warns++
		case logrus.InfoLevel:
			infos++
		}
	}
	if warns != 1 || infos != 1 {
		t.Errorf("logged %d warnings and %d infos, want one of each (failure, recovery): %v", warns, infos, hook.AllEntries())
	}
}

func TestCountersFromSampleWithoutFunc(t *testing.T) {
	var store snapshot.Store
	snap := fixtureSnapshot()
	store.Publish(snap)
	srv, _ := testServer(t, &store, nil)
	fams, _ := scrape(t, srv)
	c := snap.Sample.Counters
	if got := value(t, fams, "xlb_snat_port_exhausted_total", nil); got != float64(c.SNATExhausted) {
		t.Errorf("xlb_snat_port_exhausted_total = %v, want %d", got, c.SNATExhausted)
	}
	if got := value(t, fams, "xlb_flow_pair_invariant_violations_total", nil); got != float64(c.InvariantViolations+snap.Sample.InvariantRepairs) {
		t.Errorf("xlb_flow_pair_invariant_violations_total = %v", got)
	}
	if _, ok := fams["xlb_scrape_collector_success"]; ok {
		t.Error("xlb_scrape_collector_success exported without a CountersFunc")
	}
}

// A departed backend still draining and its successor under the same name
// make one series per name, summed.
func TestBackendsSharingANameAreSummed(t *testing.T) {
	snap := fixtureSnapshot()
	snap.Backends[2].Name = "backend-1" // draining, id 2
	var store snapshot.Store
	store.Publish(snap)
	srv, _ := testServer(t, &store, liveCountersFunc)
	fams, _ := scrape(t, srv)
	b := map[string]string{"backend": "backend-1"}
	x := snap.Sample
	if got, want := value(t, fams, "xlb_backend_connections_active", b), float64(x.Backends[0].Active+x.Backends[2].Active); got != want {
		t.Errorf("active = %v, want %v", got, want)
	}
	if got, want := value(t, fams, "xlb_backend_sent_bytes_total", b), float64(x.Backends[0].Stats.SentBytes+x.Backends[2].Stats.SentBytes); got != want {
		t.Errorf("sent bytes = %v, want %v", got, want)
	}
	if got := value(t, fams, "xlb_backend_state", map[string]string{"backend": "backend-1", "state": "routable"}); got != 1 {
		t.Errorf("state routable = %v, want 1 (routable wins over draining)", got)
	}
	if n := len(fams["xlb_backend_connections_active"].GetMetric()); n != 2 {
		t.Errorf("%d backend series, want 2", n)
	}
}

// Before the data path is loaded the counters are absent, quietly.
func TestNoDataplaneYet(t *testing.T) {
	var store snapshot.Store
	snap := fixtureSnapshot()
	snap.Sample = nil
	store.Publish(snap)
	srv, hook := testServer(t, &store, func() (dataplane.Counters, error) {
		return dataplane.Counters{}, fmt.Errorf("starting: %w", ErrNoDataplane)
	})
	fams, _ := scrape(t, srv)
	for _, name := range []string{"xlb_xdp_actions_total", "xlb_shutdown_resets_total", "xlb_scrape_collector_success"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s exported without a data path", name)
		}
	}
	if n := len(hook.AllEntries()); n != 0 {
		t.Errorf("%d log entries, want none: %v", n, hook.AllEntries())
	}
}
