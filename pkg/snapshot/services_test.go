package snapshot

import (
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// twoServices is a running instance with web (one routable backend,
// member 0) and api (its only backend unreachable, member 1), and old,
// removed by a reload, whose last backend drains (member 2).
func twoServices() *Snapshot {
	s := running(0, maintenance.Maintenance{})
	s.Form = config.FormServices
	s.Backends = nil
	s.Sample.Backends = []maintenance.BackendSample{{ID: 0, Active: 3, TimeWait: 1}, {ID: 1}, {ID: 2, Active: 2}}
	s.Services = []Service{
		{ID: 0, Name: "web", State: ServiceServing, Listen: netip.MustParseAddr("192.0.2.10"), ProviderSynced: true,
			Backends: []backend.Status{{ID: 0, Name: "web-1", State: backend.Routable, Discovered: true}},
			Counts:   ServiceCounts{Opened: 9, Closed: maintenance.Closed{ClientFIN: 5}}},
		{ID: 1, Name: "api", State: ServiceServing, Listen: netip.MustParseAddr("192.0.2.10"), ProviderSynced: true,
			Backends: []backend.Status{{ID: 1, Name: "api-1", State: backend.Unreachable, Discovered: true}}},
		{ID: 2, Name: "old", State: ServiceDraining, Listen: netip.MustParseAddr("192.0.2.11"), ProviderSynced: true,
			Backends: []backend.Status{{ID: 2, Name: "old-1", State: backend.Departed}}},
	}
	return s
}

// ServiceReady is what the BGP speaker asks per service: ready only when
// the instance is and the service itself is; a removed or unknown service
// never is.
func TestServiceReady(t *testing.T) {
	s := twoServices()
	for name, want := range map[string]bool{"web": true, "api": false, "old": false, "nope": false} {
		if got := s.ServiceReady(name, testNow); got != want {
			t.Errorf("ServiceReady(%s) = %v, want %v", name, got, want)
		}
	}
	if _, reason, ok := s.ServiceReadiness("old", testNow); !ok || reason != api.ReasonRemoved {
		t.Errorf("old: %q %v, want removed", reason, ok)
	}
	if _, _, ok := s.ServiceReadiness("nope", testNow); ok {
		t.Error("an unknown service is known")
	}
	if ready, reason := s.Readiness(testNow); ready || reason != "service api: no_routable_backends" {
		t.Errorf("Readiness = %v %q", ready, reason)
	}
	s.Drained = true
	if s.ServiceReady("web", testNow) {
		t.Error("web ready while the instance is drained")
	}
	if _, reason := s.Readiness(testNow); reason != api.ReasonDraining {
		t.Errorf("drained: %q, want the bare draining", reason)
	}
}

// ServiceConnections sums the gauges over the service's members only and
// takes the counters from the service's counts.
func TestServiceConnections(t *testing.T) {
	s := twoServices()
	got := s.ServiceConnections(s.Services[0])
	want := ServiceConnections{Active: 3, TimeWait: 1, ServiceCounts: ServiceCounts{Opened: 9, Closed: maintenance.Closed{ClientFIN: 5}}}
	if got != want {
		t.Errorf("web: %+v, want %+v", got, want)
	}
	if got := s.ServiceConnections(s.Services[2]); got.Active != 2 {
		t.Errorf("old: %+v, want 2 active", got)
	}
	s.Sample = nil
	if got := s.ServiceConnections(s.Services[0]); got != (ServiceConnections{}) {
		t.Errorf("before the first sample: %+v, want zeros", got)
	}
}

// A snapshot without Services (a test, a daemon before issue 29) reads as
// one serving service named after the instance, whose counters are the
// instance's; nothing before the instance is up.
func TestServiceListStandsInForOneService(t *testing.T) {
	s := running(0, maintenance.Maintenance{})
	s.Name = "edge"
	s.Sample.Opened, s.Sample.Orphaned = 12, 2
	l := s.ServiceList()
	if len(l) != 1 || l[0].Name != "edge" || l[0].State != ServiceServing || len(l[0].Backends) != 1 || l[0].Counts.Opened != 12 || l[0].Counts.Orphaned != 2 {
		t.Errorf("ServiceList = %+v", l)
	}
	if l := (&Snapshot{Name: "edge", Lifecycle: api.Starting}).ServiceList(); len(l) != 0 {
		t.Errorf("before the instance is up: %+v", l)
	}
	if !s.ServiceReady("edge", testNow) {
		t.Error("the one service is not ready")
	}
}
