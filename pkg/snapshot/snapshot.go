// Package snapshot is the one-way hand-off from the running instance to the
// status API and the metrics: the daemon publishes an immutable Snapshot
// whenever something changes (state, maintenance sample, data-path
// counters, backend set, config watch), and readers load the latest one.
// Readers never touch BPF maps or the instance's internals (DESIGN §3, §4,
// §8). Everything the status document and the metrics show is in it, so
// both show the same value of every counter.
package snapshot

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/configwatch"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// Snapshot is everything the status API and metrics show. Treat it as
// read-only: it is shared between readers.
type Snapshot struct {
	Name     string
	Version  string
	Revision string

	Lifecycle api.Lifecycle
	// Drained: an operator drained the instance (DESIGN §6a); readiness
	// answers draining, forwarding is unchanged.
	Drained bool
	// DrainedSince, DrainedBy and DrainRestored describe the drain while
	// Drained (issue 28): when it began, who asked, and whether this
	// process took it over from a previous one.
	DrainedSince  time.Time
	DrainedBy     string
	DrainRestored bool
	StartedAt     time.Time // process start
	// ShutdownDeadline is when the shutdown window ends (zero before);
	// ShutdownResetsFrom when it begins: the stop, or after the BGP
	// withdraw delay (issue 28).
	ShutdownDeadline   time.Time
	ShutdownResetsFrom time.Time

	Listen netip.Addr
	Ports  []config.PortMapping
	// SNAT are the backend-facing source addresses, resolved, in config
	// order.
	SNAT       []netip.Addr
	XDPMode    string                 // configured: auto, native or generic
	Attached   []dataplane.Attachment // what is attached, by interface name
	Interfaces []string               // configured (resolved) interfaces
	// Features are the optional kernel features probed at startup and
	// the paths taken (dataplane.Dataplane.Features).
	Features dataplane.Features
	// RetiredSNAT are the retired SNAT spaces live pairs may still hold
	// (dataplane.Dataplane.RetiredSNAT), as of the latest maintenance
	// sample.
	RetiredSNAT []dataplane.RetiredSNAT

	// Sample is the latest maintenance sample (nil before the first
	// successful cycle; afterwards every cycle's, failed or not:
	// Sample.Maintenance says which); SampleInterval is the loop's
	// period, used to judge staleness. Set with AddSample.
	Sample         *maintenance.Sample
	SampleInterval time.Duration
	// MaintenanceDurations are the wall-clock durations of the successful
	// maintenance cycles since the loop started (AddSample).
	MaintenanceDurations DurationHistogram

	// Counters are the data path's global counters summed over CPUs, as
	// last read: with each maintenance sample (AddSample) and, while no
	// cycle runs, by the daemon each second of the shutdown window
	// (SetCounters). Nil before the first read. CountersError is the
	// latest read's error ("" when it succeeded); Counters then keep the
	// latest successful read.
	Counters      *dataplane.Counters
	CountersError string
	// FIB is the recent history of the next-hop failure and pair creation
	// counters from the same reads, for readiness reason
	// fib_lookup_failing (FIBHistory.Failing).
	FIB FIBHistory

	Provider      string // "static", "kubernetes"
	ProviderError string // the provider's latest error; "" while it is healthy
	// ProviderSynced: the provider's first set was applied. A provider
	// that synced keeps serving its last set through later errors
	// (readiness stays ready); one that never synced makes the instance
	// unready (backend_provider_unhealthy, issue 14).
	ProviderSynced bool
	// ProviderStale: the provider has not synced, and the routable set
	// is the one handed over or adopted from the predecessor (a reload or
	// a crash-restart during a Kubernetes API outage). It counts as
	// synced for readiness (issue 28); status and metrics show it.
	ProviderStale bool
	Backends      []backend.Status

	// Services are every service in the data path, serving ones in the
	// config's order, then draining ones (DESIGN §9). Listen, Ports,
	// Provider* and Backends above repeat the only service's while there
	// is exactly one (schema 1 of the status API). Readers use
	// ServiceList, which stands in for an empty Services.
	Services []Service
	// Form is the config file's form: a top-level file's one service
	// answers /readyz with a bare reason, as before services; a
	// services: file names the service (Readiness).
	Form config.Form

	Config configwatch.State

	// Upgrades is how this process came to own the data path and how the
	// hot upgrades (SIGUSR2 hand-offs) of its pinned state went.
	Upgrades Upgrades

	// HostSettings are the host settings the instance guards and how often
	// it put each back after something reset it (hostnet.SysctlGuard), in
	// a fixed order; nil before the instance is up.
	HostSettings []HostSetting

	// BGP is the speaker's view; nil without a bgp section (bgp.go).
	BGP *BGP
}

// HostSetting is one guarded host setting and its repairs.
type HostSetting struct {
	// Name is the dotted sysctl name, e.g. net.ipv4.conf.lo.forwarding
	// (the setting label of xlb_host_setting_repairs_total).
	Name string
	// Repairs counts the resets the guard undid since the instance started.
	Repairs uint64
}

// Upgrades describes the pinned state's hand-offs (DESIGN §6).
type Upgrades struct {
	// OK and Failed count hand-offs since the pinned state was created
	// (they live in its metadata record, so they survive hand-offs and
	// crashes; a stop with SIGTERM removes them with the pins).
	OK, Failed uint64
	// Start is how this process took the data path: api.StartFresh,
	// StartAdopted, StartMigrated or StartHandedOver.
	Start api.Start
	// AdoptedPairs are the connection pairs found in the pinned flow map
	// at start (0 when fresh).
	AdoptedPairs int
	// LastFailure is why the latest failed hand-off failed, as this
	// process saw it ("" when none failed since it started).
	LastFailure string
}

// Source is the read side of a Store: what status and metrics get, so
// that only the daemon, which holds the Store, can publish.
type Source interface {
	// Load returns the latest snapshot, or nil before the first Publish.
	Load() *Snapshot
}

// Store holds the latest snapshot.
type Store struct {
	p atomic.Pointer[Snapshot]
}

// Load returns the latest snapshot; never nil after the first Publish.
func (st *Store) Load() *Snapshot { return st.p.Load() }

// Publish replaces the snapshot. s must not be modified afterwards.
func (st *Store) Publish(s *Snapshot) { st.p.Store(s) }

// Update copies the latest snapshot, applies f to the copy and publishes
// it. The copy is shallow: f replaces slice, map and pointer fields with
// new values and never modifies what they point to, which readers of the
// published snapshot may hold. Concurrent Updates must be serialised by
// the caller.
func (st *Store) Update(f func(*Snapshot)) {
	var next Snapshot
	if cur := st.p.Load(); cur != nil {
		next = *cur
	}
	f(&next)
	st.p.Store(&next)
}
