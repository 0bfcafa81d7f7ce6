package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

var update = flag.Bool("update", false, "rewrite testdata/document.json")

func i64(v int64) *int64 { return &v }

// TestDocumentValues builds the document of the fixture and compares it
// field by field with the values the fixture implies.
func TestDocumentValues(t *testing.T) {
	got := Build(fixture(), fixedNow)
	want := api.Document{
		SchemaVersion:     2,
		Name:              "web-lb",
		Version:           "v0.4.0",
		Revision:          "3f2c9e1a7b",
		Lifecycle:         "running",
		GeneratedAtUnixMs: fixedNow.UnixMilli(),
		StartedAtUnixMs:   fixedNow.UnixMilli() - 7_985_300,
		UptimeSeconds:     7985,
		Readiness:         api.Readiness{Ready: true, Reason: ""},
		Shutdown:          nil,
		Dataplane: api.Dataplane{
			XDPMode:    "auto",
			Interfaces: []string{"eth0", "eth1"},
			XDPAttachments: []api.XDPAttachment{
				{Interface: "eth0", Ifindex: 2, Mode: "native", Via: "netlink"},
				{Interface: "eth1", Ifindex: 3, Mode: "generic", Via: "netlink"},
			},
			Features: []api.Feature{
				{Name: "bpf_for_each_map_elem", State: "available", Path: "not_used"},
				{Name: "ring_buffer", State: "disabled", Detail: "disabled by the operator", Path: "per_cpu_queue"},
				{Name: "batch_map_ops", State: "available", Path: "batch_lookup"},
				{Name: "xdp_bpf_link", State: "refused", Detail: "operation not permitted", Path: "netlink"},
			},
			FlowMap:          api.FlowMap{Entries: 60, Capacity: 524288},
			SampledAtUnixMs:  i64(fixedNow.UnixMilli() - 400),
			SampleAgeMs:      i64(400),
			SampleCycle:      7995,
			SampleDurationMs: 1.25,
			SampleIntervalMs: 1000,
			StaleAfterMs:     5000,
			Counters: api.Counters{
				XDPActions:             api.XDPActions{Aborted: 0, Drop: 12, Pass: 3456, TX: 98765, Redirect: 4321},
				SNATPortExhaustedTotal: 2, TableFullTotal: 1, NoBackendTotal: 5, FIBMissTotal: 4,
				SYNReusedTotal: 17, PairsReplacedTotal: 6, InvariantViolationsTotal: 1,
				ShutdownResetsTotal: 0, TTLExceededTotal: 9,
				RSTOutOfWindowTotal: 21, SNATTakeoversTotal: 22, SNATTimewaitReusesTotal: 31, SNATFallbacksTotal: 23, HoldDropsTotal: 24,
				ICMPToClientTotal: 25, ICMPToBackendTotal: 26, NextHopRefreshesTotal: 27, NotOursTotal: 28,
				FragmentsForwardedTotal: 29, FragmentsPassedTotal: 30, IPOptionsForwardedTotal: 31, RSTInexactTotal: 32,
				PairGoneInFlightTotal: 33,
			},
		},
		Maintenance: api.Maintenance{
			ErrorsTotal: 2,
			CloseEvents: api.CloseEvents{Path: "per_cpu_queue", ReadTotal: 1201, LostTotal: 3, TimeWaitScheduled: 2,
				EmbryonicScheduled: 4, HoldScheduled: 1, UnscheduledTotal: 7},
			Walk: api.Walk{PassesTotal: 7993, Visited: 0, LastPassEntries: 58, LastPassCycles: 1, PassCycles: 30},
		},
		Listen: api.Listen{IP: "192.0.2.10", Ports: []api.PortMap{{LocalPort: 80, RemotePort: 8080}, {LocalPort: 443, RemotePort: 8443}}},
		SNAT: api.SNAT{IP: "198.51.100.1", IPs: []string{"198.51.100.1", "198.51.100.2"},
			Retired: []api.RetiredSNAT{{IP: "198.51.100.1", PortRange: "40012-47730"}, {IP: "198.51.100.3", PortRange: "40003-40003"}}},
		Connections: api.Connections{
			Active: 27, TimeWait: 2, Resetting: 1, OpenedTotal: 1234, ClosedTotal: 1204,
			ClosedBy:      api.ClosedBy{ClientFIN: 1000, BackendFIN: 150, ClientRST: 40, BackendRST: 14},
			OrphanedTotal: 3, EmbryonicExpiredTotal: 11, InvariantRepairsTotal: 1, LoneEntries: 0,
		},
		Provider: api.Provider{Name: "static", Healthy: true, Error: "", Synced: true},
		Backends: []api.Backend{
			{ID: 1, Name: "backend-1", IP: "198.51.100.11", State: "routable", AvailableForNewConnections: true, Weight: 1, TableShare: 1.0 / 3,
				ActiveConnections: 10, TimeWaitConnections: 1, OpenedTotal: 420,
				SentBytesTotal: 1288490, ReceivedBytesTotal: 36700160, SentPacketsTotal: 2100, ReceivedPacketsTotal: 26000, Timestamps: "yes"},
			{ID: 2, Name: "backend-2", IP: "198.51.100.12", State: "routable", AvailableForNewConnections: true, Weight: 1, TableShare: 1.0 / 3,
				ActiveConnections: 9, OpenedTotal: 410,
				SentBytesTotal: 1153433, ReceivedBytesTotal: 33554432, SentPacketsTotal: 2000, ReceivedPacketsTotal: 24000, Timestamps: "no"},
			{ID: 3, Name: "backend-3", IP: "198.51.100.13", State: "routable", AvailableForNewConnections: true, Weight: 1, TableShare: 1.0 / 3,
				ActiveConnections: 6, TimeWaitConnections: 1, OpenedTotal: 380,
				SentBytesTotal: 987654, ReceivedBytesTotal: 31457280, SentPacketsTotal: 1900, ReceivedPacketsTotal: 23000, Timestamps: "unknown"},
			{ID: 4, Name: "backend-old", IP: "198.51.100.14", State: "draining", Weight: 1,
				ActiveConnections: 2, OpenedTotal: 24,
				SentBytesTotal: 40960, ReceivedBytesTotal: 2097152, SentPacketsTotal: 90, ReceivedPacketsTotal: 700, Timestamps: "unknown"},
			{ID: 5, Name: "backend-5", IP: "198.51.100.15", State: "unreachable", Weight: 1, Reason: "no route to 198.51.100.15", Timestamps: "unknown"},
			{ID: 7, Name: "backend-sick", IP: "198.51.100.17", Port: 8443, State: "unhealthy", Weight: 1, Reason: "health check failing: connect: connection refused",
				Health: &api.BackendHealth{LastResult: "fail", LastCheckUnixMs: 1_773_489_599_250, LastCheckMs: 2,
					LastError: "connect: connection refused", ChecksOKTotal: 12, ChecksFailedTotal: 3}, Timestamps: "unknown"},
		},
		Config: api.Config{Path: "/etc/xlb/xlb.yaml", ReloadRequired: true, ChangedKeys: []string{"ports", "provider"}},
		Upgrades: api.Upgrades{
			Start: "handed_over", AdoptedPairs: 29, OK: 3, Failed: 1,
			LastFailure: "new process exited with status 1: config: xlb.yaml:4: unknown field \"prots\"",
		},
		BGP: &api.BGP{
			Peers: []api.BGPPeer{
				{Address: "203.0.113.1", ASN: 64513, State: "established", UptimeSeconds: 90},
				{Address: "203.0.113.2", ASN: 64513, State: "active"},
			},
			Announced: []string{"192.0.2.10/32"},
		},
		HostSettings: []api.HostSetting{
			{Name: "net.ipv4.conf.lo.forwarding", RepairsTotal: 2},
			{Name: "net.ipv4.ip_local_reserved_ports", RepairsTotal: 0},
		},
	}
	// The one service repeats schema 1's fields; its connections are the
	// instance's, less the instance-only figures.
	want.Services = []api.Service{{
		Name: "web-lb", State: "serving", Listen: want.Listen, Proto: "tcp", Scheduler: "round_robin",
		Readiness: want.Readiness, Provider: want.Provider, Backends: want.Backends,
		Connections: api.ServiceConnections{Active: 27, TimeWait: 2, OpenedTotal: 1234, ClosedTotal: 1204,
			ClosedBy:      api.ClosedBy{ClientFIN: 1000, BackendFIN: 150, ClientRST: 40, BackendRST: 14},
			OrphanedTotal: 3, EmbryonicExpiredTotal: 11},
	}}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("document differs\n got: %s\nwant: %s", g, w)
	}
	// The per-backend shares add up to the totals (the fixture is consistent).
	var active, opened uint64
	for _, b := range got.Backends {
		active += b.ActiveConnections
		opened += b.OpenedTotal
	}
	if active != got.Connections.Active || opened != got.Connections.OpenedTotal {
		t.Errorf("backend sums active %d opened %d, totals %d %d", active, opened, got.Connections.Active, got.Connections.OpenedTotal)
	}
}

