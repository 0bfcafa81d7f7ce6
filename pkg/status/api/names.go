package api

// The words below are shared by the daemon, the data path, the status
// document, the metrics and xlbctl. Each is spelled here once; every Go
// consumer uses the constant. The console (console/console.js) cannot
// import Go: it shows the names it finds in the document and keeps only
// their CSS classes, in one table.
type (
	// Lifecycle is the instance's lifecycle state (DESIGN §3): the
	// document's lifecycle, the state label of xlb_lifecycle_state and
	// the daemon's snapshot.Snapshot.Lifecycle.
	Lifecycle string
	// BackendState is the state of a listed backend (DESIGN §3): the
	// document's backends[].state and the state label of
	// xlb_backend_state and xlb_backends, decided by
	// snapshot.Snapshot.BackendState.
	BackendState string
	// HealthResult is the outcome of one active health check (DESIGN
	// §6b).
	HealthResult string
	// Timestamps is what the data path last saw of a backend's TCP
	// timestamps (issue 36; dataplane.TimestampState): the document's
	// backends[].timestamps and the state label of
	// xlb_backend_tcp_timestamps.
	Timestamps string
	// Reason is why the instance is not ready: the body of a 503 from
	// /readyz and the document's readiness.reason (DESIGN §3), decided by
	// snapshot.Snapshot.Readiness. The strings are stable; orchestrators
	// and scripts match them. With several services, the instance's
	// reason may be several services' own: "service web:
	// no_routable_backends; service api: backend_provider_unhealthy"
	// (DESIGN §9); a service's (services[].readiness.reason) is always
	// one bare word.
	Reason string
	// FeatureState is what XLB found for an optional kernel feature: the
	// document's features[].state (dataplane.FeatureStatus.State).
	FeatureState string
	// Path is what the data path does given a feature's state: the
	// document's features[].path, xdp_attachments[].via and
	// maintenance.close_events.path (dataplane's Path* constants).
	Path string
	// ServiceState is a service's place in the data path (DESIGN §9):
	// the document's services[].state, the state label of
	// xlb_service_state and snapshot.Service.State.
	ServiceState string
)

// Service states.
const (
	ServiceServing  ServiceState = "serving"  // in the config: new connections to it are balanced
	ServiceDraining ServiceState = "draining" // removed by a reload: its pairs flow until they end, new connections to it pass to the kernel
)

// ServiceStates returns both service states in order (xlb_service_state
// exports one series for each).
func ServiceStates() []ServiceState { return []ServiceState{ServiceServing, ServiceDraining} }

// Lifecycle states, in the order the daemon passes through them.
const (
	Starting     Lifecycle = "starting"      // attaching XDP, resolving backends, awaiting the first maintenance sample
	Running      Lifecycle = "running"       // serving; readiness depends on the sample and the backends
	HandingOver  Lifecycle = "handing_over"  // hot upgrade (SIGUSR2): still serving while a new process takes over (DESIGN §6)
	ShuttingDown Lifecycle = "shutting_down" // the shutdown window (DESIGN §6): readiness 503, RSTs, then detach
)

// Backend states.
const (
	Routable    BackendState = "routable"    // discovered and eligible for new connections
	Unhealthy   BackendState = "unhealthy"   // discovered and resolved, failing its active health checks: no new connections, pairs untouched
	Draining    BackendState = "draining"    // no longer routable (left discovery or unreachable), pairs still reference it
	Unreachable BackendState = "unreachable" // discovered, no usable route or neighbour, no pairs left
)

// Health check results (Backend.Health.LastResult;
// xlb_backend_health_checks_total{result}).
const (
	HealthCheckOK   HealthResult = "ok"
	HealthCheckFail HealthResult = "fail"
)

// Backend timestamp states (Backend.Timestamps): whether the backend's
// last SYN-ACK to a client SYN with TCP timestamps carried them.
const (
	TimestampsYes     Timestamps = "yes"     // it did: timestamps are negotiated and rewritten on its pairs
	TimestampsNo      Timestamps = "no"      // it did not (net.ipv4.tcp_timestamps=0): its pairs keep their timestamps unrewritten
	TimestampsUnknown Timestamps = "unknown" // no such SYN-ACK seen since the data path's state began
)

