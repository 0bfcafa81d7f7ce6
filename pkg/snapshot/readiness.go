package snapshot

import (
	"time"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/status/api"
)

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

// Routable counts the discovered backends the data path may pick, over
// every service (ServiceList).
func (s *Snapshot) Routable() int {
	n := 0
	for _, svc := range s.ServiceList() {
		n += svc.Routable()
	}
	return n
}

// Readiness decides /readyz: ready, or the first reason that applies in
// this order: shutting_down, starting, draining, awaiting_dataplane_sample,
// dataplane_sample_stale (instance-wide, bare); then each serving
// service's own reason, backend_provider_unhealthy (the provider never
// synced and there is no inherited set: ProviderStale counts as synced)
// or no_routable_backends, as "service NAME: REASON" joined by "; "
// (DESIGN §9; bare for a top-level file's one service, as before
// services); then fib_lookup_failing (SYNs keep being dropped for lack of
// a next hop and no pair is created: FIBHistory.Failing; instance-wide,
// bare). A draining service (removed by a reload) does not count: it takes
// no new connections. ServiceReadiness answers for one service.
// An instance handing over (hot upgrade) is still serving, so it stays
// ready; its maintenance loop is stopped on purpose meanwhile, so its
// samples are not judged stale.
//
// Failing maintenance cycles do not make the instance unready: the data
// path forwards every packet without the loop, which only cleans up pairs
// and refreshes figures, and taking the instance out of rotation would
// not mend it. Such cycles still publish fresh samples (with
// Sample.Maintenance.Failing), so readiness stays ready; they show in the
// status API's maintenance object and in xlb_maintenance_failing and
// xlb_maintenance_errors_total instead. dataplane_sample_stale means
// samples stopped: the loop stopped or a cycle hangs.
func (s *Snapshot) Readiness(now time.Time) (bool, api.Reason) {
	if r := s.instanceReason(now); r != "" {
		return false, r
	}
	if r := s.serviceReasons(); r != "" {
		return false, r
	}
	if s.FIB.Failing() {
		return false, api.ReasonFIBLookupFailing
	}
	return true, ""
}

// instanceReason is the first instance-wide reason that applies before
// the services' own: shutting_down, starting, draining,
// awaiting_dataplane_sample, dataplane_sample_stale; "" when none does.
func (s *Snapshot) instanceReason(now time.Time) api.Reason {
	switch {
	case s.Lifecycle == api.ShuttingDown:
		return api.ReasonShuttingDown
	case s.Lifecycle != api.Running && s.Lifecycle != api.HandingOver:
		return api.ReasonStarting
	case s.Drained:
		return api.ReasonDraining
	case s.Sample == nil:
		return api.ReasonAwaitingDataplaneSample
	case s.Lifecycle == api.Running && s.SampleStale(now):
		return api.ReasonDataplaneSampleStale
	}
	return ""
}

// BackendState is the state the status API and the metrics report for a
// backend (DESIGN §3), the one place where the backend manager's states
// become the API's: routable; unhealthy while discovered and resolved but
// failing its health checks (with or without pairs: they are untouched);
// draining when it is no longer routable (left discovery or became
// unreachable) but pairs still reference it, or quiesced (weight 0); unreachable when discovered
// but not routable and idle. A departed backend without pairs is not
// listed (ok false).
func (s *Snapshot) BackendState(b backend.Status) (state api.BackendState, ok bool) {
	var active uint64
	if s.Sample != nil {
		if bs, found := s.Sample.Backend(b.ID); found {
			active = bs.Active + bs.TimeWait
		}
	}
	switch {
	case b.Discovered && b.State == backend.Routable:
		return api.Routable, true
	case b.Discovered && b.State == backend.Unhealthy:
		return api.Unhealthy, true
	case b.Discovered && b.State == backend.Quiesced:
		// weight 0: takes no new connections, its pairs flow on
		return api.Draining, true
	case active > 0:
		return api.Draining, true
	case b.Discovered:
		return api.Unreachable, true
	}
	return "", false
}