// TestDocumentMaintenance: a failing maintenance loop shows in the
// maintenance object while the document stays ready (the sample is fresh);
// the JSON carries every field, failing_since_unix_ms null unless failing.
func TestDocumentMaintenance(t *testing.T) {
	since := fixedNow.Add(-3400 * time.Millisecond)
	failing := clone(func(s *snapshot.Snapshot) {
		smp := *s.Sample
		smp.Maintenance = maintenance.Maintenance{
			Errors: 9, ConsecutiveFailures: 4, FailingSince: since,
			LastError: "maintenance: walk: dataplane: batch read flows: operation not permitted",
		}
		s.Sample = &smp
	})
	d := Build(failing, fixedNow)
	healthy := Build(fixture(), fixedNow).Maintenance
	want := api.Maintenance{
		Failing: true, ErrorsTotal: 9, ConsecutiveFailures: 4,
		FailingSinceUnixMs: i64(since.UnixMilli()), LastError: "maintenance: walk: dataplane: batch read flows: operation not permitted",
		// The sample carries the latest successful cycle's close events and walk.
		CloseEvents: healthy.CloseEvents, Walk: healthy.Walk,
	}
	if !reflect.DeepEqual(d.Maintenance, want) {
		t.Errorf("maintenance = %+v, want %+v", d.Maintenance, want)
	}
	if !d.Readiness.Ready {
		t.Errorf("readiness %+v while maintenance fails with a fresh sample, want ready", d.Readiness)
	}

	for _, c := range []struct {
		name string
		snap *snapshot.Snapshot
		want map[string]any
	}{
		{"failing", failing, map[string]any{
			"maintenance.failing": true, "maintenance.errors_total": float64(9), "maintenance.consecutive_failures": float64(4),
			"maintenance.failing_since_unix_ms": float64(since.UnixMilli()), "maintenance.last_error": "maintenance: walk: dataplane: batch read flows: operation not permitted",
		}},
		{"healthy", fixture(), map[string]any{
			"maintenance.failing": false, "maintenance.errors_total": float64(2), "maintenance.consecutive_failures": float64(0),
			"maintenance.failing_since_unix_ms": nil, "maintenance.last_error": "",
			"maintenance.close_events.path": "per_cpu_queue", "maintenance.close_events.read_total": float64(1201),
			"maintenance.close_events.lost_total": float64(3), "maintenance.close_events.timewait_scheduled": float64(2),
			"maintenance.walk.passes_total": float64(7993), "maintenance.walk.visited": float64(0),
			"maintenance.walk.last_pass_entries": float64(58), "maintenance.walk.last_pass_cycles": float64(1),
			"maintenance.walk.pass_cycles": float64(30),
		}},
		{"no sample", clone(func(s *snapshot.Snapshot) { s.Sample = nil }), map[string]any{
			"maintenance.failing": false, "maintenance.errors_total": float64(0), "maintenance.consecutive_failures": float64(0),
			"maintenance.failing_since_unix_ms": nil, "maintenance.last_error": "",
			"maintenance.close_events.path": "", "maintenance.close_events.lost_total": float64(0),
			"maintenance.walk.passes_total": float64(0),
		}},
	} {
		wantServed(t, c.name, c.snap, c.want)
	}
}