// Readiness reasons, in the order Snapshot.Readiness checks them.
const (
	ReasonShuttingDown             Reason = "shutting_down"
	ReasonStarting                 Reason = "starting"
	ReasonDraining                 Reason = "draining" // an operator drained the instance (POST /api/v1/drain)
	ReasonAwaitingDataplaneSample  Reason = "awaiting_dataplane_sample"
	ReasonDataplaneSampleStale     Reason = "dataplane_sample_stale"
	ReasonBackendProviderUnhealthy Reason = "backend_provider_unhealthy"
	ReasonNoRoutableBackends       Reason = "no_routable_backends"
	// ReasonFIBLookupFailing: new connections keep failing for lack of a
	// next hop (SYNs dropped, no pair created, over the last three
	// seconds), e.g. after something turned net.ipv4.conf.lo.forwarding
	// off (issue 13).
	ReasonFIBLookupFailing Reason = "fib_lookup_failing"
	// ReasonRemoved: a reload removed the service; its connections drain
	// (services[].readiness and /readyz?service=NAME only: a removed
	// service does not count in /readyz, DESIGN §9).
	ReasonRemoved Reason = "removed"
)

// Feature states.
const (
	FeatureAvailable FeatureState = "available" // probed and usable
	FeatureRefused   FeatureState = "refused"   // the kernel or a policy (LSM, seccomp) said no
	FeatureDisabled  FeatureState = "disabled"  // turned off by the operator (XLB_DISABLE_FEATURES)
	FeatureUnknown   FeatureState = "unknown"   // not probed yet (XDP link: probed by the first attach)
)

// Paths, by the feature whose state decides them.
const (
	PathBatchLookup Path = "batch_lookup"  // batch_map_ops: flow map read in chunks with BPF_MAP_LOOKUP_BATCH
	PathPerKey      Path = "per_key"       // batch_map_ops refused: flow map read key by key
	PathRingBuffer  Path = "ring_buffer"   // ring_buffer: close events through a BPF ring buffer
	PathPerCPUQueue Path = "per_cpu_queue" // ring_buffer refused: close events through per-CPU array queues
	PathBPFLink     Path = "bpf_link"      // xdp_bpf_link: XDP attached through a bpf_link
	PathNetlink     Path = "netlink"       // xdp_bpf_link refused: XDP attached through netlink (IFLA_XDP)
	PathNotAttached Path = "not_attached"  // xdp_bpf_link unknown: no interface attached yet
	PathNotUsed     Path = "not_used"      // bpf_for_each_map_elem: this version has no use for it
	PathPinned      Path = "pinned"        // pinning: maps, links and metadata pinned under state_dir (hot upgrade, crash survival)
	PathUnpinned    Path = "unpinned"      // pinning refused: nothing pinned, a restart or crash loses every connection
)

// Start is how a process took the data path (DESIGN §6): the document's
// upgrades.start.
type Start string

// Starts.
const (
	StartFresh      Start = "fresh"       // no pinned state: new, empty maps
	StartAdopted    Start = "adopted"     // a predecessor's pins of this layout, after a crash or restart
	StartMigrated   Start = "migrated"    // a predecessor's pins of an older layout or another max_connections, copied entry by entry
	StartHandedOver Start = "handed_over" // a running predecessor handed its pinned state and listeners over (SIGUSR2)
)

// Hot upgrade results: the result label of xlb_hot_upgrades_total.
const (
	UpgradeOK     = "ok"
	UpgradeFailed = "failed"
)

// Environment variables XLB reads.
const (
	// EnvAdminPassword holds the admin password for admin.auth.username
	// (DESIGN §1: the password never comes from the config file). The
	// daemon requires it when a username is configured; xlbctl sends it
	// with --user.
	EnvAdminPassword = "XLB_ADMIN_PASSWORD"
	// EnvDisableFeatures turns optional kernel features off,
	// comma-separated (dataplane.AllFeatures), as if the host refused
	// them; the document's features[].state then reads disabled.
	EnvDisableFeatures = "XLB_DISABLE_FEATURES"
)

// Lifecycles returns every lifecycle state in order (xlb_lifecycle_state
// exports one series for each).
func Lifecycles() []Lifecycle { return []Lifecycle{Starting, Running, HandingOver, ShuttingDown} }

// BackendStates returns every backend state in order of precedence: when
// two listed backends share a name, the series under that name shows the
// earlier state.
func BackendStates() []BackendState {
	return []BackendState{Routable, Unhealthy, Draining, Unreachable}
}

// HealthResults returns both health check results in order.
func HealthResults() []HealthResult { return []HealthResult{HealthCheckOK, HealthCheckFail} }

// TimestampStates returns every backend timestamp state in order of
// precedence: when two listed backends share a name, the series under
// that name shows the earlier state.
func TimestampStates() []Timestamps {
	return []Timestamps{TimestampsNo, TimestampsYes, TimestampsUnknown}
}
