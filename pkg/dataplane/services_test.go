package dataplane

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// Service ids by name (DESIGN §9): a named record keeps its id, serving or
// draining; a migrated record (layout 8's one service, unnamed) goes to
// the only service, else to the one on its address; a new service takes
// the lowest free id; none left is an error naming the service.
func TestAssignServices(t *testing.T) {
	a1, a2 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")
	svc := func(name string, a netip.Addr) ServiceSettings {
		return ServiceSettings{Name: name, Listen: a, Ports: []PortMap{{Local: 80}}}
	}
	rec := func(state ServiceState, name string, a netip.Addr, migrated bool) xlbService {
		r := serviceRecord(svc(name, a), xlbService{})
		r.State = uint8(state)
		if migrated {
			r.Flags = serviceMigratedFlag
		}
		return r
	}
	for _, c := range []struct {
		name string
		recs map[int]xlbService
		svcs []ServiceSettings
		want []uint16
		err  string
	}{
		{name: "fresh", svcs: []ServiceSettings{svc("a", a1), svc("b", a2)}, want: []uint16{0, 1}},
		{name: "by name", recs: map[int]xlbService{0: rec(ServiceServing, "x", a1, false), 3: rec(ServiceServing, "b", a2, false)},
			svcs: []ServiceSettings{svc("a", a1), svc("b", a2)}, want: []uint16{1, 3}},
		{name: "a draining one comes back", recs: map[int]xlbService{5: rec(ServiceDraining, "a", a1, false)},
			svcs: []ServiceSettings{svc("a", a1)}, want: []uint16{5}},
		{name: "migrated: the only service", recs: map[int]xlbService{0: rec(ServiceServing, "", a1, true)},
			svcs: []ServiceSettings{svc("web", a2)}, want: []uint16{0}},
		{name: "migrated: the one on its address", recs: map[int]xlbService{0: rec(ServiceServing, "", a2, true)},
			svcs: []ServiceSettings{svc("a", a1), svc("b", a2)}, want: []uint16{1, 0}},
		{name: "a long name by its first 32 bytes", recs: map[int]xlbService{2: rec(ServiceServing, strings.Repeat("n", 40), a1, false)},
			svcs: []ServiceSettings{svc(strings.Repeat("n", 40), a1)}, want: []uint16{2}},
		{name: "migrated: none on its address", recs: map[int]xlbService{0: rec(ServiceServing, "", netip.MustParseAddr("192.0.2.12"), true)},
			svcs: []ServiceSettings{svc("a", a1), svc("b", a2)}, want: []uint16{1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var recs [MaxServices]xlbService
			for id, r := range c.recs {
				recs[id] = r
			}
			got, err := assignServices(&recs, c.svcs)
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("ids %v (%v), want %v", got, err, c.want)
			}
		})
	}
	var full [MaxServices]xlbService
	for id := range full {
		full[id] = rec(ServiceDraining, "d"+string(rune('a'+id%26))+strings.Repeat("x", id/26), a1, false)
	}
	if _, err := assignServices(&full, []ServiceSettings{svc("new", a1)}); err == nil || !strings.Contains(err.Error(), `"new"`) {
		t.Fatalf("a new service with every id draining: %v, want an error naming it", err)
	}
}