// TestDocumentCountersAsLastRead: the counters are the snapshot's latest
// read (Snapshot.Counters, what the metrics export), which the daemon
// refreshes each second of the shutdown window while no cycle runs, not
// the sample's copy; a failed read keeps the last values.
func TestDocumentCountersAsLastRead(t *testing.T) {
	snap := clone(func(s *snapshot.Snapshot) {
		s.Lifecycle = api.ShuttingDown
		c := s.Sample.Counters
		c.ShutdownResets = 42
		s.SetCounters(c, nil)
	})
	if got := Build(snap, fixedNow).Dataplane.Counters.ShutdownResetsTotal; got != 42 {
		t.Errorf("shutdown_resets_total = %d, want 42 (the latest read)", got)
	}
	snap.SetCounters(dataplane.Counters{}, errors.New("map gone"))
	if got := Build(snap, fixedNow).Dataplane.Counters.ShutdownResetsTotal; got != 42 {
		t.Errorf("after a failed read shutdown_resets_total = %d, want 42 (kept)", got)
	}
	if got := Build(clone(func(s *snapshot.Snapshot) { s.Counters = nil }), fixedNow).Dataplane.Counters; got != (api.Counters{}) {
		t.Errorf("no counters read yet: %+v, want zeros", got)
	}
}

