// Package api is the status API document (DESIGN §3) as Go types: the
// admin listener (pkg/status) encodes it and xlbctl decodes it. It imports
// only the standard library so clients do not link the data path.
package api

// SchemaVersion is the version of Document served at /api/v1/status. It
// changes only when a field is removed or changes meaning; new fields may
// appear within a version. Version 2 (issue 29, many services) added
// services; listen, provider and backends, version 1's one service, are
// filled only while there is exactly one service, and readiness.reason may
// name several services. UDP (issue 31) added udp_pairs, services[].udp
// and backends[].udp within version 2: connections stay TCP's.
const SchemaVersion = 2

// Document is the body of GET /api/v1/status (DESIGN §3), built from one
// snapshot.Snapshot by Build. xlbctl decodes the same type.
//
// Conventions: times are Unix milliseconds (int64); durations are named
// with their unit (_ms, _seconds); counters end in _total (except
// upgrades.ok and upgrades.failed, named after the result label of
// xlb_hot_upgrades_total) and count since the data path's maps were
// created, except the maintenance loop's own (maintenance.errors_total,
// close_events.read_total, walk.passes_total), which count since the loop
// started; lists are never null (empty instead).
// Before the first maintenance sample every count is 0 and
// dataplane.sampled_at_unix_ms and dataplane.sample_age_ms are null.
type Document struct {
	SchemaVersion int    `json:"schema_version"`
	Name          string `json:"name"`     // config name
	Version       string `json:"version"`  // release version (buildinfo.Version)
	Revision      string `json:"revision"` // VCS commit (buildinfo.Revision)
	// Lifecycle is starting, running, handing_over (a hot upgrade: still
	// serving and ready while a new process takes over) or shutting_down
	// (Lifecycles).
	Lifecycle Lifecycle `json:"lifecycle"`
	// GeneratedAtUnixMs is when the server built this document.
	GeneratedAtUnixMs int64 `json:"generated_at_unix_ms"`
	// StartedAtUnixMs is the process start (0 if unknown); UptimeSeconds
	// is whole seconds since then.
	StartedAtUnixMs int64     `json:"started_at_unix_ms"`
	UptimeSeconds   int64     `json:"uptime_seconds"`
	Readiness       Readiness `json:"readiness"`
	// Drained is true while an operator has drained the instance (POST
	// /api/v1/drain, xlbctl drain; DESIGN §6a): it forwards every packet,
	// readiness answers draining, and a hot upgrade keeps the state.
	Drained bool `json:"drained"`
	// Drain says who drained the instance and since when; set only while
	// Drained (issue 28: a drain survives a restart or a crash, and this
	// says where it came from).
	Drain *Drain `json:"drain"`
	// Shutdown is set only while lifecycle is shutting_down.
	Shutdown *Shutdown `json:"shutdown"`
	// Upgrades is how this process took the data path and how the hot
	// upgrades (SIGUSR2 hand-offs, DESIGN §6) of its pinned state went.
	Upgrades Upgrades `json:"upgrades"`

	Dataplane Dataplane `json:"dataplane"`
	// Maintenance is the health of the maintenance loop that samples the
	// data path, top level because it is the daemon's task, not the data
	// path's: XDP forwards while it fails.
	Maintenance Maintenance `json:"maintenance"`
	// Listen, Provider and Backends are the only service's while there is
	// exactly one (services[0]'s; schema version 1's fields); with
	// several, listen.ip and provider.name are "" and the lists empty.
	Listen Listen `json:"listen"`
	SNAT   SNAT   `json:"snat"`
	// Connections are the instance's TCP connections, every service's
	// pairs together; UDP pairs are in UDPPairs.
	Connections Connections `json:"connections"`
	// UDPPairs are the instance's UDP pairs, every UDP service's together
	// (issue 31); all zero without a UDP service or before the first
	// sample.
	UDPPairs UDPPairs `json:"udp_pairs"`
	Provider Provider `json:"provider"`
	// Backends are listed in data-path id order (DESIGN §3); a backend
	// that left discovery stays listed as draining while pairs reference
	// it and disappears once they are gone.
	Backends []Backend `json:"backends"`
	// Services are every service in the data path (DESIGN §9): serving
	// ones in the config's order, then draining ones (removed by a
	// reload, their pairs still flowing). Empty before the instance is
	// up.
	Services []Service `json:"services"`
	Config   Config    `json:"config"`
	// HostSettings are the host settings the instance guards
	// (net.ipv4.conf.lo.forwarding, net.ipv4.ip_local_reserved_ports) and
	// how often each was put back after something reset it; empty before
	// the instance is up.
	HostSettings []HostSetting `json:"host_settings"`
	// BGP is the embedded speaker (DESIGN §6a); absent without a bgp
	// section in the config.
	BGP *BGP `json:"bgp,omitempty"`
}

