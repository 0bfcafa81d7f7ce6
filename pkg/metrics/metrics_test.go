package metrics

import (
	"math"
	"net/netip"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// designMetrics is every metric of DESIGN §4 with its type and label names.
var designMetrics = []struct {
	name   string
	typ    dto.MetricType
	labels []string
}{
	{"xlb_build_info", dto.MetricType_GAUGE, []string{"branch", "goarch", "goos", "goversion", "revision", "tags", "version"}},
	{"xlb_connections_active", dto.MetricType_GAUGE, []string{"service"}},
	{"xlb_connections_timewait", dto.MetricType_GAUGE, []string{"service"}},
	{"xlb_connections_opened_total", dto.MetricType_COUNTER, []string{"service"}},
	{"xlb_connections_closed_total", dto.MetricType_COUNTER, []string{"initiator", "reason", "service"}},
	{"xlb_connections_orphaned_total", dto.MetricType_COUNTER, []string{"service"}},
	{"xlb_backends", dto.MetricType_GAUGE, []string{"service", "state"}},
	{"xlb_backend_connections_active", dto.MetricType_GAUGE, []string{"backend", "service"}},
	{"xlb_backend_connections_opened_total", dto.MetricType_COUNTER, []string{"backend", "service"}},
	{"xlb_backend_sent_bytes_total", dto.MetricType_COUNTER, []string{"backend", "service"}},
	{"xlb_backend_received_bytes_total", dto.MetricType_COUNTER, []string{"backend", "service"}},
	{"xlb_backend_sent_packets_total", dto.MetricType_COUNTER, []string{"backend", "service"}},
	{"xlb_backend_received_packets_total", dto.MetricType_COUNTER, []string{"backend", "service"}},
	{"xlb_flow_map_entries", dto.MetricType_GAUGE, nil},
	{"xlb_flow_map_capacity", dto.MetricType_GAUGE, nil},
	{"xlb_flow_pair_invariant_violations_total", dto.MetricType_COUNTER, nil},
	{"xlb_snat_port_exhausted_total", dto.MetricType_COUNTER, nil},
	{"xlb_xdp_attached", dto.MetricType_GAUGE, []string{"interface", "mode"}},
	{"xlb_shutdown_resets_total", dto.MetricType_COUNTER, nil},
	{"xlb_config_reload_required", dto.MetricType_GAUGE, nil},
	{"xlb_maintenance_duration_seconds", dto.MetricType_HISTOGRAM, nil},
	{"xlb_maintenance_errors_total", dto.MetricType_COUNTER, nil},
	{"xlb_maintenance_failing", dto.MetricType_GAUGE, nil},
	{"xlb_xdp_actions_total", dto.MetricType_COUNTER, []string{"action"}},
	// Operator extras (DESIGN §4, second paragraph).
	{"xlb_close_events_total", dto.MetricType_COUNTER, nil},
	{"xlb_close_events_lost_total", dto.MetricType_COUNTER, nil},
	{"xlb_maintenance_walk_passes_total", dto.MetricType_COUNTER, nil},
	{"xlb_maintenance_timewait_scheduled", dto.MetricType_GAUGE, nil},
	// Hot upgrades (DESIGN §6).
	{"xlb_hot_upgrades_total", dto.MetricType_COUNTER, []string{"result"}},
	{"xlb_adopted_connection_pairs", dto.MetricType_GAUGE, nil},
	// Capacity and hostile traffic (DESIGN §6b, issue 13).
	{"xlb_connections_embryonic_expired_total", dto.MetricType_COUNTER, []string{"service"}},
	{"xlb_rst_out_of_window_total", dto.MetricType_COUNTER, nil},
	{"xlb_rst_inexact_total", dto.MetricType_COUNTER, nil},
	{"xlb_pair_gone_in_flight_total", dto.MetricType_COUNTER, nil},
	{"xlb_snat_port_takeovers_total", dto.MetricType_COUNTER, nil},
	{"xlb_snat_timewait_reuses_total", dto.MetricType_COUNTER, nil},
	{"xlb_snat_backend_fallbacks_total", dto.MetricType_COUNTER, nil},
	{"xlb_snat_hold_drops_total", dto.MetricType_COUNTER, nil},
	{"xlb_icmp_translated_total", dto.MetricType_COUNTER, []string{"direction"}},
	{"xlb_nexthop_refreshes_total", dto.MetricType_COUNTER, nil},
	{"xlb_xdp_not_ours_total", dto.MetricType_COUNTER, nil},
	{"xlb_fragments_forwarded_total", dto.MetricType_COUNTER, nil},
	{"xlb_fragments_passed_total", dto.MetricType_COUNTER, nil},
	{"xlb_ip_options_forwarded_total", dto.MetricType_COUNTER, nil},
	{"xlb_ttl_exceeded_total", dto.MetricType_COUNTER, nil},
	{"xlb_fib_miss_total", dto.MetricType_COUNTER, nil},
	{"xlb_host_setting_repairs_total", dto.MetricType_COUNTER, []string{"setting"}},
	{"xlb_snat_retired_ports", dto.MetricType_GAUGE, nil},
	{"xlb_maintenance_embryonic_scheduled", dto.MetricType_GAUGE, nil},
	{"xlb_maintenance_hold_scheduled", dto.MetricType_GAUGE, nil},
	{"xlb_close_events_unscheduled_total", dto.MetricType_COUNTER, nil},
	// Services (DESIGN §9).
	{"xlb_service_ready", dto.MetricType_GAUGE, []string{"service"}},
	{"xlb_service_state", dto.MetricType_GAUGE, []string{"service", "state"}},
}

func TestScrapeHasEveryDesignMetric(t *testing.T) {
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	for _, want := range designMetrics {
		f, ok := fams[want.name]
		if !ok {
			t.Errorf("%s: missing", want.name)
			continue
		}
		if f.GetType() != want.typ {
			t.Errorf("%s: type %v, want %v", want.name, f.GetType(), want.typ)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s: no help text", want.name)
		}
		if len(f.GetMetric()) == 0 {
			t.Errorf("%s: no series", want.name)
		}
		for _, m := range f.GetMetric() {
			var names []string
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
			}
			sort.Strings(names)
			if !slices.Equal(names, want.labels) {
				t.Errorf("%s: labels %v, want %v", want.name, names, want.labels)
			}
		}
	}
	// Enumerated label values: every value of DESIGN §4 is present.
	for _, c := range []struct {
		name, label string
		values      []string
	}{
		{"xlb_backends", "state", []string{"discovered", "routable", "draining"}},
		{"xlb_xdp_actions_total", "action", []string{"aborted", "drop", "pass", "tx", "redirect"}},
		{"xlb_hot_upgrades_total", "result", []string{"ok", "failed"}},
		{"xlb_lifecycle_state", "state", []string{"starting", "running", "handing_over", "shutting_down"}},
		{"xlb_icmp_translated_total", "direction", []string{"to_client", "to_backend"}},
		{"xlb_host_setting_repairs_total", "setting", []string{"net.ipv4.conf.lo.forwarding", "net.ipv4.ip_local_reserved_ports"}},
	} {
		for _, v := range c.values {
			l := map[string]string{c.label: v}
			if strings.HasPrefix(c.name, "xlb_backends") {
				l["service"] = "web-lb"
			}
			if _, ok := find(fams, c.name, l); !ok {
				t.Errorf("%s{%s=%q} missing", c.name, c.label, v)
			}
		}
	}
	for _, initiator := range []string{"client", "backend"} {
		for _, reason := range []string{"fin", "rst"} {
			if _, ok := find(fams, "xlb_connections_closed_total", map[string]string{"service": "web-lb", "initiator": initiator, "reason": reason}); !ok {
				t.Errorf("xlb_connections_closed_total{initiator=%q,reason=%q} missing", initiator, reason)
			}
		}
	}
	for _, std := range []string{"go_goroutines", "process_start_time_seconds", "promhttp_metric_handler_requests_total"} {
		if _, ok := fams[std]; !ok {
			t.Errorf("standard metric %s missing", std)
		}
	}
}