// designFields are the JSON paths DESIGN §3 requires ("[]" descends into
// the first element of a list).
var designFields = []string{
	"schema_version", "name", "version", "lifecycle", "uptime_seconds",
	"readiness.ready", "readiness.reason",
	"dataplane.xdp_attachments.[].interface", "dataplane.xdp_attachments.[].mode",
	"dataplane.flow_map.entries", "dataplane.flow_map.capacity",
	"dataplane.sampled_at_unix_ms", "dataplane.sample_age_ms",
	"listen.ip", "listen.ports.[].local_port", "listen.ports.[].remote_port",
	"connections.active", "connections.timewait", "connections.opened_total",
	"connections.closed_total", "connections.orphaned_total",
	"backends.[].name", "backends.[].ip", "backends.[].state",
	"backends.[].available_for_new_connections", "backends.[].active_connections",
	"backends.[].opened_total", "backends.[].sent_bytes_total", "backends.[].received_bytes_total",
	"config.path", "config.reload_required", "config.changed_keys",
	"dataplane.features.[].name", "dataplane.features.[].state", "dataplane.features.[].detail", "dataplane.features.[].path",
	"maintenance.failing", "maintenance.errors_total", "maintenance.consecutive_failures",
	"maintenance.failing_since_unix_ms", "maintenance.last_error",
	"maintenance.close_events.path", "maintenance.close_events.read_total",
	"maintenance.close_events.lost_total", "maintenance.close_events.timewait_scheduled",
	"maintenance.walk.passes_total", "maintenance.walk.visited", "maintenance.walk.last_pass_entries",
	"maintenance.walk.last_pass_cycles", "maintenance.walk.pass_cycles",
	"upgrades.start", "upgrades.adopted_pairs", "upgrades.ok", "upgrades.failed", "upgrades.last_failure",
	"snat.ip", "snat.ips", "snat.retired.[].ip", "snat.retired.[].port_range", "connections.embryonic_expired_total",
	"maintenance.close_events.embryonic_scheduled", "maintenance.close_events.hold_scheduled",
	"maintenance.close_events.unscheduled_total",
	"host_settings.[].name", "host_settings.[].repairs_total",
	// DESIGN §9 (schema version 2).
	"services.[].id", "services.[].name", "services.[].state", "services.[].listen.ip",
	"services.[].listen.ports.[].local_port", "services.[].listen.ports.[].remote_port",
	"services.[].proto", "services.[].scheduler", "services.[].readiness.ready", "services.[].readiness.reason",
	"services.[].connections.active", "services.[].connections.timewait", "services.[].connections.opened_total",
	"services.[].connections.closed_total", "services.[].connections.closed_by.client_fin",
	"services.[].connections.orphaned_total", "services.[].connections.embryonic_expired_total",
	"services.[].provider.name", "services.[].provider.healthy", "services.[].backends.[].name",
	"services.[].backends.[].state", "services.[].backends.[].active_connections",
	// Issue 30 (schedulers).
	"backends.[].weight", "backends.[].table_share",
	"services.[].backends.[].weight", "services.[].backends.[].table_share",
}