// HostSetting is one guarded host setting (snapshot.HostSetting): the
// instance reads it once a second and writes XLB's value back, with one
// warning in the log, when something reset it (issue 13).
type HostSetting struct {
	// Name is the dotted sysctl name.
	Name string `json:"name"`
	// RepairsTotal counts the resets put back since the instance started
	// (xlb_host_setting_repairs_total{setting}).
	RepairsTotal uint64 `json:"repairs_total"`
}

// Readiness is the /readyz decision (snapshot.Snapshot.Readiness).
type Readiness struct {
	Ready bool `json:"ready"`
	// Reason is one of the stable /readyz reasons (DESIGN §3), "" when ready.
	Reason Reason `json:"reason"`
}

// Shutdown describes the shutdown window (DESIGN §6, first bullet).
type Shutdown struct {
	DeadlineUnixMs int64 `json:"deadline_unix_ms"` // when XLB detaches
	// ResetsFromUnixMs is when the reset window begins: the stop, or
	// bgp.withdraw_delay_secs after the BGP routes were withdrawn; until
	// then every packet is forwarded as before (issue 28).
	ResetsFromUnixMs int64 `json:"resets_from_unix_ms"`
	// SecondsLeft is the remaining window rounded up, 0 once it has passed.
	SecondsLeft int64 `json:"seconds_left"`
}

// Upgrades describes hand-offs and adoption (snapshot.Upgrades, DESIGN §6).
type Upgrades struct {
	// Start is how this process took the data path: fresh (no pinned
	// state), adopted (a predecessor's pins, after a crash or restart),
	// migrated (pins of an older layout or another max_connections,
	// copied entry by entry) or handed_over (SIGUSR2 hand-off) (Start*);
	// "" before the daemon's first snapshot.
	Start Start `json:"start"`
	// AdoptedPairs are the connection pairs found in the pinned flow map
	// when this process started, 0 when fresh
	// (xlb_adopted_connection_pairs).
	AdoptedPairs int `json:"adopted_pairs"`
	// OK and Failed count hand-offs since the pinned state was created:
	// they live in its metadata record, so they continue across hand-offs
	// and crashes, and a stop with SIGTERM removes them with the pins
	// (xlb_hot_upgrades_total{result}).
	OK     uint64 `json:"ok"`
	Failed uint64 `json:"failed"`
	// LastFailure is why the latest failed hand-off failed, as this
	// process saw it; "" when none failed since it started.
	LastFailure string `json:"last_failure"`
}

// Dataplane is what is attached and the latest maintenance sample's view
// of the flow map.
type Dataplane struct {
	XDPMode        string          `json:"xdp_mode"`   // configured: auto, native or generic
	Interfaces     []string        `json:"interfaces"` // configured (resolved) interfaces
	XDPAttachments []XDPAttachment `json:"xdp_attachments"`
	// Features are the optional kernel features probed at startup and the
	// path the data path takes for each, in a fixed order.
	Features []Feature `json:"features"`
	FlowMap  FlowMap   `json:"flow_map"`
	// SampledAtUnixMs is the end of the latest maintenance cycle and
	// SampleAgeMs its age when the document was built; both null before
	// the first sample.
	SampledAtUnixMs *int64 `json:"sampled_at_unix_ms"`
	SampleAgeMs     *int64 `json:"sample_age_ms"`
	// SampleCycle numbers successful maintenance cycles from 1 (0 before
	// the first); SampleDurationMs is the cycle's duration.
	SampleCycle      uint64  `json:"sample_cycle"`
	SampleDurationMs float64 `json:"sample_duration_ms"`
	// SampleIntervalMs is the maintenance period; a sample older than
	// StaleAfterMs makes readiness dataplane_sample_stale.
	SampleIntervalMs int64    `json:"sample_interval_ms"`
	StaleAfterMs     int64    `json:"stale_after_ms"`
	Counters         Counters `json:"counters"`
}

