package snapshot

import (
	"net/netip"
	"strings"
	"time"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/sched"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// Backend is one backend as its service's manager reports it: the read
// side (pkg/status, pkg/metrics) names it through the snapshot.
type Backend = backend.Status

// ServiceState is a service's place in the data path (DESIGN §9): the
// status API's services[].state and the state label of
// xlb_service_state.
type ServiceState = api.ServiceState

const (
	// ServiceServing: in the config; new connections to it are balanced.
	ServiceServing = api.ServiceServing
	// ServiceDraining: removed by a reload (or a config a restart no
	// longer has) while pairs of it live: those keep flowing until they
	// end, new connections to it pass to the kernel.
	ServiceDraining = api.ServiceDraining
)

// Service is one service as the daemon last published it (DESIGN §9).
type Service struct {
	ID        uint16 // the data path's service id (flow entries carry it)
	Name      string
	State     ServiceState
	Listen    netip.Addr
	Proto     string
	Ports     []config.PortMapping
	Scheduler string
	// Maglev is the configured maglev section with its size resolved
	// (config.Service.TableSize); nil unless Scheduler is maglev.
	Maglev *config.Maglev
	// Schedule is the table the data path holds for a weighted round
	// robin or Maglev service (dataplane.Dataplane.Schedule); zero for
	// round robin and before the first table.
	Schedule dataplane.Schedule

	Provider       string // "static", "kubernetes"
	ProviderError  string // the provider's latest error; "" while it is healthy
	ProviderSynced bool   // the provider delivered its first set
	ProviderStale  bool   // the provider lost its source and keeps its last set

	// Backends are the service's backends; backend.Status.ID is the
	// member id (per service and backend address) that keys the
	// per-backend counters and the maintenance sample's
	// BackendSample.ID.
	Backends []backend.Status

	// UDPUnrepliedMax is a UDP service's cap on its pairs without a reply
	// (udp_unreplied_max, resolved: config.Config.UDPUnrepliedMax); 0 for
	// TCP services (issue 31). The daemon sets it; a draining service
	// keeps the last value.
	UDPUnrepliedMax uint32

	// Counts are the service's connection counters as of Snapshot.Sample
	// (the daemon sets them with each sample; zero before the first).
	// The gauges (active, timewait) are summed from the members' samples
	// instead (Snapshot.ServiceConnections).
	Counts ServiceCounts
}

// ServiceCounts are one service's connection counters, by the DESIGN §4
// counting rule, since the service took its id. They never decrease while
// the service keeps its id: a member that departs and is forgotten keeps
// its share in them (they are counters for Prometheus,
// xlb_connections_*_total{service}).
type ServiceCounts struct {
	// Opened counts the pairs the data path created for the service.
	Opened uint64
	// Closed counts its connections closed by initiator and reason,
	// once each, when the data path saw them become terminal.
	Closed maintenance.Closed
	// Orphaned and EmbryonicExpired count the reaper's removals of its
	// idle pairs and of its pairs whose handshake never completed.
	Orphaned         uint64
	EmbryonicExpired uint64
	// UDP are the service's UDP pair counters (issue 31); the TCP ones
	// above never count a UDP pair.
	UDP UDPCounts
}

// UDPCounts are a service's UDP pair counters since it took its id
// (issue 31), with ServiceCounts' rule: a departed member keeps its share.
// The daemon sums them from its members' samples:
// maintenance.BackendSample.UDPOpened and the reaper's per-member UDP
// counts; with one service they are the instance's (maintenance.UDPSample).
type UDPCounts struct {
	// Opened counts the UDP pairs the data path created for the service.
	Opened uint64
	// ExpiredUnreplied and ExpiredReplied count its pairs the reaper
	// removed after their timeout: udp_timeout_secs without a reply,
	// udp_stream_timeout_secs with one.
	ExpiredUnreplied, ExpiredReplied uint64
}

// ServiceUDP are one UDP service's pair figures as of the snapshot's
// sample (issue 31): the gauges from the sample (Active summed over its
// members' BackendSample.UDPActive, Unreplied and OverCap from its
// maintenance.ServiceSample), the counters from Service.Counts.UDP.
type ServiceUDP struct {
	UnrepliedMax uint32 // Service.UDPUnrepliedMax
	Active       uint64 // live UDP pairs
	// Unreplied and Replied split Active: pairs without a reply yet
	// (what udp_unreplied_max caps) and the others. The unreplied count
	// is read after the members' gauges, so it can only be high; Replied
	// is Active less Unreplied, never negative.
	Unreplied, Replied uint64
	// OverCap counts the first datagrams the data path passed to the
	// kernel because the service had UnrepliedMax unreplied pairs, since
	// the service took its id.
	OverCap uint64
	UDPCounts
}

// ServiceConnections are one service's connection figures as of the
// snapshot's sample: the gauges summed over the service's members'
// samples, the counters from Service.Counts.
type ServiceConnections struct {
	Active   uint64 // open or half-closed pairs
	TimeWait uint64 // both FINs seen, waiting out the time-wait
	ServiceCounts
}

// ServiceList returns the services: Services, or, for a snapshot that has
// none (built by a test, or by a daemon before issue 29), the one service
// its top-level fields describe, named after the instance, serving. It is
// empty before the instance is up (no listen address, provider or
// backend published yet).
func (s *Snapshot) ServiceList() []Service {
	if len(s.Services) > 0 {
		return s.Services
	}
	if !s.Listen.IsValid() && s.Provider == "" && len(s.Backends) == 0 && !s.ProviderSynced && !s.ProviderStale {
		return nil
	}
	one := Service{
		Name: s.Name, State: ServiceServing, Listen: s.Listen, Proto: "tcp", Ports: s.Ports,
		Scheduler: config.SchedulerRoundRobin, Provider: s.Provider, ProviderError: s.ProviderError,
		ProviderSynced: s.ProviderSynced, ProviderStale: s.ProviderStale, Backends: s.Backends,
	}
	if smp := s.Sample; smp != nil {
		one.Counts = ServiceCounts{Opened: smp.Opened, Closed: smp.Closed, Orphaned: smp.Orphaned, EmbryonicExpired: smp.EmbryonicExpired,
			UDP: UDPCounts{Opened: smp.UDP.Opened, ExpiredUnreplied: smp.UDP.ExpiredUnreplied, ExpiredReplied: smp.UDP.ExpiredReplied}}
	}
	return []Service{one}
}

// LookupService returns the service called name (ServiceList).
func (s *Snapshot) LookupService(name string) (Service, bool) {
	for _, svc := range s.ServiceList() {
		if svc.Name == name {
			return svc, true
		}
	}
	return Service{}, false
}

// ServiceConnections sums the service's gauges over its members' samples
// (each listed backend's BackendSample, by member id) and adds its
// counters; all zero before the first sample.
func (s *Snapshot) ServiceConnections(svc Service) ServiceConnections {
	out := ServiceConnections{ServiceCounts: svc.Counts}
	if s.Sample == nil {
		return ServiceConnections{}
	}
	for _, b := range svc.Backends {
		if bs, found := s.Sample.Backend(b.ID); found {
			out.Active += bs.Active
			out.TimeWait += bs.TimeWait
		}
	}
	return out
}

// IsUDP reports whether the service balances UDP (proto udp).
func (svc Service) IsUDP() bool { return svc.Proto == dataplane.ProtoUDP }

// ServiceUDP returns a UDP service's pair figures (ServiceUDP); ok is
// false for a TCP service. The gauges are 0 before the first sample.
func (s *Snapshot) ServiceUDP(svc Service) (out ServiceUDP, ok bool) {
	if !svc.IsUDP() {
		return ServiceUDP{}, false
	}
	out = ServiceUDP{UnrepliedMax: svc.UDPUnrepliedMax, UDPCounts: svc.Counts.UDP}
	if s.Sample == nil {
		return out, true
	}
	for _, b := range svc.Backends {
		if bs, found := s.Sample.Backend(b.ID); found {
			out.Active += bs.UDPActive
		}
	}
	for _, ss := range s.Sample.Services {
		if ss.ID == svc.ID {
			out.Unreplied, out.OverCap = ss.UDPUnreplied, ss.UDPOverCap
			break
		}
	}
	out.Replied = out.Active - min(out.Unreplied, out.Active)
	return out, true
}

// Routable counts the service's discovered backends the data path may
// pick.
func (svc Service) Routable() int {
	n := 0
	for _, b := range svc.Backends {
		if b.Discovered && b.State == backend.Routable {
			n++
		}
	}
	return n
}

// reason is the service's own readiness reason ("" when it has none):
// removed for a draining service, then backend_provider_unhealthy (the
// provider never synced and there is no inherited set) and
// no_routable_backends.
func (svc Service) reason() api.Reason {
	switch {
	case svc.State == ServiceDraining:
		return api.ReasonRemoved
	case !svc.ProviderSynced && !svc.ProviderStale:
		return api.ReasonBackendProviderUnhealthy
	case svc.Routable() == 0:
		return api.ReasonNoRoutableBackends
	}
	return ""
}

// ServiceReadiness decides readiness for the service called name
// (/readyz?service=NAME): the instance-wide reasons first (shutting_down,
// starting, draining, awaiting_dataplane_sample, dataplane_sample_stale:
// Readiness), then the service's own (removed for a service a reload
// removed, backend_provider_unhealthy, no_routable_backends), then
// fib_lookup_failing, which is instance-wide. ok is false when no service
// has that name. The reason is bare, never prefixed with the name.
func (s *Snapshot) ServiceReadiness(name string, now time.Time) (ready bool, reason api.Reason, ok bool) {
	svc, ok := s.LookupService(name)
	if !ok {
		return false, "", false
	}
	if r := s.instanceReason(now); r != "" {
		return false, r, true
	}
	if r := svc.reason(); r != "" {
		return false, r, true
	}
	if s.FIB.Failing() {
		return false, api.ReasonFIBLookupFailing, true
	}
	return true, "", true
}

// ServiceReady reports whether the service called name is ready
// (ServiceReadiness): false for an unknown or removed service. The BGP
// speaker announces a service's address while some service on it is
// ready (DESIGN §9).
func (s *Snapshot) ServiceReady(name string, now time.Time) bool {
	ready, _, _ := s.ServiceReadiness(name, now)
	return ready
}

// serviceReasons are the serving services' own reasons, in service
// order, each "service NAME: REASON", joined by "; " (DESIGN §9); the
// bare reason for a top-level file's one service, as before services
// (issue 29). "" when every serving service has none; no_routable_backends
// when there is no service at all.
func (s *Snapshot) serviceReasons() api.Reason {
	svcs := s.ServiceList()
	var serving []Service
	for _, svc := range svcs {
		if svc.State != ServiceDraining {
			serving = append(serving, svc)
		}
	}
	if len(serving) == 0 {
		return api.ReasonNoRoutableBackends
	}
	if s.Form == config.FormTopLevel && len(serving) == 1 {
		return serving[0].reason()
	}
	var parts []string
	for _, svc := range serving {
		if r := svc.reason(); r != "" {
			parts = append(parts, "service "+svc.Name+": "+string(r))
		}
	}
	return api.Reason(strings.Join(parts, "; "))
}

// SchedulerName is the service's scheduler as the config names it (""
// means round_robin, as in dataplane.ServiceSettings).
func (svc Service) SchedulerName() string {
	if svc.Scheduler == "" {
		return config.SchedulerRoundRobin
	}
	return svc.Scheduler
}

// MaglevSettings returns a Maglev service's hash and table size: the
// config's as the daemon resolved them, else what its table was built
// with (a draining service has no config), else the defaults. ok is false
// for the other schedulers.
func (svc Service) MaglevSettings() (hash string, size uint32, ok bool) {
	if svc.Scheduler != config.SchedulerMaglev {
		return "", 0, false
	}
	hash, size = config.MaglevHashFiveTuple, svc.Schedule.Len
	if svc.Schedule.Hash != "" {
		hash = svc.Schedule.Hash
	}
	if m := svc.Maglev; m != nil {
		if m.Hash != "" {
			hash = m.Hash
		}
		if m.TableSize != 0 {
			size = m.TableSize
		}
	}
	return hash, size, true
}

// TableScheduler reports whether the service's scheduler builds a
// schedule (weighted_round_robin, maglev); round robin does not.
func (svc Service) TableScheduler() bool {
	return svc.Scheduler == config.SchedulerWeightedRoundRobin || svc.Scheduler == config.SchedulerMaglev
}

// Overfull reports whether a Maglev service's table has fewer than
// sched.MinSlotsPerMember slots per routable backend (routable > size/100):
// removing a backend then moves more than 1 % of the other backends'
// connections. The size is the table's (Schedule.Len), or the
// configured one before the first table. Always false for the other
// schedulers.
func (svc Service) Overfull() bool {
	if svc.Scheduler != config.SchedulerMaglev {
		return false
	}
	size := svc.Schedule.Len
	if size == 0 && svc.Maglev != nil {
		size = svc.Maglev.TableSize
	}
	return size > 0 && svc.Routable() > int(size/sched.MinSlotsPerMember)
}

// TableShare is the share (0..1) of the service's new connections that
// backend b (one of svc.Backends) is scheduled to take: under a table
// scheduler its slots in the schedule over the schedule's length
// (Schedule.Slots by member id); under round robin, and for a table
// scheduler before its first schedule (the data path then picks round
// robin and counts a fallback), 1/n of the n routable backends. 0 for a
// backend outside the routable set.
func (svc Service) TableShare(b Backend) float64 {
	if svc.TableScheduler() && svc.Schedule.Len > 0 {
		return float64(svc.Schedule.Slots[b.ID]) / float64(svc.Schedule.Len)
	}
	if !b.Discovered || b.State != backend.Routable {
		return 0
	}
	return 1 / float64(svc.Routable())
}
