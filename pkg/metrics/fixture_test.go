package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/config"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/configwatch"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// fixtureNow is the scrape time of the fixtures.
var fixtureNow = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// fixtureSample is a maintenance sample with every value distinct, so a
// value exported from the wrong field shows up.
func fixtureSample() *maintenance.Sample {
	return &maintenance.Sample{
		Time:         fixtureNow.Add(-2 * time.Second),
		Cycle:        42,
		Duration:     3 * time.Millisecond,
		FlowEntries:  26,
		FlowCapacity: 524288,
		Active:       7,
		TimeWait:     3,
		Resetting:    2,
		Backends: []maintenance.BackendSample{
			{ID: 0, Active: 4, TimeWait: 1, Stats: dataplane.BackendStats{SentPackets: 101, SentBytes: 10001, ReceivedPackets: 201, ReceivedBytes: 300001, Opened: 11}, Timestamps: dataplane.TimestampsYes},
			{ID: 1, Active: 0, TimeWait: 0, Stats: dataplane.BackendStats{SentPackets: 102, SentBytes: 10002, ReceivedPackets: 202, ReceivedBytes: 300002, Opened: 12}, Timestamps: dataplane.TimestampsNo},
			{ID: 2, Active: 3, TimeWait: 2, Stats: dataplane.BackendStats{SentPackets: 103, SentBytes: 10003, ReceivedPackets: 203, ReceivedBytes: 300003, Opened: 13}},
			{ID: 3},
		},
		Counters: dataplane.Counters{
			Actions: [5]uint64{0, 51, 52, 53, 54}, PairsCreated: 36, SNATExhausted: 55,
			TableFull: 56, NoBackend: 57, FIBMiss: 58, SYNReused: 59, PairsReplaced: 60,
			InvariantViolations: 61, ShutdownResets: 62, TTLExceeded: 63, CloseEventsLost: 20,
			RSTOutOfWindow: 100, SNATTakeovers: 101, SNATTimewaitReuses: 104, SNATFallbacks: 102, HoldDrops: 103,
			ICMPToClient: 104, ICMPToBackend: 105, NextHopRefreshes: 106, NotOurs: 107,
			FragsForwarded: 108, FragsPassed: 109, IPOptionsForwarded: 110, RSTInexact: 111, PairGoneInFlight: 112,
		},
		Opened:           36,
		Closed:           maintenance.Closed{ClientFIN: 14, BackendFIN: 15, ClientRST: 16, BackendRST: 17},
		Orphaned:         18,
		EmbryonicExpired: 26,
		InvariantRepairs: 19,
		// Cycles failed earlier; the latest one succeeded.
		Maintenance: maintenance.Maintenance{Errors: 21},
		// Lost: the ring buffer's 20 plus 3 overwritten queue slots.
		CloseEvents: maintenance.CloseEvents{Path: dataplane.PathRingBuffer, Read: 22, Lost: 23, TimeWaitScheduled: 24,
			EmbryonicScheduled: 27, HoldScheduled: 28, UDPScheduled: 30, Unscheduled: 29},
		Walk: maintenance.WalkStatus{Passes: 25, Visited: 65, LastPassEntries: 66, LastPassCycles: 67, PassCycles: 68},
	}
}

// liveCounters are the snapshot's latest counter read (Snapshot.Counters),
// with other values than the sample's copy, as after a read in the
// shutdown window, so the source of each series is visible.
var liveCounters = dataplane.Counters{
	Actions: [5]uint64{1, 71, 72, 73, 74}, PairsCreated: 40, SNATExhausted: 75,
	TableFull: 76, NoBackend: 77, FIBMiss: 78, SYNReused: 79, PairsReplaced: 80,
	InvariantViolations: 81, ShutdownResets: 82, TTLExceeded: 83,
	RSTOutOfWindow: 84, SNATTakeovers: 85, SNATTimewaitReuses: 88, SNATFallbacks: 86, HoldDrops: 87,
	ICMPToClient: 88, ICMPToBackend: 89, NextHopRefreshes: 90, NotOurs: 91,
	FragsForwarded: 92, FragsPassed: 93, IPOptionsForwarded: 94, RSTInexact: 95, PairGoneInFlight: 96,
}

