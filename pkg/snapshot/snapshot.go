// Package snapshot is the one-way hand-off from the running instance to the
// status API and the metrics: the lifecycle publishes an immutable Snapshot
// whenever something changes (state, maintenance sample, backend set,
// config watch), and readers load the latest one. Readers never touch BPF
// maps or the instance's internals (DESIGN §3, §4, §8).
package snapshot

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// Lifecycle states (DESIGN §3).
const (
	Starting     = "starting"
	Running      = "running"
	ShuttingDown = "shutting_down"
)

// Readiness reasons, stable strings for /readyz (DESIGN §3).
const (
	ReasonStarting                 = "starting"
	ReasonShuttingDown             = "shutting_down"
	ReasonAwaitingDataplaneSample  = "awaiting_dataplane_sample"
	ReasonDataplaneSampleStale     = "dataplane_sample_stale"
	ReasonBackendProviderUnhealthy = "backend_provider_unhealthy"
	ReasonNoRoutableBackends       = "no_routable_backends"
)

// PortMap is one listen port mapping.
type PortMap struct {
	LocalPort  uint16
	RemotePort uint16
}

// ConfigState is what the config watcher knows about the file on disk.
type ConfigState struct {
	Path string
	// RestartRequired is true when the file on disk is valid and differs
	// from the loaded config; ChangedKeys names the differing top-level keys.
	RestartRequired bool
	ChangedKeys     []string
	// Invalid holds the validation error of the file on disk when it does
	// not parse (then RestartRequired is false); Missing is true when the
	// file was deleted.
	Invalid string
	Missing bool
}

// Snapshot is everything the status API and metrics show. Treat it as
// read-only: it is shared between readers.
type Snapshot struct {
	Name     string
	Version  string
	Revision string

	Lifecycle string    // Starting, Running or ShuttingDown
	StartedAt time.Time // process start
	// ShutdownDeadline is when the shutdown window ends (zero before).
	ShutdownDeadline time.Time

	Listen     netip.Addr
	Ports      []PortMap
	SNAT       netip.Addr
	XDPMode    string                 // configured: auto, native or generic
	Attached   []dataplane.Attachment // what is attached, by interface name
	Interfaces []string               // configured (resolved) interfaces
	// Features are the optional kernel features probed at startup and
	// the paths taken (dataplane.Dataplane.Features).
	Features dataplane.Features

	// Sample is the latest maintenance sample (nil before the first
	// successful cycle; afterwards every cycle's, failed or not:
	// Sample.Maintenance says which); SampleInterval is the loop's
	// period, used to judge staleness.
	Sample         *maintenance.Sample
	SampleInterval time.Duration

	Provider      string // "static", "kubernetes"
	ProviderError string // non-empty while the provider is unhealthy
	Backends      []backend.Status

	Config ConfigState
}

// SampleAge is how old the sample is at now (0 without a sample).
func (s *Snapshot) SampleAge(now time.Time) time.Duration {
	if s.Sample == nil {
		return 0
	}
	return now.Sub(s.Sample.Time)
}

// StaleAfter is the sample age from which readiness reports
// dataplane_sample_stale: three missed cycles, never under 5 s, and never
// under five cycle durations (a cycle that overruns the interval is
// followed by the next after a tenth of it, maintenance.Loop.Run, so slow
// cycles alone must not read as a stopped loop). Failed cycles publish
// samples too, so only a maintenance loop that stopped or hangs lets a
// sample age past it.
func (s *Snapshot) StaleAfter() time.Duration {
	d := max(3*s.SampleInterval, 5*time.Second)
	if s.Sample != nil {
		d = max(d, 5*s.Sample.Duration)
	}
	return d
}

// SampleStale reports whether the maintenance loop has stopped publishing:
// a sample exists and is older than StaleAfter. Readiness reports it as
// dataplane_sample_stale, and the daemon withholds the systemd watchdog
// ping while it holds.
func (s *Snapshot) SampleStale(now time.Time) bool {
	return s.Sample != nil && s.SampleAge(now) > s.StaleAfter()
}

// Routable counts discovered backends the data path may pick.
func (s *Snapshot) Routable() int {
	n := 0
	for _, b := range s.Backends {
		if b.Discovered && b.State == backend.Routable {
			n++
		}
	}
	return n
}

// Readiness decides /readyz: ready, or the first reason that applies in
// this order: shutting_down, starting, awaiting_dataplane_sample,
// dataplane_sample_stale, backend_provider_unhealthy, no_routable_backends.
//
// Failing maintenance cycles do not make the instance unready: the data
// path forwards every packet without the loop, which only cleans up pairs
// and refreshes figures, and taking the instance out of rotation would
// not mend it. Such cycles still publish fresh samples (with
// Sample.Maintenance.Failing), so readiness stays ready; they show in the
// status API's maintenance object and in xlb_maintenance_failing and
// xlb_maintenance_errors_total instead. dataplane_sample_stale means
// samples stopped: the loop stopped or a cycle hangs.
func (s *Snapshot) Readiness(now time.Time) (bool, string) {
	switch {
	case s.Lifecycle == ShuttingDown:
		return false, ReasonShuttingDown
	case s.Lifecycle != Running:
		return false, ReasonStarting
	case s.Sample == nil:
		return false, ReasonAwaitingDataplaneSample
	case s.SampleStale(now):
		return false, ReasonDataplaneSampleStale
	case s.ProviderError != "":
		return false, ReasonBackendProviderUnhealthy
	case s.Routable() == 0:
		return false, ReasonNoRoutableBackends
	}
	return true, ""
}

// BackendState is the state the status API reports for a backend
// (DESIGN §3): routable; draining when it is no longer routable (left
// discovery or became unreachable) but pairs still reference it;
// unreachable when discovered but not routable and idle. A departed backend
// without pairs is not listed (ok false).
func (s *Snapshot) BackendState(b backend.Status) (state string, ok bool) {
	var active uint64
	if s.Sample != nil {
		if bs, found := s.Sample.Backend(b.ID); found {
			active = bs.Active + bs.TimeWait
		}
	}
	switch {
	case b.Discovered && b.State == backend.Routable:
		return "routable", true
	case active > 0:
		return "draining", true
	case b.Discovered:
		return "unreachable", true
	}
	return "", false
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
// it. Concurrent Updates must be serialised by the caller.
func (st *Store) Update(f func(*Snapshot)) {
	var next Snapshot
	if cur := st.p.Load(); cur != nil {
		next = *cur
	}
	f(&next)
	st.p.Store(&next)
}