// Maintenance is the maintenance loop's health as of the latest sample
// (maintenance.Sample.Maintenance), and how it finds the pairs it removes
// (close events and the incremental walk). A failed cycle still publishes
// a sample, so dataplane.sample_age_ms stays small and readiness stays
// ready while cycles fail; the data path keeps forwarding, but pairs are
// not cleaned up. While Failing, connections (totals included),
// dataplane.flow_map, the backends' connection counts and statistics,
// dataplane.sample_cycle, close_events and walk are those of the latest
// successful cycle; dataplane.counters are read afresh when possible. All
// zero (path "", FailingSinceUnixMs null) before the first sample.
type Maintenance struct {
	// Failing is true when the latest cycle failed.
	Failing bool `json:"failing"`
	// ErrorsTotal counts failed cycles since the maintenance loop started
	// (xlb_maintenance_errors_total).
	ErrorsTotal uint64 `json:"errors_total"`
	// ConsecutiveFailures is the length of the current spell of failed
	// cycles, 0 when the latest cycle succeeded.
	ConsecutiveFailures uint64 `json:"consecutive_failures"`
	// FailingSinceUnixMs is the end of the spell's first failed cycle;
	// null when not failing.
	FailingSinceUnixMs *int64 `json:"failing_since_unix_ms"`
	// LastError is the latest cycle's error, "" when it succeeded.
	LastError string `json:"last_error"`
	// CloseEvents are the data path's close events as the loop read them.
	CloseEvents CloseEvents `json:"close_events"`
	// Walk is the incremental walk over the flow map.
	Walk Walk `json:"walk"`
}

// CloseEvents describes the close events (maintenance.Sample.CloseEvents):
// the data path posts one for each pair that becomes terminal, and the
// loop removes RST pairs on the next cycle and FIN/FIN pairs 60 s after
// the second FIN from them.
type CloseEvents struct {
	// Path is how events arrive: ring_buffer, or per_cpu_queue where the
	// host refuses ring buffers (the ring_buffer feature's path).
	Path string `json:"path"`
	// ReadTotal counts events the loop read since it started.
	ReadTotal uint64 `json:"read_total"`
	// LostTotal counts events that never arrived: the ring buffer was full
	// (counted by the data path since the flow map was created) or a
	// per-CPU queue slot was overwritten before it was read (since the
	// loop started). The walk removes those pairs instead, at most one
	// pass late.
	LostTotal uint64 `json:"lost_total"`
	// TimeWaitScheduled is the number of pairs the loop holds for removal
	// at the end of their time-wait. It may differ from
	// connections.timewait: a pair whose event was lost (a full ring
	// buffer, an overwritten queue slot, a restart) is left to the walk; a
	// pair a new SYN replaced stays scheduled until its time-wait would
	// have ended.
	TimeWaitScheduled uint64 `json:"timewait_scheduled"`
	// EmbryonicScheduled is the number of new pairs the loop holds for a
	// check at their embryonic deadline (flow_table.embryonic_ttl_secs
	// after the SYN); established ones among them are only checked.
	EmbryonicScheduled uint64 `json:"embryonic_scheduled"`
	// HoldScheduled is the number of SNAT ports held for their backend's
	// TIME_WAIT (a client reused its source port on a pair the backend
	// closed first) the loop releases when that time-wait ends.
	HoldScheduled uint64 `json:"hold_scheduled"`
	// UDPScheduled is the number of UDP pairs the loop holds for a
	// re-check at their timeout (issue 31): one per live UDP pair, less
	// those whose event was lost or found the schedule full (the walk
	// finds them).
	UDPScheduled uint64 `json:"udp_scheduled"`
	// UnscheduledTotal counts events since the loop started that found
	// their schedule full (each holds at most as many requests as the flow
	// map holds pairs, so a SYN flood cannot grow it); the walk applies
	// the same rules to those pairs within a pass.
	UnscheduledTotal uint64 `json:"unscheduled_total"`
}

// Walk describes the incremental walk (maintenance.WalkStatus): each cycle
// reads a slice of the flow map and resumes there on the next, so every
// entry is visited at least once every pass_cycles cycles
// (orphan_ttl_secs/10 at one cycle a second). The walk finds orphans, lone
// entries and terminal pairs whose close event was lost.
type Walk struct {
	// PassesTotal counts complete passes since the loop started.
	PassesTotal uint64 `json:"passes_total"`
	// Visited is the number of entries the current pass has read so far.
	Visited uint64 `json:"visited"`
	// LastPassEntries and LastPassCycles are the entries the last complete
	// pass read and the cycles it took (0 before the first pass ends).
	LastPassEntries uint64 `json:"last_pass_entries"`
	LastPassCycles  uint64 `json:"last_pass_cycles"`
	// PassCycles is the most cycles a pass may take.
	PassCycles uint64 `json:"pass_cycles"`
}