// Configure's checks of the services, one rule each.
func TestValidateServices(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.10")
	ok := ServiceSettings{Name: "web", Listen: a, Ports: []PortMap{{Local: 80, Remote: 8080}}}
	with := func(f func(*ServiceSettings)) []ServiceSettings {
		s := ok
		s.Ports = slices.Clone(ok.Ports)
		f(&s)
		return []ServiceSettings{s}
	}
	many := make([]ServiceSettings, MaxServices+1)
	for i := range many {
		many[i] = ServiceSettings{Name: "s" + strings.Repeat("x", i%20) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Listen: a, Ports: []PortMap{{Local: uint16(1 + i)}}}
	}
	for _, c := range []struct {
		name string
		svcs []ServiceSettings
		err  string
	}{
		{"ok", []ServiceSettings{ok}, ""},
		{"none", nil, "0 services"},
		{"too many", many, "257 services"},
		{"no name", with(func(s *ServiceSettings) { s.Name = "" }), "without a name"},
		{"long names alike in their first 32 bytes", append(with(func(s *ServiceSettings) { s.Name = strings.Repeat("n", ServiceNameLen) + "a" }),
			ServiceSettings{Name: strings.Repeat("n", ServiceNameLen) + "b", Listen: a, Ports: []PortMap{{Local: 81}}}), "by their first 32 bytes"},
		{"a name twice", append(with(func(*ServiceSettings) {}), ServiceSettings{Name: "web", Listen: a, Ports: []PortMap{{Local: 81}}}), `service "web" twice`},
		{"IPv6", with(func(s *ServiceSettings) { s.Listen = netip.MustParseAddr("2001:db8::1") }), "not IPv4"},
		{"udp", with(func(s *ServiceSettings) { s.Proto, s.UDPUnrepliedMax = ProtoUDP, 100 }), ""},
		{"udp without its cap", with(func(s *ServiceSettings) { s.Proto = ProtoUDP }), "udp_unreplied_max 0"},
		{"a tcp service with a udp cap", with(func(s *ServiceSettings) { s.UDPUnrepliedMax = 100 }), "udp_unreplied_max"},
		{"sctp", with(func(s *ServiceSettings) { s.Proto = "sctp" }), `protocol "sctp"`},
		{"weighted round robin", with(func(s *ServiceSettings) { s.Scheduler = SchedulerWeightedRR }), ""},
		{"maglev", with(func(s *ServiceSettings) { s.Scheduler, s.TableSize = SchedulerMaglev, 16381 }), ""},
		{"maglev client_ip", with(func(s *ServiceSettings) {
			s.Scheduler, s.MaglevHash, s.TableSize = SchedulerMaglev, MaglevHashClientIP, 16381
		}), ""},
		{"maglev without a table size", with(func(s *ServiceSettings) { s.Scheduler = SchedulerMaglev }), "table size"},
		{"maglev table size not prime", with(func(s *ServiceSettings) { s.Scheduler, s.TableSize = SchedulerMaglev, 16383 }), "table size"},
		{"maglev hash", with(func(s *ServiceSettings) { s.Scheduler, s.MaglevHash, s.TableSize = SchedulerMaglev, "src", 16381 }), `Maglev hash "src"`},
		{"unknown scheduler", with(func(s *ServiceSettings) { s.Scheduler = "least_conn" }), `scheduler "least_conn"`},
		{"no ports", with(func(s *ServiceSettings) { s.Ports = nil }), "0 port mappings"},
		{"too many ports", with(func(s *ServiceSettings) {
			for p := range MaxPorts {
				s.Ports = append(s.Ports, PortMap{Local: uint16(100 + p)})
			}
		}), "9 port mappings"},
		{"local port 0", with(func(s *ServiceSettings) { s.Ports[0].Local = 0 }), "local port 0"},
		{"a listen twice", append(with(func(*ServiceSettings) {}), ServiceSettings{Name: "api", Listen: a, Ports: []PortMap{{Local: 80}}}), `services "web" and "api" both listen on 192.0.2.10/tcp port 80`},
	} {
		err := validateServices(c.svcs)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}
	s := Settings{SNAT: []netip.Addr{a}, SNATPortLo: 40000, SNATPortHi: 40999, Services: with(func(s *ServiceSettings) { s.Ports[0].Local = 40500 })}
	if err := s.validate(s.Space()); err == nil || !strings.Contains(err.Error(), "inside the SNAT port range") {
		t.Errorf("a local port inside the SNAT range of a SNAT address: %v", err)
	}
	s.Services[0].Listen = netip.MustParseAddr("192.0.2.11")
	if err := s.validate(s.Space()); err != nil {
		t.Errorf("a local port inside the SNAT range of another address: %v", err)
	}
}
