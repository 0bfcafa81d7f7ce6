package api

// The words below are shared by the daemon, the status document, the
// metrics and xlbctl. Each is spelled here once; every Go consumer uses the
// constant. The console (console/console.js) cannot import Go: it shows the
// names it finds in the document and keeps only their CSS classes, in one
// table.
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
	// Reason is why the instance is not ready: the body of a 503 from
	// /readyz and the document's readiness.reason (DESIGN §3), decided by
	// snapshot.Snapshot.Readiness. The strings are stable; orchestrators
	// and scripts match them.
	Reason string
)

// Lifecycle states, in the order the daemon passes through them.
const (
	Starting     Lifecycle = "starting"      // attaching XDP, resolving backends, awaiting the first maintenance sample
	Running      Lifecycle = "running"       // serving; readiness depends on the sample and the backends
	ShuttingDown Lifecycle = "shutting_down" // the shutdown window (DESIGN §6): readiness 503, RSTs, then detach
)

// Backend states.
const (
	Routable    BackendState = "routable"    // discovered and eligible for new connections
	Draining    BackendState = "draining"    // no longer routable (left discovery or unreachable), pairs still reference it
	Unreachable BackendState = "unreachable" // discovered, no usable route or neighbour, no pairs left
)

// Readiness reasons, in the order Snapshot.Readiness checks them.
const (
	ReasonShuttingDown             Reason = "shutting_down"
	ReasonStarting                 Reason = "starting"
	ReasonAwaitingDataplaneSample  Reason = "awaiting_dataplane_sample"
	ReasonDataplaneSampleStale     Reason = "dataplane_sample_stale"
	ReasonBackendProviderUnhealthy Reason = "backend_provider_unhealthy"
	ReasonNoRoutableBackends       Reason = "no_routable_backends"
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
func Lifecycles() []Lifecycle { return []Lifecycle{Starting, Running, ShuttingDown} }

// BackendStates returns every backend state in order of precedence: when
// two listed backends share a name, the series under that name shows the
// earlier state.
func BackendStates() []BackendState { return []BackendState{Routable, Draining, Unreachable} }