// fixtureSnapshot is a running instance with three listed backends:
// backend-1 routable, backend-2 discovered but unreachable, backend-3 left
// discovery and still owns pairs (draining); backend-4 left and is idle,
// so it is not listed. It adopted a crashed predecessor's pinned state.
func fixtureSnapshot() *snapshot.Snapshot {
	ip := netip.MustParseAddr
	counters := liveCounters
	return &snapshot.Snapshot{
		Name: "web-lb", Version: "v1.2.3", Revision: "abc",
		Lifecycle: api.Running,
		StartedAt: fixtureNow.Add(-time.Hour),
		Listen:    ip("192.0.2.10"),
		Ports:     []config.PortMapping{{LocalPort: 80, RemotePort: 8080}},
		SNAT:      []netip.Addr{ip("198.51.100.1"), ip("198.51.100.2")},
		XDPMode:   "auto",
		Attached: []dataplane.Attachment{
			{Interface: "eth0", Ifindex: 2, Mode: dataplane.ModeNative},
			{Interface: "eth1", Ifindex: 3, Mode: dataplane.ModeGeneric},
		},
		Interfaces:     []string{"eth0", "eth1"},
		Sample:         fixtureSample(),
		SampleInterval: time.Second,
		Counters:       &counters,
		Provider:       "static",
		ProviderSynced: true,
		BGP: &snapshot.BGP{
			Peers: []snapshot.BGPPeer{
				{Address: ip("203.0.113.1"), ASN: 64513, State: snapshot.BGPEstablished},
				{Address: ip("203.0.113.2"), ASN: 64513, State: "active"},
			},
			Announced: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32")},
		},
		Backends: []backend.Status{
			{ID: 0, Name: "backend-1", IP: ip("198.51.100.11"), State: backend.Routable, Discovered: true,
				Health: &backend.Health{Healthy: true, Known: true, OK: 40, Failed: 1}},
			{ID: 1, Name: "backend-2", IP: ip("198.51.100.12"), State: backend.Unreachable, Reason: "no route", Discovered: true},
			{ID: 2, Name: "backend-3", IP: ip("198.51.100.13"), State: backend.Departed},
			{ID: 3, Name: "backend-4", IP: ip("198.51.100.14"), State: backend.Departed},
			{ID: 4, Name: "backend-5", IP: ip("198.51.100.15"), State: backend.Unhealthy, Reason: "health check failing: status 503", Discovered: true,
				Health: &backend.Health{Known: true, OK: 7, Failed: 3}},
		},
		Config: configwatch.State{Path: "/etc/xlb/xlb.yaml", ReloadRequired: true, ChangedKeys: []string{"ports"}},
		// Adopted after a crash; values distinct from every other series.
		Upgrades: snapshot.Upgrades{OK: 91, Failed: 92, Start: api.StartAdopted, AdoptedPairs: 93, LastFailure: "successor exited with status 1"},
		HostSettings: []snapshot.HostSetting{
			{Name: "net.ipv4.conf.lo.forwarding", Repairs: 94},
			{Name: "net.ipv4.ip_local_reserved_ports", Repairs: 95},
		},
		RetiredSNAT: []dataplane.RetiredSNAT{
			{Addr: ip("198.51.100.1"), PortLo: 40000, PortHi: 40095}, {Addr: ip("198.51.100.1"), PortLo: 40200, PortHi: 40200},
			{Addr: ip("198.51.100.3"), PortLo: 40003, PortHi: 40003},
		},
	}
}

// testServer is a Server over store with the fixture clock and a test log.
func testServer(t *testing.T, store *snapshot.Store) (*Server, *logtest.Hook) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	srv, err := New(Options{Store: store, Log: log, Now: func() time.Time { return fixtureNow }})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return srv, hook
}

// get fetches path from h over a real HTTP connection.
func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	ts := httptest.NewServer(h)
	defer ts.Close()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", path, err)
	}
	return resp, string(body)
}

// scrape GETs /metrics and parses the text exposition.
func scrape(t *testing.T, srv *Server) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	resp, body := get(t, srv.Handler(), "/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d\n%s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams, body
}

// labelsOf returns a metric's labels as a map.
func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// find returns the metric of family name whose labels are exactly want.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f, ok := fams[name]
	if !ok {
		return nil, false
	}
next:
	for _, m := range f.GetMetric() {
		got := labelsOf(m)
		if len(got) != len(want) {
			continue
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// value returns the gauge or counter value of one series, failing the test
// when it is missing.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m, ok := find(fams, name, labels)
	if !ok {
		t.Fatalf("series %s%v missing", name, labels)
	}
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	t.Fatalf("series %s%v is neither gauge nor counter", name, labels)
	return 0
}
