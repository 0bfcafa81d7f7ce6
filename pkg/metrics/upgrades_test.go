package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// TestHotUpgradeExposition pins the text of the hot upgrade and config
// series (DESIGN §6) and the lifecycle states, help included.
func TestHotUpgradeExposition(t *testing.T) {
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	srv, _ := testServer(t, &store)
	want := `
# HELP xlb_adopted_connection_pairs Connection pairs found in the pinned flow map when this process started (handed over, or adopted after a crash or restart); 0 for a fresh start.
# TYPE xlb_adopted_connection_pairs gauge
xlb_adopted_connection_pairs 93
# HELP xlb_config_reload_required 1 when the config file on disk is valid and differs from the loaded config; systemctl reload xlb (a hot upgrade) applies it, no connection is lost.
# TYPE xlb_config_reload_required gauge
xlb_config_reload_required 1
# HELP xlb_hot_upgrades_total Hot upgrades (SIGUSR2 hand-offs: systemctl reload xlb) by result: ok when a new process took over, failed when it did not and the old one kept serving. Counted since the pinned state was created, across hand-offs and crashes; a stop with SIGTERM removes the pins and starts the count anew.
# TYPE xlb_hot_upgrades_total counter
xlb_hot_upgrades_total{result="failed"} 92
xlb_hot_upgrades_total{result="ok"} 91
# HELP xlb_lifecycle_state Lifecycle state of the instance: 1 for the current state (starting, running, handing_over, shutting_down), 0 for the others.
# TYPE xlb_lifecycle_state gauge
xlb_lifecycle_state{state="handing_over"} 0
xlb_lifecycle_state{state="running"} 1
xlb_lifecycle_state{state="shutting_down"} 0
xlb_lifecycle_state{state="starting"} 0
`
	if err := testutil.GatherAndCompare(srv.reg, strings.NewReader(want),
		"xlb_adopted_connection_pairs", "xlb_config_reload_required", "xlb_hot_upgrades_total", "xlb_lifecycle_state"); err != nil {
		t.Error(err)
	}
}

// TestHotUpgradeSeriesAlwaysExported: both result series and the adopted
// pairs exist as soon as a snapshot is published, 0 for a fresh start and
// before the first maintenance sample, so rate() and alerts on failed see
// the series before the first hand-off.
func TestHotUpgradeSeriesAlwaysExported(t *testing.T) {
	snap := fixtureSnapshot()
	snap.Sample, snap.Counters, snap.Lifecycle = nil, nil, api.Starting
	snap.Upgrades = snapshot.Upgrades{Start: api.StartFresh}
	fams := scrapeOf(t, snap)
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"xlb_hot_upgrades_total", map[string]string{"result": api.UpgradeOK}},
		{"xlb_hot_upgrades_total", map[string]string{"result": api.UpgradeFailed}},
		{"xlb_adopted_connection_pairs", nil},
	} {
		if got := value(t, fams, c.name, c.labels); got != 0 {
			t.Errorf("%s%v = %v, want 0", c.name, c.labels, got)
		}
	}
}

// TestHandingOverLifecycle: in the old process of a hand-off only the
// handing_over series of xlb_lifecycle_state is 1, and xlb_ready stays 1
// although its maintenance loop is stopped (snapshot.Snapshot.Readiness).
func TestHandingOverLifecycle(t *testing.T) {
	snap := fixtureSnapshot()
	snap.Lifecycle = api.HandingOver
	smp := *snap.Sample
	smp.Time = fixtureNow.Add(-20 * time.Second)
	snap.Sample = &smp
	fams := scrapeOf(t, snap)
	for _, st := range api.Lifecycles() {
		want := boolValue(st == api.HandingOver)
		if got := value(t, fams, "xlb_lifecycle_state", map[string]string{"state": string(st)}); got != want {
			t.Errorf("xlb_lifecycle_state{state=%q} = %v, want %v", st, got, want)
		}
	}
	if got := value(t, fams, "xlb_ready", nil); got != 1 {
		t.Errorf("xlb_ready = %v while handing over, want 1", got)
	}
}

// scrapeOf publishes snap and scrapes it once.
func scrapeOf(t *testing.T, snap *snapshot.Snapshot) map[string]*dto.MetricFamily {
	t.Helper()
	var store snapshot.Store
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	return fams
}