func lookup(v any, path string) (any, bool) {
	for _, p := range strings.Split(path, ".") {
		if p == "[]" {
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return nil, false
			}
			v = l[0]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// TestDocumentFieldsPresent checks the served JSON (not the Go struct)
// carries every DESIGN §3 field, the headers, and the null/0 convention
// before the first sample.
func TestDocumentFieldsPresent(t *testing.T) {
	ts := newTestServer(t, fixture(), "", "")
	r := do(t, ts, "GET", "/api/v1/status")
	if r.code != 200 {
		t.Fatalf("status %d", r.code)
	}
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", got)
	}
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	var v any
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatal(err)
	}
	for _, f := range designFields {
		if _, ok := lookup(v, f); !ok {
			t.Errorf("field %s missing", f)
		}
	}
	if sv, _ := lookup(v, "schema_version"); sv != float64(2) {
		t.Errorf("schema_version = %v", sv)
	}

	// Before the first sample: counts 0, sample times null, lists [].
	ts = newTestServer(t, clone(func(s *snapshot.Snapshot) { s.Sample = nil; s.Config.ChangedKeys = nil }), "", "")
	v = nil
	if err := json.Unmarshal([]byte(do(t, ts, "GET", "/api/v1/status").body), &v); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"dataplane.sampled_at_unix_ms": nil, "dataplane.sample_age_ms": nil,
		"dataplane.flow_map.entries": float64(0), "connections.active": float64(0),
		"connections.opened_total": float64(0), "config.changed_keys": []any{},
		"backends.[].active_connections": float64(0),
	} {
		if got, ok := lookup(v, path); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("no sample: %s = %v (present %v), want %v", path, got, ok, want)
		}
	}

	// Nothing published: still a complete document, lifecycle starting.
	ts = newTestServer(t, nil, "", "")
	var doc api.Document
	if err := json.Unmarshal([]byte(do(t, ts, "GET", "/api/v1/status").body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Lifecycle != "starting" || doc.Readiness.Reason != "starting" || doc.Backends == nil || doc.Listen.Ports == nil || doc.Services == nil ||
		doc.SNAT.IPs == nil || doc.SNAT.Retired == nil || doc.HostSettings == nil {
		t.Errorf("nothing published: %+v", doc)
	}
}

// TestDocumentGolden pins the JSON encoding of the fixture and of its
// three-service twin; run with -update to rewrite testdata/document.json
// and testdata/document_services.json (xlbctl's testdata/status.json and
// status_services.json are copies of them).
func TestDocumentGolden(t *testing.T) {
	for file, snap := range map[string]*snapshot.Snapshot{
		"document.json":          fixture(),
		"document_services.json": fixtureServices(),
	} {
		ts := newTestServer(t, snap, "", "")
		got := []byte(do(t, ts, "GET", "/api/v1/status").body)
		path := filepath.Join("testdata", file)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("document differs from %s (run go test -update):\n%s", path, got)
		}
	}
}