func TestValuesMatchSnapshot(t *testing.T) {
	var store snapshot.Store
	snap := fixtureSnapshot()
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	x := snap.Sample
	type L = map[string]string
	check := func(name string, labels L, want float64) {
		t.Helper()
		if got := value(t, fams, name, labels); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	// From the maintenance sample.
	check("xlb_connections_active", L{"service": "web-lb"}, float64(x.Active))
	check("xlb_connections_timewait", L{"service": "web-lb"}, float64(x.TimeWait))
	check("xlb_connections_opened_total", L{"service": "web-lb"}, float64(x.Opened))
	check("xlb_connections_closed_total", L{"service": "web-lb", "initiator": "client", "reason": "fin"}, float64(x.Closed.ClientFIN))
	check("xlb_connections_closed_total", L{"service": "web-lb", "initiator": "backend", "reason": "fin"}, float64(x.Closed.BackendFIN))
	check("xlb_connections_closed_total", L{"service": "web-lb", "initiator": "client", "reason": "rst"}, float64(x.Closed.ClientRST))
	check("xlb_connections_closed_total", L{"service": "web-lb", "initiator": "backend", "reason": "rst"}, float64(x.Closed.BackendRST))
	check("xlb_connections_orphaned_total", L{"service": "web-lb"}, float64(x.Orphaned))
	check("xlb_connections_embryonic_expired_total", L{"service": "web-lb"}, float64(x.EmbryonicExpired))
	check("xlb_flow_map_entries", nil, float64(x.FlowEntries))
	check("xlb_flow_map_capacity", nil, float64(x.FlowCapacity))
	check("xlb_maintenance_sample_age_seconds", nil, 2)
	check("xlb_maintenance_cycles_total", nil, float64(x.Cycle))
	check("xlb_maintenance_errors_total", nil, float64(x.Maintenance.Errors))
	check("xlb_maintenance_failing", nil, 0)
	check("xlb_close_events_total", nil, float64(x.CloseEvents.Read))
	check("xlb_close_events_lost_total", nil, float64(x.CloseEvents.Lost))
	check("xlb_maintenance_walk_passes_total", nil, float64(x.Walk.Passes))
	check("xlb_maintenance_timewait_scheduled", nil, float64(x.CloseEvents.TimeWaitScheduled))
	check("xlb_maintenance_embryonic_scheduled", nil, float64(x.CloseEvents.EmbryonicScheduled))
	check("xlb_maintenance_hold_scheduled", nil, float64(x.CloseEvents.HoldScheduled))
	check("xlb_maintenance_udp_scheduled", nil, float64(x.CloseEvents.UDPScheduled))
	check("xlb_close_events_unscheduled_total", nil, float64(x.CloseEvents.Unscheduled))
	// Backends: four listed (backend-4 departed and idle is not).
	check("xlb_backends", L{"service": "web-lb", "state": "discovered"}, 3)
	check("xlb_backends", L{"service": "web-lb", "state": "routable"}, 1)
	check("xlb_backends", L{"service": "web-lb", "state": "unhealthy"}, 1)
	check("xlb_backends", L{"service": "web-lb", "state": "draining"}, 1)
	for i, name := range []string{"backend-1", "backend-2", "backend-3"} {
		bs := x.Backends[i]
		b := L{"service": "web-lb", "backend": name}
		check("xlb_backend_connections_active", b, float64(bs.Active))
		check("xlb_backend_connections_timewait", b, float64(bs.TimeWait))
		check("xlb_backend_connections_opened_total", b, float64(bs.Stats.Opened))
		check("xlb_backend_sent_bytes_total", b, float64(bs.Stats.SentBytes))
		check("xlb_backend_received_bytes_total", b, float64(bs.Stats.ReceivedBytes))
		check("xlb_backend_sent_packets_total", b, float64(bs.Stats.SentPackets))
		check("xlb_backend_received_packets_total", b, float64(bs.Stats.ReceivedPackets))
		state, _ := snap.BackendState(snap.Backends[i])
		for _, st := range []string{"routable", "unhealthy", "draining", "unreachable"} {
			check("xlb_backend_state", L{"service": "web-lb", "backend": name, "state": st}, boolValue(st == string(state)))
		}
	}
	check("xlb_backend_state", L{"service": "web-lb", "backend": "backend-5", "state": "unhealthy"}, 1)
	// TCP timestamps: one series per state, 1 for the backend's.
	for name, want := range map[string]string{"backend-1": "yes", "backend-2": "no", "backend-3": "unknown"} {
		for _, st := range []string{"yes", "no", "unknown"} {
			check("xlb_backend_tcp_timestamps", L{"service": "web-lb", "backend": name, "state": st}, boolValue(st == want))
		}
	}
	// Health checks: the backends that have them, by result.
	check("xlb_backend_health_checks_total", L{"service": "web-lb", "backend": "backend-1", "result": "ok"}, 40)
	check("xlb_backend_health_checks_total", L{"service": "web-lb", "backend": "backend-1", "result": "fail"}, 1)
	check("xlb_backend_health_checks_total", L{"service": "web-lb", "backend": "backend-5", "result": "ok"}, 7)
	check("xlb_backend_health_checks_total", L{"service": "web-lb", "backend": "backend-5", "result": "fail"}, 3)
	if _, ok := find(fams, "xlb_backend_health_checks_total", L{"service": "web-lb", "backend": "backend-2", "result": "ok"}); ok {
		t.Errorf("backend-2 (no health checks) exports xlb_backend_health_checks_total")
	}
	if _, ok := find(fams, "xlb_backend_connections_active", L{"service": "web-lb", "backend": "backend-4"}); ok {
		t.Errorf("backend-4 (departed, no pairs) is exported")
	}
	// From the latest counter read (Snapshot.Counters), not the sample's copy.
	for i, a := range xdpActions {
		check("xlb_xdp_actions_total", L{"action": a}, float64(liveCounters.Actions[i]))
	}
	check("xlb_snat_port_exhausted_total", nil, float64(liveCounters.SNATExhausted))
	check("xlb_shutdown_resets_total", nil, float64(liveCounters.ShutdownResets))
	check("xlb_flow_table_full_total", nil, float64(liveCounters.TableFull))
	check("xlb_no_backend_resets_total", nil, float64(liveCounters.NoBackend))
	check("xlb_fib_miss_total", nil, float64(liveCounters.FIBMiss))
	check("xlb_ttl_exceeded_total", nil, float64(liveCounters.TTLExceeded))
	check("xlb_syn_retransmits_total", nil, float64(liveCounters.SYNReused))
	check("xlb_flow_pairs_replaced_total", nil, float64(liveCounters.PairsReplaced))
	check("xlb_rst_out_of_window_total", nil, float64(liveCounters.RSTOutOfWindow))
	check("xlb_rst_inexact_total", nil, float64(liveCounters.RSTInexact))
	check("xlb_pair_gone_in_flight_total", nil, float64(liveCounters.PairGoneInFlight))
	check("xlb_snat_port_takeovers_total", nil, float64(liveCounters.SNATTakeovers))
	check("xlb_snat_timewait_reuses_total", nil, float64(liveCounters.SNATTimewaitReuses))
	check("xlb_snat_backend_fallbacks_total", nil, float64(liveCounters.SNATFallbacks))
	check("xlb_snat_hold_drops_total", nil, float64(liveCounters.HoldDrops))
	check("xlb_icmp_translated_total", L{"direction": "to_client"}, float64(liveCounters.ICMPToClient))
	check("xlb_icmp_translated_total", L{"direction": "to_backend"}, float64(liveCounters.ICMPToBackend))
	check("xlb_nexthop_refreshes_total", nil, float64(liveCounters.NextHopRefreshes))
	check("xlb_xdp_not_ours_total", nil, float64(liveCounters.NotOurs))
	check("xlb_fragments_forwarded_total", nil, float64(liveCounters.FragsForwarded))
	check("xlb_fragments_passed_total", nil, float64(liveCounters.FragsPassed))
	check("xlb_ip_options_forwarded_total", nil, float64(liveCounters.IPOptionsForwarded))
	check("xlb_flow_pair_invariant_violations_total", nil, float64(liveCounters.InvariantViolations+x.InvariantRepairs))
	check("xlb_scrape_collector_success", L{"collector": "dataplane"}, 1)
	// Instance.
	check("xlb_build_info", L{"version": buildinfo.Version, "revision": buildinfo.Revision, "branch": buildinfo.Branch,
		"goversion": runtime.Version(), "goos": runtime.GOOS, "goarch": runtime.GOARCH, "tags": buildinfo.Tags()}, 1)
	check("xlb_service_info", L{"name": "web-lb"}, 1)
	check("xlb_xdp_attached", L{"interface": "eth0", "mode": "native"}, 1)
	check("xlb_xdp_attached", L{"interface": "eth1", "mode": "generic"}, 1)
	check("xlb_config_reload_required", nil, 1)
	check("xlb_config_file_invalid", nil, 0)
	check("xlb_config_file_missing", nil, 0)
	check("xlb_ready", nil, 1)
	check("xlb_lifecycle_state", L{"state": "running"}, 1)
	check("xlb_lifecycle_state", L{"state": "starting"}, 0)
	check("xlb_lifecycle_state", L{"state": "handing_over"}, 0)
	check("xlb_lifecycle_state", L{"state": "shutting_down"}, 0)
	// Drain and the BGP speaker (snapshot.Drained, snapshot.BGP).
	check("xlb_drained", nil, 0)
	check("xlb_backend_provider_stale", L{"service": "web-lb"}, 0)
	check("xlb_bgp_peer_up", L{"peer": "203.0.113.1"}, 1)
	check("xlb_bgp_peer_up", L{"peer": "203.0.113.2"}, 0)
	check("xlb_bgp_announced_routes", nil, 1)
	// Hot upgrades (snapshot.Upgrades).
	check("xlb_hot_upgrades_total", L{"result": "ok"}, float64(snap.Upgrades.OK))
	check("xlb_hot_upgrades_total", L{"result": "failed"}, float64(snap.Upgrades.Failed))
	check("xlb_adopted_connection_pairs", nil, float64(snap.Upgrades.AdoptedPairs))
	// Host settings guard (snapshot.HostSettings).
	check("xlb_host_setting_repairs_total", L{"setting": "net.ipv4.conf.lo.forwarding"}, 94)
	check("xlb_host_setting_repairs_total", L{"setting": "net.ipv4.ip_local_reserved_ports"}, 95)
	// Retired SNAT ranges (snapshot.RetiredSNAT): their ports.
	check("xlb_snat_retired_ports", nil, 96+1+1)
}

// TestExpositionText pins the exact text of a few families, help included.
func TestExpositionText(t *testing.T) {
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	srv, _ := testServer(t, &store)
	want := `
# HELP xlb_backends Backends of the service by state: discovered (currently listed by the provider), routable (discovered and eligible for new connections), unhealthy (discovered but failing its active health checks: no new connections, its connections untouched), draining (no longer routable but still owning connection pairs), unreachable (discovered but without a route or neighbour: no new connections). A backend can count in more than one state.
# TYPE xlb_backends gauge
xlb_backends{service="web-lb",state="discovered"} 3
xlb_backends{service="web-lb",state="draining"} 1
xlb_backends{service="web-lb",state="routable"} 1
xlb_backends{service="web-lb",state="unhealthy"} 1
xlb_backends{service="web-lb",state="unreachable"} 1
# HELP xlb_connections_closed_total Connections of the service closed, counted once by the data path at the packet that makes the pair terminal (the second FIN or a RST), by who closed first (client or backend) and how (fin or rst), as of the latest maintenance cycle. Orphan removals are not included.
# TYPE xlb_connections_closed_total counter
xlb_connections_closed_total{initiator="backend",reason="fin",service="web-lb"} 15
xlb_connections_closed_total{initiator="backend",reason="rst",service="web-lb"} 17
xlb_connections_closed_total{initiator="client",reason="fin",service="web-lb"} 14
xlb_connections_closed_total{initiator="client",reason="rst",service="web-lb"} 16
# HELP xlb_close_events_lost_total Close events that never reached the maintenance loop: the ring buffer was full (counted since the flow map was created) or a per-CPU queue slot was overwritten before it was read (since this process started its maintenance loop). The walk removes those pairs instead, at most one pass late.
# TYPE xlb_close_events_lost_total counter
xlb_close_events_lost_total 23
# HELP xlb_close_events_total Close events (one per pair that became terminal) the maintenance loop read from the data path since this process started its maintenance loop, as of the latest maintenance cycle. The status API's maintenance.close_events.path says whether they come through the ring buffer or the per-CPU queues.
# TYPE xlb_close_events_total counter
xlb_close_events_total 22
# HELP xlb_maintenance_timewait_scheduled Pairs the maintenance loop holds for removal at the end of their 60 s time-wait (from their close events), as of the latest maintenance cycle. Differs from xlb_connections_timewait by pairs whose close event was lost (the walk removes them) and pairs a new SYN replaced (still scheduled).
# TYPE xlb_maintenance_timewait_scheduled gauge
xlb_maintenance_timewait_scheduled 24
# HELP xlb_maintenance_walk_passes_total Complete passes of the maintenance loop's incremental walk over the flow map since this process started its maintenance loop; a pass visits every entry and takes at most orphan_ttl_secs/10 seconds.
# TYPE xlb_maintenance_walk_passes_total counter
xlb_maintenance_walk_passes_total 25
`
	if err := testutil.GatherAndCompare(srv.reg, strings.NewReader(want), "xlb_backends", "xlb_connections_closed_total",
		"xlb_close_events_lost_total", "xlb_close_events_total", "xlb_maintenance_timewait_scheduled", "xlb_maintenance_walk_passes_total"); err != nil {
		t.Error(err)
	}
}

// TestMaintenanceFailing: while the latest cycle failed, the errors
// counter and the failing gauge say so, the pair series repeat the carried
// figures, and the instance stays ready (its sample is fresh).
func TestMaintenanceFailing(t *testing.T) {
	var store snapshot.Store
	snap := fixtureSnapshot()
	smp := *snap.Sample
	smp.Maintenance = maintenance.Maintenance{
		Errors: 23, ConsecutiveFailures: 2, FailingSince: smp.Time.Add(-time.Second),
		LastError: "maintenance: walk: dataplane: batch read flows: operation not permitted",
	}
	snap.Sample = &smp
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	want := `
# HELP xlb_maintenance_errors_total Failed maintenance cycles (clock, close event, flow map or counter read, or reaper run refused) since this process started its maintenance loop. The data path keeps forwarding; pairs are not cleaned up until a cycle succeeds.
# TYPE xlb_maintenance_errors_total counter
xlb_maintenance_errors_total 23
# HELP xlb_maintenance_failing 1 while the latest maintenance cycle failed (connection and flow map series then repeat the latest successful cycle's figures; the error is in the status API's maintenance.last_error), 0 otherwise.
# TYPE xlb_maintenance_failing gauge
xlb_maintenance_failing 1
# HELP xlb_maintenance_cycles_total Successful maintenance cycles since this process started its maintenance loop.
# TYPE xlb_maintenance_cycles_total counter
xlb_maintenance_cycles_total 42
# HELP xlb_ready 1 when /readyz answers 200 (every service is ready), 0 otherwise (the reason is in /readyz and the status API).
# TYPE xlb_ready gauge
xlb_ready 1
# HELP xlb_connections_active Connections of the service open or half-closed (neither both FINs nor a RST seen yet), as of the latest maintenance cycle.
# TYPE xlb_connections_active gauge
xlb_connections_active{service="web-lb"} 7
`
	if err := testutil.GatherAndCompare(srv.reg, strings.NewReader(want),
		"xlb_maintenance_errors_total", "xlb_maintenance_failing", "xlb_maintenance_cycles_total", "xlb_ready", "xlb_connections_active"); err != nil {
		t.Error(err)
	}

	// Before the first sample the maintenance series are absent, not 0.
	var empty snapshot.Store
	noSample := fixtureSnapshot()
	noSample.Sample = nil
	empty.Publish(noSample)
	srv, _ = testServer(t, &empty)
	fams, _ := scrape(t, srv)
	for _, name := range []string{"xlb_maintenance_errors_total", "xlb_maintenance_failing",
		"xlb_close_events_total", "xlb_close_events_lost_total", "xlb_maintenance_walk_passes_total", "xlb_maintenance_timewait_scheduled",
		"xlb_maintenance_embryonic_scheduled", "xlb_maintenance_hold_scheduled", "xlb_close_events_unscheduled_total", "xlb_connections_embryonic_expired_total"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s exported before the first sample", name)
		}
	}
}

