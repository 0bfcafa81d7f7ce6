package status

import (
	"net/netip"
	"time"

	"github.com/xlbproject/xlb/pkg/backend/health"
	"github.com/xlbproject/xlb/pkg/config"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/configwatch"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// fixedNow is the clock of every test: 2026-03-14 12:00:00 UTC.
var fixedNow = time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)

// fixture is a running instance with 3 routable backends, one draining
// (departed, pairs left), one unreachable and one departed without pairs
// (omitted from the document). Per-backend counts add up to the totals.
// It took the data path over in a hot upgrade.
func fixture() *snapshot.Snapshot {
	ip := netip.MustParseAddr
	s := &snapshot.Snapshot{
		Name:       "web-lb",
		Version:    "v0.4.0",
		Revision:   "3f2c9e1a7b",
		Lifecycle:  api.Running,
		StartedAt:  fixedNow.Add(-(2*time.Hour + 13*time.Minute + 5*time.Second + 300*time.Millisecond)),
		Listen:     ip("192.0.2.10"),
		Ports:      []config.PortMapping{{LocalPort: 80, RemotePort: 8080}, {LocalPort: 443, RemotePort: 8443}},
		SNAT:       []netip.Addr{ip("198.51.100.1"), ip("198.51.100.2")},
		XDPMode:    "auto",
		Interfaces: []string{"eth0", "eth1"},

		// a reload moved snat.port_range from 40000-49999 and dropped 198.51.100.3
		RetiredSNAT: []dataplane.RetiredSNAT{{Addr: ip("198.51.100.1"), PortLo: 40012, PortHi: 47730}, {Addr: ip("198.51.100.3"), PortLo: 40003, PortHi: 40003}},

		// Unordered on purpose: the document sorts by interface.
		Attached: []dataplane.Attachment{
			{Interface: "eth1", Ifindex: 3, Mode: dataplane.ModeGeneric, Via: dataplane.PathNetlink},
			{Interface: "eth0", Ifindex: 2, Mode: dataplane.ModeNative, Via: dataplane.PathNetlink},
		},
		Features: dataplane.Features{
			{Name: dataplane.FeatureForEachMapElem, State: dataplane.StateAvailable, Path: dataplane.PathNotUsed},
			{Name: dataplane.FeatureRingBuf, State: dataplane.StateDisabled, Detail: "disabled by the operator", Path: dataplane.PathPerCPUQueue},
			{Name: dataplane.FeatureBatchOps, State: dataplane.StateAvailable, Path: dataplane.PathBatchLookup},
			{Name: dataplane.FeatureXDPLink, State: dataplane.StateRefused, Detail: "operation not permitted", Path: dataplane.PathNetlink},
		},
		SampleInterval: time.Second,
		Sample: &maintenance.Sample{
			Time:             fixedNow.Add(-400 * time.Millisecond),
			Cycle:            7995,
			Duration:         1250 * time.Microsecond,
			FlowEntries:      60,
			FlowCapacity:     524288,
			Active:           27,
			TimeWait:         2,
			Resetting:        1,
			Opened:           1234,
			Closed:           maintenance.Closed{ClientFIN: 1000, BackendFIN: 150, ClientRST: 40, BackendRST: 14},
			Orphaned:         3,
			EmbryonicExpired: 11,
			InvariantRepairs: 1,
			Lone:             0,
			// Two cycles failed earlier; the latest one succeeded.
			Maintenance: maintenance.Maintenance{Errors: 2},
			// Close events through the per-CPU queues (ring_buffer is
			// disabled): one per closed connection, 3 of them lost.
			CloseEvents: maintenance.CloseEvents{Path: dataplane.PathPerCPUQueue, Read: 1201, Lost: 3, TimeWaitScheduled: 2,
				EmbryonicScheduled: 4, HoldScheduled: 1, Unscheduled: 7},
			// A small table is walked whole every cycle.
			Walk: maintenance.WalkStatus{Passes: 7993, Visited: 0, LastPassEntries: 58, LastPassCycles: 1, PassCycles: 30},
			Counters: dataplane.Counters{
				Actions:       [5]uint64{0, 12, 3456, 98765, 4321},
				PairsCreated:  1234,
				SNATExhausted: 2, TableFull: 1, NoBackend: 5, FIBMiss: 4, SYNReused: 17, PairsReplaced: 6,
				InvariantViolations: 1, ShutdownResets: 0, TTLExceeded: 9,
				RSTOutOfWindow: 21, SNATTakeovers: 22, SNATTimewaitReuses: 31, SNATFallbacks: 23, HoldDrops: 24,
				ICMPToClient: 25, ICMPToBackend: 26, NextHopRefreshes: 27, NotOurs: 28,
				FragsForwarded: 29, FragsPassed: 30, IPOptionsForwarded: 31, RSTInexact: 32, PairGoneInFlight: 33,
				ClosedClientFIN: 1000, ClosedBackendFIN: 150, ClosedClientRST: 40, ClosedBackendRST: 14,
			},
			Backends: []maintenance.BackendSample{
				{ID: 1, Active: 10, TimeWait: 1, Stats: dataplane.BackendStats{SentPackets: 2100, SentBytes: 1288490, ReceivedPackets: 26000, ReceivedBytes: 36700160, Opened: 420}, Timestamps: dataplane.TimestampsYes},
				{ID: 2, Active: 9, Stats: dataplane.BackendStats{SentPackets: 2000, SentBytes: 1153433, ReceivedPackets: 24000, ReceivedBytes: 33554432, Opened: 410}, Timestamps: dataplane.TimestampsNo},
				{ID: 3, Active: 6, TimeWait: 1, Stats: dataplane.BackendStats{SentPackets: 1900, SentBytes: 987654, ReceivedPackets: 23000, ReceivedBytes: 31457280, Opened: 380}},
				{ID: 4, Active: 2, Stats: dataplane.BackendStats{SentPackets: 90, SentBytes: 40960, ReceivedPackets: 700, ReceivedBytes: 2097152, Opened: 24}},
				{ID: 5},
			},
		},
		Provider:       "static",
		ProviderSynced: true,
		BGP: &snapshot.BGP{
			Peers: []snapshot.BGPPeer{
				{Address: ip("203.0.113.1"), ASN: 64513, State: snapshot.BGPEstablished, Since: fixedNow.Add(-90 * time.Second)},
				{Address: ip("203.0.113.2"), ASN: 64513, State: "active", Since: fixedNow.Add(-5 * time.Second)},
			},
			Announced: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32")},
		},
		Backends: []backend.Status{
			{ID: 1, Name: "backend-1", IP: ip("198.51.100.11"), State: backend.Routable, Discovered: true, Weight: 1},
			{ID: 2, Name: "backend-2", IP: ip("198.51.100.12"), State: backend.Routable, Discovered: true, Weight: 1},
			{ID: 3, Name: "backend-3", IP: ip("198.51.100.13"), State: backend.Routable, Discovered: true, Weight: 1},
			{ID: 4, Name: "backend-old", IP: ip("198.51.100.14"), State: backend.Departed, Weight: 1},
			{ID: 5, Name: "backend-5", IP: ip("198.51.100.15"), State: backend.Unreachable, Reason: "no route to 198.51.100.15", Discovered: true, Weight: 1},
			{ID: 6, Name: "backend-gone", IP: ip("198.51.100.16"), State: backend.Departed},
			{ID: 7, Name: "backend-sick", IP: ip("198.51.100.17"), Port: 8443, State: backend.Unhealthy, Reason: "health check failing: connect: connection refused", Discovered: true, Weight: 1,
				Health: &backend.Health{Known: true, OK: 12, Failed: 3, Last: health.Result{At: time.UnixMilli(1_773_489_599_250), Took: 2 * time.Millisecond, Err: "connect: connection refused"}}},
		},
		Config: configwatch.State{Path: "/etc/xlb/xlb.yaml", ReloadRequired: true, ChangedKeys: []string{"ports", "provider"}},
		// Handed over by a predecessor with 29 pairs in the flow map;
		// since then one hand-off of its own failed.
		Upgrades: snapshot.Upgrades{
			OK: 3, Failed: 1, Start: api.StartHandedOver, AdoptedPairs: 29,
			LastFailure: "new process exited with status 1: config: xlb.yaml:4: unknown field \"prots\"",
		},
		// Something turned lo.forwarding off twice; the guard put it back.
		HostSettings: []snapshot.HostSetting{
			{Name: "net.ipv4.conf.lo.forwarding", Repairs: 2},
			{Name: "net.ipv4.ip_local_reserved_ports", Repairs: 0},
		},
	}
	// The daemon publishes the counters each sample read with it
	// (Snapshot.AddSample).
	c := s.Sample.Counters
	s.Counters = &c
	return s
}