// XDPAttachment is the program attached to one interface, sorted by name.
type XDPAttachment struct {
	Interface string `json:"interface"`
	Ifindex   int    `json:"ifindex"`
	Mode      string `json:"mode"` // native or generic: what is attached
	Via       string `json:"via"`  // bpf_link, or netlink where XDP links are refused
}

// Feature is one optional kernel feature (dataplane.FeatureStatus).
type Feature struct {
	// Name: bpf_for_each_map_elem, ring_buffer, batch_map_ops,
	// xdp_bpf_link, pinning.
	Name string `json:"name"`
	// State: available, refused (by the kernel or a policy), disabled (by
	// the operator, XLB_DISABLE_FEATURES) or unknown (not probed yet).
	State string `json:"state"`
	// Detail is why the feature is not available ("" when it is).
	Detail string `json:"detail"`
	// Path is what the data path does given State: batch_lookup or
	// per_key (flow map reads), ring_buffer or per_cpu_queue (close
	// events), bpf_link or netlink (XDP attach), not_attached, pinned or
	// unpinned (state under state_dir; unpinned: a restart or crash loses
	// every connection), or not_used (this version has no use for the
	// feature: bpf_for_each_map_elem).
	Path string `json:"path"`
}

// FlowMap counts directional entries (two per connection pair).
type FlowMap struct {
	Entries  uint64 `json:"entries"`
	Capacity uint64 `json:"capacity"` // the map's max_entries
}

// Counters are the data path's global counters (dataplane.Counters) as
// last read: with each maintenance sample, and each second of the shutdown
// window, when no cycle runs. The metrics export the same values
// (snapshot.Snapshot.Counters). All zero before the first sample.
type Counters struct {
	XDPActions               XDPActions `json:"xdp_actions"`
	SNATPortExhaustedTotal   uint64     `json:"snat_port_exhausted_total"`  // SYNs refused: no free SNAT port
	TableFullTotal           uint64     `json:"table_full_total"`           // SYNs refused: flow map full
	NoBackendTotal           uint64     `json:"no_backend_total"`           // SYNs refused: nothing routable
	FIBMissTotal             uint64     `json:"fib_miss_total"`             // SYNs dropped: next hop unresolved
	SYNReusedTotal           uint64     `json:"syn_reused_total"`           // retransmitted SYNs on a live pair
	PairsReplacedTotal       uint64     `json:"pairs_replaced_total"`       // terminal pairs replaced by a new SYN
	InvariantViolationsTotal uint64     `json:"invariant_violations_total"` // FIN/RST on a lone entry
	ShutdownResetsTotal      uint64     `json:"shutdown_resets_total"`      // RSTs sent in the shutdown window
	TTLExceededTotal         uint64     `json:"ttl_exceeded_total"`         // balanced packets dropped with TTL <= 1 (never a pair)
	RSTOutOfWindowTotal      uint64     `json:"rst_out_of_window_total"`    // RSTs dropped: outside the receiver's window (RFC 5961 §3)
	RSTInexactTotal          uint64     `json:"rst_inexact_total"`          // RSTs forwarded, the pair kept: in the window, not exact (RFC 5961 §3)
	PairGoneInFlightTotal    uint64     `json:"pair_gone_in_flight_total"`  // packets dropped: another CPU replaced or reaped their pair while they were rewritten
	SNATTakeoversTotal       uint64     `json:"snat_takeovers_total"`       // SNAT ports taken over from a terminal pair the backend holds no TIME_WAIT for
	SNATTimewaitReusesTotal  uint64     `json:"snat_timewait_reuses_total"` // SNAT ports held for a backend's TIME_WAIT that a SYN with timestamps took (RFC 6191)
	SNATFallbacksTotal       uint64     `json:"snat_fallbacks_total"`       // SYNs sent to the next routable backend: the first one's ports ran out
	HoldDropsTotal           uint64     `json:"hold_drops_total"`           // packets dropped on a port held for its backend's TIME_WAIT
	ICMPToClientTotal        uint64     `json:"icmp_to_client_total"`       // ICMP errors about a pair translated toward the client
	ICMPToBackendTotal       uint64     `json:"icmp_to_backend_total"`      // ICMP errors about a pair translated toward the backend
	NextHopRefreshesTotal    uint64     `json:"next_hop_refreshes_total"`   // packets whose next hop was freed: looked up again
	NotOursTotal             uint64     `json:"not_ours_total"`             // frames XLB would balance addressed to another MAC (another host's, flooded): passed
	FragmentsForwardedTotal  uint64     `json:"fragments_forwarded_total"`  // IPv4 fragments of a pair forwarded (first fragments, and later ones following them)
	FragmentsPassedTotal     uint64     `json:"fragments_passed_total"`     // IPv4 fragments to XLB's addresses of no known pair or datagram, or of a SYN: passed
	IPOptionsForwardedTotal  uint64     `json:"ip_options_forwarded_total"` // segments of a pair with IPv4 options forwarded, the options unchanged
}

