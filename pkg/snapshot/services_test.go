package snapshot

import (
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
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

// TestTableShare: a Maglev service's shares are its slots over the table
// size by member id (0 for a backend the table leaves out); round robin,
// and a table scheduler before its first table, share evenly among the
// routable backends and give the others 0; Overfull counts routable
// backends against size/100, for Maglev only.
func TestTableShare(t *testing.T) {
	bs := []backend.Status{
		{ID: 4, Name: "a", State: backend.Routable, Discovered: true},
		{ID: 5, Name: "b", State: backend.Routable, Discovered: true},
		{ID: 6, Name: "c", State: backend.Unhealthy, Discovered: true},
		{ID: 7, Name: "d", State: backend.Departed},
	}
	mg := Service{Scheduler: config.SchedulerMaglev, Backends: bs, Maglev: &config.Maglev{Hash: config.MaglevHashClientIP, TableSize: 16381}}
	mg.Schedule = dataplane.Schedule{Scheduler: dataplane.SchedulerMaglev, Hash: dataplane.MaglevHashClientIP, Len: 16381,
		Slots: map[uint32]uint32{4: 12286, 5: 4095}, Rebuilds: 4}
	rr := Service{Scheduler: config.SchedulerRoundRobin, Backends: bs}
	fresh := Service{Scheduler: config.SchedulerWeightedRoundRobin, Backends: bs}
	for _, c := range []struct {
		name string
		svc  Service
		want [4]float64
	}{
		{"maglev", mg, [4]float64{12286.0 / 16381, 4095.0 / 16381, 0, 0}},
		{"round_robin", rr, [4]float64{0.5, 0.5, 0, 0}},
		{"no_table_yet", fresh, [4]float64{0.5, 0.5, 0, 0}},
	} {
		for i, b := range bs {
			if got := c.svc.TableShare(b); got != c.want[i] {
				t.Errorf("%s: share of %s = %v, want %v", c.name, b.Name, got, c.want[i])
			}
		}
	}
	if mg.Overfull() || rr.Overfull() {
		t.Error("2 routable backends in 16381 slots: overfull")
	}
	small := mg
	small.Schedule.Len = 199 // 1 slot per 100 backends
	if !small.Overfull() {
		t.Error("2 routable backends in 199 slots: not overfull")
	}
	small.Schedule.Len = 0 // before the first table: the configured size
	if small.Overfull() {
		t.Error("before the first table, 2 backends in the configured 16381 slots: overfull")
	}
	wrr := fresh
	wrr.Schedule = dataplane.Schedule{Scheduler: dataplane.SchedulerWeightedRR, Len: 1}
	if wrr.Overfull() {
		t.Error("weighted round robin is never overfull")
	}
}

// A UDP service's figures (issue 31): active summed over its members'
// UDP gauges, unreplied and over cap from its own service sample, replied
// the rest (never negative: the unreplied count is read last and may be
// high); a TCP service has none.
func TestServiceUDP(t *testing.T) {
	s := twoServices()
	s.Sample.Backends = append(s.Sample.Backends, maintenance.BackendSample{ID: 3, UDPActive: 7, UDPOpened: 40}, maintenance.BackendSample{ID: 4, UDPActive: 5, UDPOpened: 30})
	s.Sample.Services = []maintenance.ServiceSample{{ID: 1, UDPUnreplied: 99}, {ID: 3, UDPUnreplied: 4, UDPOverCap: 11}}
	dns := Service{ID: 3, Name: "dns", State: ServiceServing, Proto: dataplane.ProtoUDP, UDPUnrepliedMax: 50,
		Backends: []backend.Status{{ID: 3, Name: "dns-1"}, {ID: 4, Name: "dns-2"}},
		Counts:   ServiceCounts{UDP: UDPCounts{Opened: 70, ExpiredUnreplied: 2, ExpiredReplied: 3}}}
	got, ok := s.ServiceUDP(dns)
	want := ServiceUDP{UnrepliedMax: 50, Active: 12, Unreplied: 4, Replied: 8, OverCap: 11,
		UDPCounts: UDPCounts{Opened: 70, ExpiredUnreplied: 2, ExpiredReplied: 3}}
	if !ok || got != want {
		t.Errorf("ServiceUDP = %+v %v, want %+v", got, ok, want)
	}
	s.Sample.Services[1].UDPUnreplied = 20
	if got, _ := s.ServiceUDP(dns); got.Replied != 0 || got.Unreplied != 20 {
		t.Errorf("unreplied above active: replied %d unreplied %d, want 0 and 20", got.Replied, got.Unreplied)
	}
	if _, ok := s.ServiceUDP(s.Services[0]); ok {
		t.Error("a TCP service has UDP figures")
	}
	s.Sample = nil
	if got, ok := s.ServiceUDP(dns); !ok || got != (ServiceUDP{UnrepliedMax: 50, UDPCounts: dns.Counts.UDP}) {
		t.Errorf("before a sample: %+v", got)
	}
}