// clone returns a shallow copy of the fixture changed by f.
func clone(f func(*snapshot.Snapshot)) *snapshot.Snapshot {
	s := fixture()
	f(s)
	return s
}

// fixtureServices is the fixture's twin with three services (DESIGN §9):
// web (the fixture's listen address, ports and backends), api on another
// address whose backend api-1 shares web's backend-1's address (one
// backend id, two member ids), and old, which a reload removed and whose
// last backend drains. The instance totals are the sums of the services'.
func fixtureServices() *snapshot.Snapshot {
	ip := netip.MustParseAddr
	s := fixture()
	s.Form = config.FormServices
	smp := *s.Sample
	smp.Backends = append(append([]maintenance.BackendSample{}, smp.Backends...),
		maintenance.BackendSample{ID: 8, Active: 4, TimeWait: 1, Stats: dataplane.BackendStats{SentPackets: 300, SentBytes: 24000, ReceivedPackets: 500, ReceivedBytes: 700000, Opened: 60}, Timestamps: dataplane.TimestampsYes},
		maintenance.BackendSample{ID: 9, Active: 0, Stats: dataplane.BackendStats{SentPackets: 40, SentBytes: 3000, ReceivedPackets: 50, ReceivedBytes: 9000, Opened: 6}},
		maintenance.BackendSample{ID: 10, Active: 1, Stats: dataplane.BackendStats{SentPackets: 70, SentBytes: 5000, ReceivedPackets: 90, ReceivedBytes: 80000, Opened: 10}},
		maintenance.BackendSample{ID: 11, UDPActive: 420, UDPOpened: 5000, Stats: dataplane.BackendStats{SentPackets: 51000, SentBytes: 3600000, ReceivedPackets: 50500, ReceivedBytes: 7100000}},
		maintenance.BackendSample{ID: 12, UDPActive: 392, UDPOpened: 4990, Stats: dataplane.BackendStats{SentPackets: 50800, SentBytes: 3590000, ReceivedPackets: 50300, ReceivedBytes: 7050000}},
	)
	// dns's UDP pairs (issue 31): 812 live, 40 of them unreplied.
	smp.UDP = maintenance.UDPSample{Active: 812, Unreplied: 40, Opened: 9990, ExpiredUnreplied: 120, ExpiredReplied: 9058,
		OverCap: 7, NoBackend: 2, FragsPassed: 3}
	smp.Services = []maintenance.ServiceSample{{ID: 3, UDPUnreplied: 40, UDPOverCap: 7}}
	smp.CloseEvents.UDPScheduled = 812
	smp.FlowEntries += 2 * 812
	smp.Active += 5
	smp.TimeWait++
	smp.Opened += 76
	smp.Closed = maintenance.Closed{ClientFIN: 1050, BackendFIN: 160, ClientRST: 44, BackendRST: 15}
	smp.Orphaned += 1
	s.Sample = &smp
	// web is Maglev on the client's address, backend-1 weighted 2: half
	// the table (16381 = 8191 + 4095 + 4095 slots), built 4 times.
	webBackends := append([]backend.Status{}, s.Backends...)
	webBackends[0].Weight = 2
	web := snapshot.Service{
		ID: 0, Name: "web", State: snapshot.ServiceServing, Listen: s.Listen, Proto: "tcp", Ports: s.Ports,
		Scheduler: config.SchedulerMaglev, Provider: "static", ProviderSynced: true, Backends: webBackends,
		Maglev: &config.Maglev{Hash: config.MaglevHashClientIP, TableSize: 16381},
		Schedule: dataplane.Schedule{Scheduler: dataplane.SchedulerMaglev, Hash: dataplane.MaglevHashClientIP, Len: 16381,
			Slots: map[uint32]uint32{1: 8191, 2: 4095, 3: 4095}, Rebuilds: 4, BuiltAt: fixedNow.Add(-90 * time.Second)},
		Counts: snapshot.ServiceCounts{Opened: 1234, Closed: maintenance.Closed{ClientFIN: 1000, BackendFIN: 150, ClientRST: 40, BackendRST: 14},
			Orphaned: 3, EmbryonicExpired: 11},
	}
	api := snapshot.Service{
		ID: 1, Name: "api", State: snapshot.ServiceServing, Listen: ip("192.0.2.11"), Proto: "tcp",
		Ports: []config.PortMapping{{LocalPort: 8080, RemotePort: 9090}},
		// Weighted round robin over its one routable backend: a cycle of
		// one entry (weight 3 over the gcd 3), built twice.
		Scheduler: config.SchedulerWeightedRoundRobin, Provider: "kubernetes", ProviderSynced: true,
		ProviderError: "kubernetes: watch: connection refused",
		Schedule: dataplane.Schedule{Scheduler: dataplane.SchedulerWeightedRR, Len: 1, Slots: map[uint32]uint32{8: 1},
			Rebuilds: 2, BuiltAt: fixedNow.Add(-10 * time.Minute)},
		Backends: []backend.Status{
			{ID: 8, Name: "api-1", IP: ip("198.51.100.11"), State: backend.Routable, Discovered: true, Weight: 3},
			{ID: 9, Name: "api-2", IP: ip("198.51.100.21"), State: backend.Unreachable, Reason: "no route to 198.51.100.21", Discovered: true, Weight: 1},
		},
		Counts: snapshot.ServiceCounts{Opened: 66, Closed: maintenance.Closed{ClientFIN: 40, BackendFIN: 8, ClientRST: 3, BackendRST: 1}, Orphaned: 1},
	}
	old := snapshot.Service{
		ID: 2, Name: "old", State: snapshot.ServiceDraining, Listen: ip("192.0.2.12"), Proto: "tcp",
		Ports:     []config.PortMapping{{LocalPort: 25, RemotePort: 2525}},
		Scheduler: config.SchedulerRoundRobin, Provider: "static", ProviderSynced: true,
		Backends: []backend.Status{
			{ID: 10, Name: "mail-1", IP: ip("198.51.100.31"), State: backend.Departed},
		},
		Counts: snapshot.ServiceCounts{Opened: 10, Closed: maintenance.Closed{ClientFIN: 10, BackendFIN: 2, ClientRST: 1}},
	}
	// dns is UDP (issue 31), round robin over two backends, capped at
	// 65536 unreplied pairs.
	dns := snapshot.Service{
		ID: 3, Name: "dns", State: snapshot.ServiceServing, Listen: ip("192.0.2.10"), Proto: "udp",
		Ports:     []config.PortMapping{{LocalPort: 53, RemotePort: 5353}},
		Scheduler: config.SchedulerRoundRobin, Provider: "static", ProviderSynced: true, UDPUnrepliedMax: 65536,
		Backends: []backend.Status{
			{ID: 11, Name: "dns-1", IP: ip("198.51.100.41"), State: backend.Routable, Discovered: true, Weight: 1},
			{ID: 12, Name: "dns-2", IP: ip("198.51.100.42"), State: backend.Routable, Discovered: true, Weight: 1},
		},
		Counts: snapshot.ServiceCounts{UDP: snapshot.UDPCounts{Opened: 9990, ExpiredUnreplied: 120, ExpiredReplied: 9058}},
	}
	s.Services = []snapshot.Service{web, api, old, dns}
	// The daemon fills schema 1's one-service fields only for one service.
	s.Listen, s.Ports, s.Backends, s.Provider = netip.Addr{}, nil, nil, ""
	s.BGP.Announced = []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("192.0.2.11/32")}
	return s
}