// XDPActions counts XDP verdicts.
type XDPActions struct {
	Aborted  uint64 `json:"aborted"`
	Drop     uint64 `json:"drop"`
	Pass     uint64 `json:"pass"`
	TX       uint64 `json:"tx"`
	Redirect uint64 `json:"redirect"`
}

// Listen is the service address and its port mappings.
type Listen struct {
	IP    string    `json:"ip"`
	Ports []PortMap `json:"ports"`
}

// PortMap is one mapping: clients connect to local_port, backends are
// reached on remote_port; 0 when the config leaves it to discovery
// (provider.kubernetes: each backend's EndpointSlice port, Backend.Port).
type PortMap struct {
	LocalPort  uint16 `json:"local_port"`
	RemotePort uint16 `json:"remote_port"`
}

// SNAT is the backend-facing source addresses.
type SNAT struct {
	// IP is the first of IPs ("" before the instance is up), kept for
	// clients of schema version 1 written before snat.ip took a list.
	IP string `json:"ip"`
	// IPs are every SNAT address (snat.ip, resolved), in config order.
	IPs []string `json:"ips"`
	// Retired are SNAT addresses and port ranges that an earlier config
	// handed out, before a reload that changed snat.ip or
	// snat.port_range, and that live connection pairs may still hold:
	// the data path still forwards their backends' packets and the ports
	// stay in net.ipv4.ip_local_reserved_ports until the maintenance
	// walk finds none held (issue 27). Sorted by address and port; empty
	// when none.
	Retired []RetiredSNAT `json:"retired"`
}

// RetiredSNAT is one retired SNAT space (dataplane.RetiredSNAT).
type RetiredSNAT struct {
	IP string `json:"ip"`
	// PortRange is "LO-HI", inclusive, as snat.port_range is written.
	PortRange string `json:"port_range"`
}

// Connections counts connection pairs (DESIGN §4 counting rule): the data
// path counts a connection as closed at the packet that makes it terminal
// (its second FIN or its RST), and the gauges are differences of the data
// path's and the reaper's counters, so as of one sample a connection has
// left active and is counted once in closed_total; orphan removals count
// in orphaned_total only, expired embryonic pairs in
// embryonic_expired_total only.
type Connections struct {
	Active      uint64   `json:"active"`    // open or half-closed pairs
	TimeWait    uint64   `json:"timewait"`  // both FINs seen, waiting out 60 s
	Resetting   uint64   `json:"resetting"` // RST seen, removed by the next cycle
	OpenedTotal uint64   `json:"opened_total"`
	ClosedTotal uint64   `json:"closed_total"` // sum of ClosedBy
	ClosedBy    ClosedBy `json:"closed_by"`
	// OrphanedTotal counts idle pairs removed after orphan_ttl_secs, since
	// the flow map was created (the reaper's count).
	OrphanedTotal uint64 `json:"orphaned_total"`
	// EmbryonicExpiredTotal counts pairs whose handshake never completed,
	// removed flow_table.embryonic_ttl_secs after their SYN, since the flow
	// map was created (the reaper's count; not in closed_total).
	EmbryonicExpiredTotal uint64 `json:"embryonic_expired_total"`
	// InvariantRepairsTotal counts lone entries removed since the flow map
	// was created (the reaper's count); LoneEntries are those the latest
	// cycle found (repaired next cycle if still lone).
	InvariantRepairsTotal uint64 `json:"invariant_repairs_total"`
	LoneEntries           uint64 `json:"lone_entries"`
}

