package metrics

import (
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// udpSnapshot is servicesSnapshot with a UDP service (issue 31): dns,
// round robin over dns-1 (member 7) and dns-2 (member 8), capped at 50
// unreplied pairs.
func udpSnapshot() *snapshot.Snapshot {
	ip := netip.MustParseAddr
	s := servicesSnapshot()
	smp := *s.Sample
	smp.Backends = append(append([]maintenance.BackendSample{}, smp.Backends...),
		maintenance.BackendSample{ID: 7, UDPActive: 30, UDPOpened: 500},
		maintenance.BackendSample{ID: 8, UDPActive: 20, UDPOpened: 480})
	smp.UDP = maintenance.UDPSample{Active: 50, Unreplied: 12, Opened: 980, ExpiredUnreplied: 100, ExpiredReplied: 830,
		OverCap: 150, NoBackend: 4, FragsPassed: 9}
	smp.Services = []maintenance.ServiceSample{{ID: 3, UDPUnreplied: 12, UDPOverCap: 150}}
	s.Sample = &smp
	s.Services = append(slices.Clone(s.Services), snapshot.Service{
		ID: 3, Name: "dns", State: snapshot.ServiceServing, Listen: ip("192.0.2.10"), Proto: "udp",
		Ports: []config.PortMapping{{LocalPort: 53, RemotePort: 5353}}, ProviderSynced: true, Provider: "static", UDPUnrepliedMax: 50,
		Backends: []backend.Status{
			{ID: 7, Name: "dns-1", IP: ip("198.51.100.41"), State: backend.Routable, Discovered: true},
			{ID: 8, Name: "dns-2", IP: ip("198.51.100.42"), State: backend.Routable, Discovered: true},
		},
		Counts: snapshot.ServiceCounts{UDP: snapshot.UDPCounts{Opened: 980, ExpiredUnreplied: 100, ExpiredReplied: 830}},
	})
	return s
}

// TestUDPSeries (issue 31): a UDP service has its pair series (active by
// state, opened, expired by state, over cap, its cap) and its backends
// their UDP pair series in place of the TCP-only ones (connections,
// time-wait, timestamps, handshake), so a UDP backend has fewer series
// than a TCP one; TCP services have no UDP series; the instance-wide UDP
// counters have no service label; and promlint finds nothing.
func TestUDPSeries(t *testing.T) {
	var store snapshot.Store
	store.Publish(udpSnapshot())
	srv, _ := testServer(t, &store)
	fams, _ := scrape(t, srv)
	type L = map[string]string
	check := func(name string, labels L, want float64) {
		t.Helper()
		if got := value(t, fams, name, labels); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	dns := L{"service": "dns"}
	check("xlb_udp_pairs_active", L{"service": "dns", "state": "unreplied"}, 12)
	check("xlb_udp_pairs_active", L{"service": "dns", "state": "replied"}, 38)
	check("xlb_udp_pairs_opened_total", dns, 980)
	check("xlb_udp_pairs_expired_total", L{"service": "dns", "state": "unreplied"}, 100)
	check("xlb_udp_pairs_expired_total", L{"service": "dns", "state": "replied"}, 830)
	check("xlb_udp_pairs_over_cap_total", dns, 150)
	check("xlb_udp_unreplied_max", dns, 50)
	check("xlb_udp_no_backend_total", nil, 4)
	check("xlb_udp_fragments_passed_total", nil, 9)
	check("xlb_connections_active", dns, 0)
	check("xlb_backend_udp_pairs_active", L{"service": "dns", "backend": "dns-1"}, 30)
	check("xlb_backend_udp_pairs_opened_total", L{"service": "dns", "backend": "dns-2"}, 480)
	for _, svc := range []string{"web", "api", "old"} {
		for _, name := range []string{"xlb_udp_pairs_active", "xlb_udp_pairs_opened_total", "xlb_udp_unreplied_max"} {
			if _, ok := find(fams, name, L{"service": svc}); ok {
				t.Errorf("TCP service %s has %s", svc, name)
			}
		}
	}
	var dnsFamilies []string
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			l := labelsOf(m)
			if l["service"] == "dns" && l["backend"] == "dns-1" {
				dnsFamilies = append(dnsFamilies, name)
				break
			}
		}
		if strings.HasPrefix(name, "xlb_backend_udp_") {
			for _, m := range f.GetMetric() {
				if l := labelsOf(m); l["service"] != "dns" {
					t.Errorf("%s%v: a TCP service's backend", name, l)
				}
			}
		}
	}
	sort.Strings(dnsFamilies)
	want := []string{"xlb_backend_received_bytes_total", "xlb_backend_received_packets_total", "xlb_backend_sent_bytes_total",
		"xlb_backend_sent_packets_total", "xlb_backend_state", "xlb_backend_table_share", "xlb_backend_udp_pairs_active",
		"xlb_backend_udp_pairs_opened_total", "xlb_backend_weight"}
	if !slices.Equal(dnsFamilies, want) {
		t.Errorf("dns-1's families %v, want %v", dnsFamilies, want)
	}
	if n, tcp := seriesByBackend(fams)["dns-1"], seriesPerBackend; n != seriesPerBackendUDP || n >= tcp {
		t.Errorf("dns-1 has %d series, want %d (fewer than a TCP backend's %d)", n, seriesPerBackendUDP, tcp)
	}
	problems, err := testutil.GatherAndLint(srv.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "xlb_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}