// TestDocumentServices: each service carries its own listen address,
// readiness, connections (its members' sums and its counters) and
// backends; a removed service is listed draining, not ready (removed);
// with several services schema 1's one-service fields are empty while the
// instance's connections stay the totals, which the services add up to.
func TestDocumentServices(t *testing.T) {
	d := Build(fixtureServices(), fixedNow)
	if !d.Readiness.Ready {
		t.Errorf("readiness %+v, want ready (the removed service does not count)", d.Readiness)
	}
	if d.Listen.IP != "" || len(d.Listen.Ports) != 0 || len(d.Backends) != 0 || d.Provider.Name != "" {
		t.Errorf("several services: listen %+v, provider %+v, %d backends; want schema 1's fields empty", d.Listen, d.Provider, len(d.Backends))
	}
	type row struct {
		name, state, ip string
		ready           bool
		reason          api.Reason
		backends        []string
		conns           api.ServiceConnections
	}
	var got []row
	var sum api.ServiceConnections
	for _, svc := range d.Services {
		r := row{name: svc.Name, state: string(svc.State), ip: svc.Listen.IP, ready: svc.Readiness.Ready, reason: svc.Readiness.Reason, conns: svc.Connections}
		for _, b := range svc.Backends {
			r.backends = append(r.backends, fmt.Sprintf("%d %s %s", b.ID, b.Name, b.State))
		}
		got = append(got, r)
		c := svc.Connections
		sum.Active += c.Active
		sum.TimeWait += c.TimeWait
		sum.OpenedTotal += c.OpenedTotal
		sum.ClosedTotal += c.ClosedTotal
		sum.OrphanedTotal += c.OrphanedTotal
		sum.EmbryonicExpiredTotal += c.EmbryonicExpiredTotal
	}
	want := []row{
		{"web", "serving", "192.0.2.10", true, "",
			[]string{"1 backend-1 routable", "2 backend-2 routable", "3 backend-3 routable", "4 backend-old draining", "5 backend-5 unreachable", "7 backend-sick unhealthy"},
			api.ServiceConnections{Active: 27, TimeWait: 2, OpenedTotal: 1234, ClosedTotal: 1204,
				ClosedBy: api.ClosedBy{ClientFIN: 1000, BackendFIN: 150, ClientRST: 40, BackendRST: 14}, OrphanedTotal: 3, EmbryonicExpiredTotal: 11}},
		{"api", "serving", "192.0.2.11", true, "",
			[]string{"8 api-1 routable", "9 api-2 unreachable"},
			api.ServiceConnections{Active: 4, TimeWait: 1, OpenedTotal: 66, ClosedTotal: 52,
				ClosedBy: api.ClosedBy{ClientFIN: 40, BackendFIN: 8, ClientRST: 3, BackendRST: 1}, OrphanedTotal: 1}},
		{"old", "draining", "192.0.2.12", false, "removed",
			[]string{"10 mail-1 draining"},
			api.ServiceConnections{Active: 1, OpenedTotal: 10, ClosedTotal: 13,
				ClosedBy: api.ClosedBy{ClientFIN: 10, BackendFIN: 2, ClientRST: 1}}},
		{"dns", "serving", "192.0.2.10", true, "",
			[]string{"11 dns-1 routable", "12 dns-2 routable"}, api.ServiceConnections{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("services\n got %+v\nwant %+v", got, want)
	}
	c := d.Connections
	if sum.Active != c.Active || sum.TimeWait != c.TimeWait || sum.OpenedTotal != c.OpenedTotal || sum.ClosedTotal != c.ClosedTotal ||
		sum.OrphanedTotal != c.OrphanedTotal || sum.EmbryonicExpiredTotal != c.EmbryonicExpiredTotal {
		t.Errorf("services add up to %+v, instance connections %+v", sum, c)
	}
	// The schedulers (issue 30): web's Maglev table and settings, api's
	// weighted round robin cycle, old's round robin (no table); each
	// backend's weight and share of its service's table.
	type sched struct {
		scheduler string
		maglev    *api.Maglev
		table     *api.ServiceTable
		shares    []string
	}
	var gotSched []sched
	for _, svc := range d.Services {
		r := sched{scheduler: svc.Scheduler, maglev: svc.Maglev, table: svc.Table}
		for _, b := range svc.Backends {
			r.shares = append(r.shares, fmt.Sprintf("%s %d %.4f", b.Name, b.Weight, b.TableShare))
		}
		gotSched = append(gotSched, r)
	}
	wantSched := []sched{
		{"maglev", &api.Maglev{Hash: "client_ip", TableSize: 16381},
			&api.ServiceTable{Size: 16381, RebuildsTotal: 4, BuiltUnixMs: fixedNow.UnixMilli() - 90_000},
			[]string{"backend-1 2 0.5000", "backend-2 1 0.2500", "backend-3 1 0.2500", "backend-old 1 0.0000", "backend-5 1 0.0000", "backend-sick 1 0.0000"}},
		{"weighted_round_robin", nil, &api.ServiceTable{Size: 1, RebuildsTotal: 2, BuiltUnixMs: fixedNow.UnixMilli() - 600_000},
			[]string{"api-1 3 1.0000", "api-2 1 0.0000"}},
		{"round_robin", nil, nil, []string{"mail-1 0 0.0000"}},
		{"round_robin", nil, nil, []string{"dns-1 1 0.5000", "dns-2 1 0.5000"}},
	}
	if !reflect.DeepEqual(gotSched, wantSched) {
		for i := range gotSched {
			t.Errorf("service %d: scheduler %s, maglev %+v, table %+v, backends %v", i, gotSched[i].scheduler, gotSched[i].maglev, gotSched[i].table, gotSched[i].shares)
		}
		t.Errorf("want %+v", wantSched)
	}
	if k8s := d.Services[1]; k8s.Provider.Healthy || k8s.Provider.Error == "" || k8s.Provider.Name != "kubernetes" {
		t.Errorf("api provider %+v, want kubernetes, unhealthy with its error", k8s.Provider)
	}
}

// Schema 1's top-level fields describe the file's one service while a
// service a reload removed or renamed drains beside it (tools such as the
// Ansible role's verification read backends there).
func TestDocumentOneServingBesideDraining(t *testing.T) {
	s := fixtureServices()
	s.Form = config.FormTopLevel
	var kept []snapshot.Service
	for _, svc := range s.Services {
		if svc.Name == "web" || svc.Name == "old" {
			kept = append(kept, svc)
		}
	}
	s.Services = kept
	d := Build(s, fixedNow)
	if len(d.Services) != 2 || d.Listen.IP != "192.0.2.10" || len(d.Backends) != 6 || d.Provider.Name == "" {
		t.Fatalf("one serving and one draining service: %d services, listen %+v, %d backends, provider %+v; want web's in schema 1's fields",
			len(d.Services), d.Listen, len(d.Backends), d.Provider)
	}
}

// TestDocumentUDP (issue 31): the instance's UDP pairs at the top level,
// a UDP service's in services[].udp and its backends' in backends[].udp,
// while connections stay TCP's (0 for the UDP service); TCP services and
// their backends have no udp block.
func TestDocumentUDP(t *testing.T) {
	d := Build(fixtureServices(), fixedNow)
	wantPairs := api.UDPPairs{Active: 812, Unreplied: 40, OpenedTotal: 9990, ExpiredTotal: api.UDPExpired{Unreplied: 120, Replied: 9058},
		OverCapTotal: 7, NoBackendTotal: 2, FragmentsPassedTotal: 3}
	if d.UDPPairs != wantPairs {
		t.Errorf("udp_pairs %+v, want %+v", d.UDPPairs, wantPairs)
	}
	for _, svc := range d.Services {
		if svc.Proto != "udp" {
			if svc.UDP != nil {
				t.Errorf("TCP service %s has udp %+v", svc.Name, *svc.UDP)
			}
			for _, b := range svc.Backends {
				if b.UDP != nil {
					t.Errorf("backend %s of TCP service %s has udp %+v", b.Name, svc.Name, *b.UDP)
				}
			}
			continue
		}
		want := api.ServiceUDP{UnrepliedMax: 65536, Active: 812, Unreplied: 40, Replied: 772, OpenedTotal: 9990,
			ExpiredTotal: api.UDPExpired{Unreplied: 120, Replied: 9058}, OverCapTotal: 7}
		if svc.UDP == nil || *svc.UDP != want {
			t.Errorf("service %s udp %+v, want %+v", svc.Name, svc.UDP, want)
		}
		var got []string
		for _, b := range svc.Backends {
			if b.UDP == nil {
				t.Fatalf("backend %s of UDP service %s has no udp block", b.Name, svc.Name)
			}
			got = append(got, fmt.Sprintf("%s %d %d %d %d", b.Name, b.UDP.PairsActive, b.UDP.OpenedTotal, b.ActiveConnections, b.OpenedTotal))
		}
		if want := []string{"dns-1 420 5000 0 0", "dns-2 392 4990 0 0"}; !reflect.DeepEqual(got, want) {
			t.Errorf("dns backends %v, want %v", got, want)
		}
	}
	// Before the first sample: the blocks are there, zero.
	s := fixtureServices()
	s.Sample = nil
	d = Build(s, fixedNow)
	if d.UDPPairs != (api.UDPPairs{}) || d.Services[3].UDP == nil || *d.Services[3].UDP != (api.ServiceUDP{UnrepliedMax: 65536, OpenedTotal: 9990,
		ExpiredTotal: api.UDPExpired{Unreplied: 120, Replied: 9058}}) {
		t.Errorf("no sample: udp_pairs %+v, dns udp %+v", d.UDPPairs, d.Services[3].UDP)
	}
}