// Service is one service (DESIGN §9): a listen address, a protocol and
// its port mappings, with its own backends, scheduler and readiness.
type Service struct {
	// ID is the data path's service id (0..255), which flow entries
	// carry; a removed service's id is freed once its pairs are gone.
	ID   uint16 `json:"id"`
	Name string `json:"name"`
	// State is serving, or draining once a reload removed it
	// (ServiceStates).
	State  ServiceState `json:"state"`
	Listen Listen       `json:"listen"`
	Proto  string       `json:"proto"` // tcp or udp
	// Scheduler is round_robin, weighted_round_robin or maglev (DESIGN
	// §9 scheduler).
	Scheduler string `json:"scheduler"`
	// Maglev is the maglev scheduler's settings; absent for the others.
	Maglev *Maglev `json:"maglev,omitempty"`
	// Table is the schedule the data path holds for a
	// weighted_round_robin or maglev service; absent for round_robin.
	Table *ServiceTable `json:"table,omitempty"`
	// Readiness is the service's own answer (/readyz?service=NAME): the
	// instance-wide reasons first, then the service's; the reason is one
	// bare word, removed for a draining service.
	Readiness Readiness `json:"readiness"`
	// Connections are the service's TCP connections (all 0 for a UDP
	// service).
	Connections ServiceConnections `json:"connections"`
	// UDP are a UDP service's pairs; absent for a TCP service.
	UDP      *ServiceUDP `json:"udp,omitempty"`
	Provider Provider    `json:"provider"`
	// Backends are the service's, as the top-level backends (id order;
	// id is the member id, one per service and backend address).
	Backends []Backend `json:"backends"`
}

// Maglev is a maglev service's settings (DESIGN §9 maglev).
type Maglev struct {
	// Hash is five_tuple (the connection's addresses and ports) or
	// client_ip (the client's address alone: every connection of a
	// client to one backend, on every host with the same backends).
	Hash string `json:"hash"`
	// TableSize is the lookup table's size in slots, a prime: the
	// configured maglev.table_size, or the size chosen from the static
	// backends' count.
	TableSize uint32 `json:"table_size"`
}

// ServiceTable is the schedule of a weighted_round_robin or maglev
// service (dataplane.Schedule): built from the routable backends, by
// name and weight, and swapped in whole whenever they change.
type ServiceTable struct {
	// Size is the schedule's entries: the Maglev table's slots, or the
	// weighted round robin cycle's length (the weights' sum over their
	// greatest common divisor). 0 before the first schedule: until then
	// new connections are picked round robin
	// (xlb_scheduler_fallbacks_total counts them).
	Size uint32 `json:"size"`
	// RebuildsTotal counts the schedules built for the service since it
	// took its id, this one included; it lives in the schedule itself,
	// so it continues across hot upgrades
	// (xlb_scheduler_table_rebuilds_total).
	RebuildsTotal uint64 `json:"rebuilds_total"`
	// BuiltUnixMs is when the schedule was built; 0 before the first.
	BuiltUnixMs int64 `json:"built_unix_ms"`
	// Overfull is true when a Maglev table has fewer than 100 slots per
	// routable backend (possible with Kubernetes only: a static
	// service's config refuses it): removing a backend then moves more
	// than 1 % of the others' connections. Set maglev.table_size to a
	// larger prime.
	Overfull bool `json:"overfull"`
}

// ServiceConnections counts one service's connection pairs (DESIGN §4
// counting rule, as Connections): the gauges are its backends' sums, the
// counters count since the service took its id and never decrease while
// it keeps it.
type ServiceConnections struct {
	Active                uint64   `json:"active"`
	TimeWait              uint64   `json:"timewait"`
	OpenedTotal           uint64   `json:"opened_total"`
	ClosedTotal           uint64   `json:"closed_total"` // sum of ClosedBy
	ClosedBy              ClosedBy `json:"closed_by"`
	OrphanedTotal         uint64   `json:"orphaned_total"`
	EmbryonicExpiredTotal uint64   `json:"embryonic_expired_total"`
}

// UDPPairs counts the instance's UDP pairs (maintenance.UDPSample; issue
// 31). A UDP pair lives until it has been idle for
// flow_table.udp_timeout_secs without a reply from the backend, or
// udp_stream_timeout_secs once it saw one; a datagram in either direction
// refreshes it. Counters count since the flow map was created.
type UDPPairs struct {
	// Active are the live UDP pairs; Unreplied, of them, those the backend
	// has not answered yet (what each service's udp_unreplied_max caps).
	Active    uint64 `json:"active"`
	Unreplied uint64 `json:"unreplied"`
	// OpenedTotal counts the UDP pairs the data path created.
	OpenedTotal uint64 `json:"opened_total"`
	// ExpiredTotal counts the pairs removed by their timeout, by state.
	ExpiredTotal UDPExpired `json:"expired_total"`
	// OverCapTotal counts first datagrams passed to the kernel because
	// their service had udp_unreplied_max unreplied pairs (the kernel
	// answers port unreachable unless a local socket listens there).
	OverCapTotal uint64 `json:"over_cap_total"`
	// NoBackendTotal counts first datagrams passed to the kernel without
	// a pair: no routable backend. A full table or exhausted SNAT ports count in
	// dataplane.counters (table_full_total, snat_port_exhausted_total).
	NoBackendTotal uint64 `json:"no_backend_total"`
	// FragmentsPassedTotal counts UDP fragments to XLB's addresses passed
	// to the kernel untouched: XLB does not balance fragmented datagrams.
	FragmentsPassedTotal uint64 `json:"fragments_passed_total"`
}

