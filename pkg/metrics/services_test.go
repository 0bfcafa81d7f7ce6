package metrics

import (
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// servicesSnapshot is the fixture with three services (DESIGN §9): web
// (the fixture's backends), api, whose backend-1 has web's backend-1's
// name and address (member 5: its own series under its own service), and
// old, removed by a reload, with one draining backend (member 6).
func servicesSnapshot() *snapshot.Snapshot {
	ip := netip.MustParseAddr
	s := fixtureSnapshot()
	s.Form = config.FormServices
	smp := *s.Sample
	smp.Backends = append(append([]maintenance.BackendSample{}, smp.Backends...),
		maintenance.BackendSample{ID: 5, Active: 2, TimeWait: 1},
		maintenance.BackendSample{ID: 6, Active: 1})
	s.Sample = &smp
	s.Services = []snapshot.Service{
		{ID: 0, Name: "web", State: snapshot.ServiceServing, Listen: s.Listen, Proto: "tcp", Ports: s.Ports, ProviderSynced: true, Provider: "static",
			Backends: s.Backends, Counts: snapshot.ServiceCounts{Opened: 36, Closed: maintenance.Closed{ClientFIN: 14, BackendFIN: 15, ClientRST: 16, BackendRST: 17}, Orphaned: 18, EmbryonicExpired: 26}},
		{ID: 1, Name: "api", State: snapshot.ServiceServing, Listen: ip("192.0.2.11"), Proto: "tcp", ProviderSynced: true, Provider: "static",
			Backends: []backend.Status{{ID: 5, Name: "backend-1", IP: ip("198.51.100.11"), State: backend.Unreachable, Reason: "no route", Discovered: true}},
			Counts:   snapshot.ServiceCounts{Opened: 7, Closed: maintenance.Closed{ClientFIN: 3}, Orphaned: 1}},
		{ID: 2, Name: "old", State: snapshot.ServiceDraining, Listen: ip("192.0.2.12"), Proto: "tcp", ProviderSynced: true, Provider: "static",
			Backends: []backend.Status{{ID: 6, Name: "mail-1", IP: ip("198.51.100.31"), State: backend.Departed}},
			Counts:   snapshot.ServiceCounts{Opened: 4}},
	}
	s.Listen, s.Ports, s.Backends = netip.Addr{}, nil, nil
	return s
}

// TestServiceLabels: every per-connection and per-backend series carries
// the service label, a backend name in two services has a series in each,
// the per-service series add up to their service's, xlb_service_ready and
// xlb_service_state tell each service's readiness and state, and the
// instance-wide series have no service label.
func TestServiceLabels(t *testing.T) {
	var store snapshot.Store
	store.Publish(servicesSnapshot())
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	type L = map[string]string
	check := func(name string, labels L, want float64) {
		t.Helper()
		if got := value(t, fams, name, labels); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	for svc, want := range map[string][5]float64{
		// active, timewait, opened, closed client fin, orphaned
		"web": {7, 3, 36, 14, 18},
		"api": {2, 1, 7, 3, 1},
		"old": {1, 0, 4, 0, 0},
	} {
		s := L{"service": svc}
		check("xlb_connections_active", s, want[0])
		check("xlb_connections_timewait", s, want[1])
		check("xlb_connections_opened_total", s, want[2])
		check("xlb_connections_closed_total", L{"service": svc, "initiator": "client", "reason": "fin"}, want[3])
		check("xlb_connections_orphaned_total", s, want[4])
	}
	check("xlb_backend_connections_active", L{"service": "web", "backend": "backend-1"}, 4)
	check("xlb_backend_connections_active", L{"service": "api", "backend": "backend-1"}, 2)
	check("xlb_backend_state", L{"service": "api", "backend": "backend-1", "state": "draining"}, 1) // unreachable, pairs left
	check("xlb_backend_state", L{"service": "web", "backend": "backend-1", "state": "routable"}, 1)
	check("xlb_backend_state", L{"service": "old", "backend": "mail-1", "state": "draining"}, 1)
	check("xlb_backends", L{"service": "web", "state": "routable"}, 1)
	check("xlb_backends", L{"service": "api", "state": "routable"}, 0)
	check("xlb_backends", L{"service": "api", "state": "draining"}, 1)
	check("xlb_backends", L{"service": "api", "state": "discovered"}, 1)
	check("xlb_backend_provider_stale", L{"service": "api"}, 0)
	check("xlb_backends", L{"service": "old", "state": "draining"}, 1)
	if _, ok := find(fams, "xlb_backend_handshake_seconds", L{"service": "api", "backend": "backend-1"}); !ok {
		t.Error("xlb_backend_handshake_seconds of api's backend-1 missing")
	}
	check("xlb_service_ready", L{"service": "web"}, 1)
	check("xlb_service_ready", L{"service": "api"}, 0)
	check("xlb_service_ready", L{"service": "old"}, 0)
	check("xlb_service_state", L{"service": "old", "state": "draining"}, 1)
	check("xlb_service_state", L{"service": "old", "state": "serving"}, 0)
	check("xlb_service_state", L{"service": "web", "state": "serving"}, 1)
	check("xlb_ready", nil, 0) // api has no routable backend
	check("xlb_flow_map_entries", nil, 26)
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			_, has := labelsOf(m)["service"]
			if want := serviceLabelled(name); has != want {
				t.Errorf("%s%v: service label %v, want %v", name, labelsOf(m), has, want)
			}
		}
	}
}

// serviceLabelled: the per-connection and per-backend families and the
// per-service ones carry the service label (DESIGN §9), nothing else.
func serviceLabelled(name string) bool {
	switch name {
	case "xlb_connections_active", "xlb_connections_timewait", "xlb_connections_opened_total", "xlb_connections_closed_total",
		"xlb_connections_orphaned_total", "xlb_connections_embryonic_expired_total", "xlb_backends",
		"xlb_service_ready", "xlb_service_state", "xlb_service_scheduler_info",
		"xlb_scheduler_table_size", "xlb_scheduler_table_rebuilds_total",
		"xlb_udp_pairs_active", "xlb_udp_pairs_opened_total", "xlb_udp_pairs_expired_total", "xlb_udp_pairs_over_cap_total",
		"xlb_udp_unreplied_max":
		return true
	}
	return len(name) > len("xlb_backend_") && name[:len("xlb_backend_")] == "xlb_backend_"
}
