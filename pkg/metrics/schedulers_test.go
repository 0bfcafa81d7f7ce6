package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// schedulersSnapshot is servicesSnapshot with web on Maglev (client_ip,
// 16381 slots, 4 rebuilds: backend-1, the only routable backend, holds
// every slot) and api on weighted round robin before its first table;
// old stays round robin. Two routable backends of api share a name: their
// shares add up.
func schedulersSnapshot() *snapshot.Snapshot {
	s := servicesSnapshot()
	web := &s.Services[0]
	web.Scheduler = config.SchedulerMaglev
	web.Maglev = &config.Maglev{Hash: config.MaglevHashClientIP, TableSize: 16381}
	web.Schedule = dataplane.Schedule{Scheduler: dataplane.SchedulerMaglev, Hash: dataplane.MaglevHashClientIP, Len: 16381,
		Slots: map[uint32]uint32{0: 16381}, Rebuilds: 4, BuiltAt: fixtureNow.Add(-time.Minute)}
	web.Backends = append([]backend.Status{}, web.Backends...)
	web.Backends[0].Weight = 3
	api := &s.Services[1]
	api.Scheduler = config.SchedulerWeightedRoundRobin
	api.Backends = []backend.Status{
		{ID: 5, Name: "backend-1", State: backend.Routable, Discovered: true, Weight: 2},
		{ID: 7, Name: "backend-1", State: backend.Routable, Discovered: true, Weight: 2},
		{ID: 8, Name: "backend-9", State: backend.Routable, Discovered: true, Weight: 1},
		{ID: 9, Name: "backend-10", State: backend.Unreachable, Discovered: true, Weight: 5},
	}
	s.Services[2].Scheduler = config.SchedulerRoundRobin
	s.Counters.SchedFallbacks = 113
	return s
}

// TestSchedulerSeries: each service's scheduler, the table size and
// rebuilds of the table schedulers only (api's table not built yet: 0),
// each backend's weight and table share (slots over size under Maglev,
// 1/n of the routable backends without a table, summed over a name), and
// the instance-wide fallback counter.
func TestSchedulerSeries(t *testing.T) {
	var store snapshot.Store
	store.Publish(schedulersSnapshot())
	srv, _ := testServer(t, &store)
	want := `
# HELP xlb_scheduler_fallbacks_total SYNs of a weighted_round_robin or maglev service that found no usable schedule (none built yet, as right after a reload that changed the scheduler, or an entry beyond the routable set) and were given the round robin pick instead.
# TYPE xlb_scheduler_fallbacks_total counter
xlb_scheduler_fallbacks_total 113
# HELP xlb_scheduler_table_rebuilds_total Schedules built for a weighted_round_robin or maglev service since it took its id (each change of its routable backends, their names or weights builds one and swaps it in whole); kept in the schedule, so counted across hot upgrades.
# TYPE xlb_scheduler_table_rebuilds_total counter
xlb_scheduler_table_rebuilds_total{service="api"} 0
xlb_scheduler_table_rebuilds_total{service="web"} 4
# HELP xlb_scheduler_table_size Entries of the schedule of a weighted_round_robin or maglev service: the Maglev table's slots, or the weighted round robin cycle's length; 0 before the first schedule (new connections are then picked round robin: xlb_scheduler_fallbacks_total).
# TYPE xlb_scheduler_table_size gauge
xlb_scheduler_table_size{service="api"} 0
xlb_scheduler_table_size{service="web"} 16381
# HELP xlb_service_scheduler_info A metric with a constant '1' value for each service, labeled by its scheduler (round_robin, weighted_round_robin, maglev).
# TYPE xlb_service_scheduler_info gauge
xlb_service_scheduler_info{scheduler="maglev",service="web"} 1
xlb_service_scheduler_info{scheduler="round_robin",service="old"} 1
xlb_service_scheduler_info{scheduler="weighted_round_robin",service="api"} 1
`
	if err := testutil.GatherAndCompare(srv.reg, strings.NewReader(want),
		"xlb_scheduler_fallbacks_total", "xlb_scheduler_table_rebuilds_total", "xlb_scheduler_table_size", "xlb_service_scheduler_info"); err != nil {
		t.Error(err)
	}
	fams, _ := scrape(t, srv)
	type L = map[string]string
	for _, c := range []struct {
		service, backend string
		weight, share    float64
	}{
		{"web", "backend-1", 3, 1},
		{"web", "backend-2", 0, 0}, // unreachable
		{"web", "backend-3", 0, 0}, // departed
		{"web", "backend-5", 0, 0}, // unhealthy
		{"api", "backend-1", 2, 2.0 / 3},
		{"api", "backend-9", 1, 1.0 / 3},
		{"api", "backend-10", 5, 0},
		{"old", "mail-1", 0, 0},
	} {
		l := L{"service": c.service, "backend": c.backend}
		if got := value(t, fams, "xlb_backend_weight", l); got != c.weight {
			t.Errorf("xlb_backend_weight%v = %v, want %v", l, got, c.weight)
		}
		if got := value(t, fams, "xlb_backend_table_share", l); got != c.share {
			t.Errorf("xlb_backend_table_share%v = %v, want %v", l, got, c.share)
		}
	}
	if _, ok := find(fams, "xlb_scheduler_table_size", L{"service": "old"}); ok {
		t.Error("round robin service old has a table size")
	}
	problems, err := testutil.GatherAndLint(srv.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "xlb_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}