// UDPExpired splits expired UDP pairs: unreplied (never answered, removed
// udp_timeout_secs after the last datagram) and replied (removed
// udp_stream_timeout_secs after the later direction's last datagram).
type UDPExpired struct {
	Unreplied uint64 `json:"unreplied"`
	Replied   uint64 `json:"replied"`
}

// ServiceUDP is one UDP service's pairs (snapshot.ServiceUDP; issue 31):
// the gauges as of the latest sample, the counters since the service took
// its id.
type ServiceUDP struct {
	// UnrepliedMax is the service's udp_unreplied_max: new pairs are
	// refused (their datagrams passed, OverCapTotal) while it has that
	// many unreplied ones.
	UnrepliedMax uint32 `json:"unreplied_max"`
	Active       uint64 `json:"active"`    // live pairs
	Unreplied    uint64 `json:"unreplied"` // of them, not answered yet
	Replied      uint64 `json:"replied"`   // of them, answered
	OpenedTotal  uint64 `json:"opened_total"`
	// ExpiredTotal counts its pairs removed by their timeout, by state.
	ExpiredTotal UDPExpired `json:"expired_total"`
	OverCapTotal uint64     `json:"over_cap_total"`
}

// BackendUDP is one backend's UDP pairs, in a UDP service (issue 31):
// its connection counts (active_connections, timewait_connections,
// opened_total) stay TCP's and are 0 there.
type BackendUDP struct {
	PairsActive uint64 `json:"pairs_active"`
	OpenedTotal uint64 `json:"opened_total"`
}

// ClosedBy splits closed connections by initiator and reason.
type ClosedBy struct {
	ClientFIN  uint64 `json:"client_fin"`
	BackendFIN uint64 `json:"backend_fin"`
	ClientRST  uint64 `json:"client_rst"`
	BackendRST uint64 `json:"backend_rst"`
}

// Provider is the backend discovery provider.
type Provider struct {
	Name    string `json:"name"` // static, kubernetes
	Healthy bool   `json:"healthy"`
	Error   string `json:"error"` // last error while unhealthy, "" otherwise
	// Synced is true once the provider's first set was applied; a
	// provider that synced keeps its last set through errors (readiness
	// stays ready), one that never did makes readiness
	// backend_provider_unhealthy.
	Synced bool `json:"synced"`
	// Stale is true while the provider has not synced and the routable
	// set is the one handed over or adopted from the previous process (a
	// reload or a crash-restart while the Kubernetes API is down): it
	// counts as synced, readiness stays ready (issue 28).
	Stale bool `json:"stale"`
}