func TestNoLabelValueIsAnAddress(t *testing.T) {
	var store snapshot.Store
	snap := fixtureSnapshot()
	snap.AddSample(snap.Sample)
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	addrs := []string{snap.Listen.String()}
	for _, a := range snap.SNAT {
		addrs = append(addrs, a.String())
	}
	for _, b := range snap.Backends {
		addrs = append(addrs, b.IP.String())
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				if name == "xlb_bgp_peer_up" && l.GetName() == "peer" {
					continue // a configured BGP peer, the operator's own router (DESIGN §6a), never a client
				}
				if _, err := netip.ParseAddr(v); err == nil {
					t.Errorf("%s{%s=%q}: label value is an IP address", name, l.GetName(), v)
				}
				if _, err := netip.ParseAddrPort(v); err == nil {
					t.Errorf("%s{%s=%q}: label value is an address:port", name, l.GetName(), v)
				}
				for _, a := range addrs {
					if strings.Contains(v, a) {
						t.Errorf("%s{%s=%q}: label value contains %s", name, l.GetName(), v, a)
					}
				}
			}
		}
	}
}

// TestMaintenanceHistogram: the histogram is the snapshot's, which counts
// successful cycles only (Snapshot.AddSample).
func TestMaintenanceHistogram(t *testing.T) {
	var store snapshot.Store
	snap := fixtureSnapshot()
	ok := *snap.Sample
	failed := ok
	failed.Maintenance = maintenance.Maintenance{Errors: 22, ConsecutiveFailures: 1, FailingSince: ok.Time, LastError: "maintenance: read clock: EPERM"}
	for _, d := range []struct {
		smp maintenance.Sample
		dur time.Duration
	}{{ok, 3 * time.Millisecond}, {failed, 7 * time.Second}, {ok, 20 * time.Millisecond}} {
		smp := d.smp
		smp.Duration = d.dur
		snap.AddSample(&smp)
	}
	store.Publish(snap)
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	f := fams["xlb_maintenance_duration_seconds"]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.GetMetric()) != 1 {
		t.Fatalf("xlb_maintenance_duration_seconds: %v", f)
	}
	h := f.GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 2 {
		t.Errorf("count %d, want 2", h.GetSampleCount())
	}
	if math.Abs(h.GetSampleSum()-0.023) > 1e-9 {
		t.Errorf("sum %v, want 0.023", h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		var want uint64
		switch {
		case b.GetUpperBound() >= 0.02:
			want = 2
		case b.GetUpperBound() >= 0.003:
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

func TestLint(t *testing.T) {
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	srv, _ := testServer(t, &store)
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

// TestExpositionTextIssue13 pins the families added for capacity and
// hostile traffic whose labels or help carry meaning: the ICMP directions,
// the guarded host settings and the TTL drop (no longer a pass to the
// stack).
func TestExpositionTextIssue13(t *testing.T) {
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	srv, _ := testServer(t, &store)
	want := `
# HELP xlb_host_setting_repairs_total Resets of a host setting XLB needs (net.ipv4.conf.lo.forwarding, net.ipv4.ip_local_reserved_ports) that the instance found and put back (checked once a second; each repair is logged as one warning), since the instance started.
# TYPE xlb_host_setting_repairs_total counter
xlb_host_setting_repairs_total{setting="net.ipv4.conf.lo.forwarding"} 94
xlb_host_setting_repairs_total{setting="net.ipv4.ip_local_reserved_ports"} 95
# HELP xlb_icmp_translated_total ICMP errors (destination unreachable, fragmentation needed included, and time exceeded) about a connection pair that the data path translated and sent on, by direction: to_client (from the backend's side toward the client) or to_backend.
# TYPE xlb_icmp_translated_total counter
xlb_icmp_translated_total{direction="to_backend"} 89
xlb_icmp_translated_total{direction="to_client"} 88
# HELP xlb_ttl_exceeded_total Balanced packets dropped because their TTL was 1 or less (they would expire when forwarded); such a SYN never creates a pair.
# TYPE xlb_ttl_exceeded_total counter
xlb_ttl_exceeded_total 83
`
	if err := testutil.GatherAndCompare(srv.reg, strings.NewReader(want),
		"xlb_host_setting_repairs_total", "xlb_icmp_translated_total", "xlb_ttl_exceeded_total"); err != nil {
		t.Error(err)
	}
}