// Backend is one backend. Bytes and packets are as forwarded: sent is
// client→backend, received is backend→client (DESIGN §4).
type Backend struct {
	ID   uint32 `json:"id"` // data-path member id (one per service and backend address)
	Name string `json:"name"`
	IP   string `json:"ip"`
	// State is routable, unhealthy, draining or unreachable
	// (BackendStates; snapshot.Snapshot.BackendState).
	State BackendState `json:"state"`
	// Reason says why a backend is unreachable or unhealthy; ""
	// otherwise.
	Reason string `json:"reason"`
	// Port is the backend's own port from discovery (the EndpointSlice
	// port used for mappings without remote_port); 0 when it has none.
	Port uint16 `json:"port,omitempty"`
	// Health is the active health checks' view; absent when
	// health_check is not configured or the backend is not discovered.
	Health *BackendHealth `json:"health,omitempty"`
	// AvailableForNewConnections is true when the data path may pick it
	// for a new connection: routable and the instance not shutting down.
	AvailableForNewConnections bool   `json:"available_for_new_connections"`
	ActiveConnections          uint64 `json:"active_connections"`
	TimeWaitConnections        uint64 `json:"timewait_connections"`
	OpenedTotal                uint64 `json:"opened_total"`
	SentBytesTotal             uint64 `json:"sent_bytes_total"`
	ReceivedBytesTotal         uint64 `json:"received_bytes_total"`
	SentPacketsTotal           uint64 `json:"sent_packets_total"`
	ReceivedPacketsTotal       uint64 `json:"received_packets_total"`
	// Weight is the backend's weight, 0..256 (backend weight; a
	// Kubernetes Service's weight annotation): its share of new
	// connections under weighted_round_robin and maglev relative to the
	// others'; 0 takes no new connections. round_robin ignores it.
	Weight uint16 `json:"weight"`
	// TableShare is the share of the service's new connections the data
	// path is scheduled to give the backend, 0..1: its slots in the
	// service's table over the table's size (services[].table), or 1/n
	// of the n routable backends under round_robin; 0 outside the
	// routable set.
	TableShare float64 `json:"table_share"`
	// UDP are the backend's UDP pairs; only in a UDP service.
	UDP *BackendUDP `json:"udp,omitempty"`
	// Timestamps is whether the backend's last SYN-ACK to a client SYN
	// with TCP timestamps carried them: yes, no (its
	// net.ipv4.tcp_timestamps is 0) or unknown (none seen yet). XLB
	// rewrites the timestamps of a pair toward the backend only when
	// both SYNs carried them (issue 36).
	Timestamps Timestamps `json:"timestamps"`
}

// BackendHealth is a backend's active health checks (DESIGN §6b).
type BackendHealth struct {
	// Healthy: passing (rise successes since the last failure spell, or
	// the first check passed). False until the first check answered.
	Healthy bool `json:"healthy"`
	// LastResult is ok or fail ("" before the first check), at
	// LastCheckUnixMs (0 before), taking LastCheckMs; LastError says why
	// it failed ("" when it passed).
	LastResult      HealthResult `json:"last_result"`
	LastCheckUnixMs int64        `json:"last_check_unix_ms"`
	LastCheckMs     float64      `json:"last_check_ms"`
	LastError       string       `json:"last_error"`
	// ChecksOKTotal and ChecksFailedTotal count results since the backend
	// was discovered.
	ChecksOKTotal     uint64 `json:"checks_ok_total"`
	ChecksFailedTotal uint64 `json:"checks_failed_total"`
}

// BGP is the embedded BGP speaker's sessions and routes.
type BGP struct {
	Peers []BGPPeer `json:"peers"`
	// Announced are the prefixes announced now to at least one
	// established peer, e.g. "192.0.2.10/32": none while the instance
	// is not ready, drained or shutting down, or no session is up.
	Announced []string `json:"announced"`
}

// BGPPeer is one configured peer.
type BGPPeer struct {
	Address string `json:"address"`
	ASN     uint32 `json:"asn"`
	// State is idle, connect, active, opensent, openconfirm or
	// established (RFC 4271 §8.2.2).
	State string `json:"state"`
	// UptimeSeconds is how long the session has been established (0
	// when it is not).
	UptimeSeconds int64 `json:"uptime_seconds"`
}

// Drain is an operator's drain of the instance: when it began and who
// asked for it, kept in the runtime directory (/run/xlb) across restarts
// and crashes of the daemon (issue 28).
type Drain struct {
	// SinceUnixMs is when the drain request was carried out.
	SinceUnixMs int64 `json:"since_unix_ms"`
	// By says who asked and from where: "unix socket uid 0 pid 4242" or
	// "http 192.0.2.7:51234 user operator".
	By string `json:"by"`
	// Restored is true when this process took the drain over from a
	// previous one (a restart, a crash, a hot upgrade) rather than
	// receiving the request itself.
	Restored bool `json:"restored"`
}

// DrainState answers POST /api/v1/drain and /api/v1/undrain: the
// instance's state after the request.
type DrainState struct {
	Drained bool `json:"drained"`
}

// Config is what the config watcher knows about the file on disk
// (DESIGN §1, last paragraph).
type Config struct {
	Path string `json:"path"`
	// ReloadRequired is true when the file on disk is valid and differs
	// from the running config in ChangedKeys (top-level keys);
	// `systemctl reload xlb` (a hand-off, DESIGN §6) applies it without
	// losing a connection.
	ReloadRequired bool     `json:"reload_required"`
	ChangedKeys    []string `json:"changed_keys"`
	// Invalid is the validation error of the file on disk ("" when it is
	// valid); Missing is true when the file was deleted.
	Invalid string `json:"invalid"`
	Missing bool   `json:"missing"`
}
