package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// twoServices is a valid services-form file: web on lines 2-5, api on
// lines 6-9; a field appended to it is on line 10.
const twoServices = `services:
  - name: web
    listen: {ip: 192.0.2.10}
    ports: [{local_port: 80, remote_port: 8080}]
    provider: {static: {backends: [{ip: 198.51.100.11}]}}
  - name: api
    listen: {ip: 192.0.2.11}
    ports: [{local_port: 443}]
    provider: {static: {backends: [{ip: 198.51.100.12}]}}
`

// webService is the first service of twoServices alone (lines 1-5); a
// service appended to it starts on line 6, a field of that service on the
// line after its first.
const webService = `services:
  - name: web
    listen: {ip: 192.0.2.10}
    ports: [{local_port: 80, remote_port: 8080}]
    provider: {static: {backends: [{ip: 198.51.100.11}]}}
`

// service renders one list item: its first field on the "- " line, the
// others below it.
func service(fields ...string) string {
	var b strings.Builder
	for i, f := range fields {
		if i == 0 {
			b.WriteString("  - " + f + "\n")
		} else {
			b.WriteString("    " + f + "\n")
		}
	}
	return b.String()
}

// api is a valid second service (lines 6-9 after webService), without its
// first field, so a case can write its own name (or none).
var apiRest = []string{"listen: {ip: 192.0.2.11}", "ports: [{local_port: 443}]", "provider: {static: {backends: [{ip: 198.51.100.12}]}}"}

func api(first string, rest ...string) string {
	fields := append([]string{first}, rest...)
	return service(fields...)
}

// manyServices is a services list of n one-line services, each with its
// own address and backends backends.
func manyServices(n, backends int) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range n {
		var bs []string
		for j := range backends {
			bs = append(bs, fmt.Sprintf("{ip: 172.%d.%d.%d}", 16+i%16, j/200, j%200+1))
		}
		fmt.Fprintf(&b, "  - {name: s%d, listen: {ip: 10.1.%d.%d}, ports: [{local_port: 80}], provider: {static: {backends: [%s]}}}\n",
			i, i/200, i%200+1, strings.Join(bs, ", "))
	}
	return b.String()
}

// TestServicesRules has one case per rule of DESIGN §9 (issue 29), each
// asserting the complete error text: file, line and field path.
func TestServicesRules(t *testing.T) {
	long := strings.Repeat("n", 33)
	tests := []struct {
		name string
		yaml string
		want string
	}{
		// The form.
		{"both forms", "listen: {ip: 192.0.2.10}\n" + twoServices,
			`t.yaml:1: listen: the file lists services:, so listen belongs inside each service (a file uses the top-level form or services:, not both)`},
		{"both forms, ports and provider", twoServices + "ports: [{local_port: 8080}]\n",
			`t.yaml:10: ports: the file lists services:, so ports belongs inside each service (a file uses the top-level form or services:, not both)`},
		{"services empty", "services: []\n", `t.yaml:1: services: at least 1 service is required`},
		{"services not a list", "services: {name: web}\n", `t.yaml:1: services: must be a sequence, got a mapping`},
		{"too many services", manyServices(MaxServices+1, 1),
			fmt.Sprintf(`t.yaml:1: services: at most %d services are supported (the data path's service ids), got %d`, MaxServices, MaxServices+1)},

		// Names.
		{"name missing", webService + service(apiRest...), `t.yaml:6: services[1]: missing field "name"`},
		{"name syntax", webService + api("name: Api", apiRest...),
			`t.yaml:6: services[1].name: must be 1-32 lowercase letters, digits, '_' or '-', the first a letter or digit, got "Api"`},
		{"name starts with '-'", webService + api("name: -api", apiRest...),
			`t.yaml:6: services[1].name: must be 1-32 lowercase letters, digits, '_' or '-', the first a letter or digit, got "-api"`},
		{"name too long", webService + api("name: "+long, apiRest...),
			`t.yaml:6: services[1].name: must be 1-32 lowercase letters, digits, '_' or '-', the first a letter or digit, got "` + long + `"`},
		{"duplicate name", webService + api("name: web", apiRest...), `t.yaml:6: services[1].name: duplicate name "web" (also services[0].name)`},

		// Addresses and ports.
		{"listen missing", webService + api("name: api", apiRest[1:]...), `t.yaml:6: services[1]: missing field "listen"`},
		{"two listen auto", "services:\n" + service("name: web", "listen: auto", "ports: [{local_port: 80}]", "provider: {static: {backends: [{ip: 198.51.100.11}]}}") +
			service("name: api", "listen: auto", "ports: [{local_port: 443}]", "provider: {static: {backends: [{ip: 198.51.100.12}]}}"),
			`t.yaml:7: services[1].listen: at most one service may listen on auto; services[0] (web) does`},
		{"duplicate address, proto and local_port", webService + api("name: api", "listen: {ip: 192.0.2.10}", "ports: [{local_port: 443}, {local_port: 80}]", apiRest[2]),
			`t.yaml:8: services[1].ports[1].local_port: 192.0.2.10 tcp/80 is also services[0].ports[0].local_port (service "web"); a listen address, proto and local_port belong to one service`},
		{"ports per service", webService + api("name: api", apiRest[0], strings.TrimSuffix(ninePorts(), "\n"), apiRest[2]),
			`t.yaml:8: services[1].ports: at most 8 port mappings are supported, got 9`},
		{"duplicate local_port in a service", webService + api("name: api", apiRest[0], "ports: [{local_port: 443}, {local_port: 443}]", apiRest[2]),
			`t.yaml:8: services[1].ports[1].local_port: duplicate local_port 443 (also services[1].ports[0])`},
		{"backend of another family", webService + api("name: api", apiRest[0], apiRest[1], `provider: {static: {backends: [{ip: "2001:db8::11"}]}}`),
			`t.yaml:9: services[1].provider.static.backends[0].ip: 2001:db8::11 is IPv6 and the listen address (192.0.2.11) IPv4: a service's backends are of its listen family (no NAT64)`},
		{"static backends of all services above MaxMembers", manyServices(2, MaxMembers/2+1),
			fmt.Sprintf(`t.yaml:1: services: the services have %d static backends in all; at most %d are supported (the data path's member ids)`, MaxMembers+2, MaxMembers)},
		{"backend is another service's listen address", webService + api("name: api", apiRest[0], apiRest[1], "provider: {static: {backends: [{ip: 192.0.2.10}]}}"),
			`t.yaml:9: services[1].provider.static.backends[0].ip: must not be the listen address 192.0.2.10 of services[0] (web)`},
		{"backend is its own listen address", webService + api("name: api", apiRest[0], apiRest[1], "provider: {static: {backends: [{ip: 192.0.2.11}]}}"),
			`t.yaml:9: services[1].provider.static.backends[0].ip: must not be the listen address 192.0.2.11`},
		{"local_port of a second service in the snat range", webService + api("name: api", apiRest[0], "ports: [{local_port: 45000}]", apiRest[2]) + "snat: {ip: 192.0.2.11}\n",
			`t.yaml:8: services[1].ports[0].local_port: 45000 is inside snat.port_range 40000-59999 and snat.ip is the listen address; the data path could not tell client packets from backend replies`},
		{"metrics on a second service's port", webService + api("name: api", apiRest[0], "ports: [{local_port: 9642}]", apiRest[2]),
			`t.yaml:1: metrics.port: 9642 is also services[1].ports[0].local_port on the listen address; XDP would take these packets before the metrics listener sees them`},
		{"admin on a second service's address and port", twoServices + "admin: {address: 192.0.2.11, port: 443}\n",
			`t.yaml:10: admin.port: 443 is also services[1].ports[0].local_port on the listen address; XDP would take these packets before the admin listener sees them`},
		{"bgp peer is a second service's address", twoServices + "bgp:\n  local_asn: 64512\n  peers: [{address: 192.0.2.11, asn: 64513}]\n",
			`t.yaml:12: bgp.peers[0].address: must not be the listen address 192.0.2.11`},
		{"bgp announces a second service's address twice", twoServices + "bgp:\n  local_asn: 64512\n  announce: [listen, 192.0.2.11/32]\n  peers: [{address: 198.51.100.1, asn: 64513}]\n",
			`t.yaml:12: bgp.announce: "listen" and 192.0.2.11/32 both announce the listen address; keep one`},
		{"per-instance key in a service", webService + api("name: api", append(slices.Clone(apiRest), "snat: {ip: auto}")...),
			`t.yaml:10: services[1].snat: snat is per instance; put it at the top level`},
		{"mode in a service", webService + api("name: api", append(slices.Clone(apiRest), "mode: nat")...),
			`t.yaml:10: services[1].mode: mode is per instance; put it at the top level`},
		{"unknown key in a service", webService + api("name: api", append(slices.Clone(apiRest), "listen_port: 80")...),
			`t.yaml:10: services[1]: unknown field "listen_port" (did you mean "listen"?)`},
		{"health check of a service", webService + api("name: api", append(slices.Clone(apiRest), "health_check: {type: icmp}")...),
			`t.yaml:10: services[1].health_check.type: must be "tcp", "http" or "udp", got "icmp"`},
		{"kubernetes provider of a service", webService + api("name: api", apiRest[0], apiRest[1], "provider: {kubernetes: {namespace: Prod, service: api}}"),
			`t.yaml:9: services[1].provider.kubernetes.namespace: must be a DNS-1123 label (1-63 lowercase letters, digits or '-'; first and last a letter or digit), got "Prod"`},

		// Refused until their issues (32, 33), one line each.
		{"IPv6 listen (issue 32)", webService + api("name: api", `listen: {ip: "2001:db8::10"}`, apiRest[1], `provider: {static: {backends: [{ip: "2001:db8:1::11"}]}}`),
			`t.yaml:7: services[1].listen.ip: 2001:db8::10: IPv6 is not supported yet; use an IPv4 address`},
		{"IPv6 backend (issue 32)", webService + api("name: api", apiRest[0], apiRest[1], `provider: {static: {backends: [{ip: "2001:db8:1::11"}]}}`),
			`t.yaml:9: services[1].provider.static.backends[0].ip: 2001:db8:1::11 is IPv6 and the listen address (192.0.2.11) IPv4: a service's backends are of its listen family (no NAT64)`},
		{"scheduler unknown", webService + api("name: api", append(slices.Clone(apiRest), "scheduler: least_conn")...),
			`t.yaml:10: services[1].scheduler: must be one of round_robin, weighted_round_robin, maglev; got "least_conn"`},
		{"proxy_protocol (issue 33)", webService + api("name: api", append(slices.Clone(apiRest), "proxy_protocol: v2")...),
			`t.yaml:10: services[1].proxy_protocol: proxy_protocol is not implemented yet; backends get no PROXY header`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantError(t, tt.yaml, tt.want) })
	}
}

// TestServicesValid are services-form files at the edge of a rule that
// must pass.
func TestServicesValid(t *testing.T) {
	for name, src := range map[string]string{
		"the same address, other ports":    webService + api("name: api", "listen: {ip: 192.0.2.10}", apiRest[1], apiRest[2]),
		"the same port, other addresses":   webService + api("name: api", apiRest[0], "ports: [{local_port: 80}]", apiRest[2]),
		"one listen auto":                  webService + api("name: api", "listen: auto", apiRest[1], apiRest[2]),
		"a backend shared by two services": webService + api("name: api", apiRest[0], apiRest[1], "provider: {static: {backends: [{ip: 198.51.100.11}]}}"),
		"a name of 32 characters":          webService + api("name: a"+strings.Repeat("_", 30)+"-", apiRest...),
		"scheduler round_robin":            webService + api("name: api", append(slices.Clone(apiRest), "scheduler: round_robin")...),
		"MaxServices services":             manyServices(MaxServices, 1),
		"MaxMembers static backends":       manyServices(2, MaxMembers/2),
	} {
		t.Run(name, func(t *testing.T) { mustParse(t, src) })
	}
}

// TestTopLevelFormIsOneService: a file of DESIGN §1's form gives the same
// effective config as before issue 29 (its top-level fields, printed back
// unchanged) and one service named after name, equal to those fields.
func TestTopLevelFormIsOneService(t *testing.T) {
	c, _, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Service{{Name: "web-lb", Listen: c.Listen, Proto: "tcp", Ports: c.Ports, Scheduler: SchedulerRoundRobin,
		Provider: c.Provider, HealthCheck: c.HealthCheck}}
	if c.Form != FormTopLevel || !reflect.DeepEqual(c.Services, want) || !reflect.DeepEqual(c.ServiceList(), want) {
		t.Errorf("Form %v, Services\n%+v\nwant\n%+v", c.Form, c.Services, want)
	}
	if c.Listen != (Listen{IP: netip.MustParseAddr("192.0.2.10")}) || len(c.Ports) != 2 || c.Provider.Static == nil {
		t.Errorf("the top-level fields are not kept: %+v", c)
	}
	out := roundTrip(t, mustParse(t, minimal))
	if strings.Contains(string(out), "services") || !strings.HasPrefix(string(out), "name: xlb\nlisten: auto\nproto: tcp\n") {
		t.Errorf("Marshal of a top-level file:\n%s", out)
	}
	if s := mustParse(t, minimal).Services; len(s) != 1 || s[0].Name != DefaultName || !s[0].Listen.Auto {
		t.Errorf("Services of the minimal file = %+v", s)
	}
}

// TestServicesFormRoundTrip: a services-form file parses into its
// services (defaults filled in, the top-level mirror zero) and marshals
// back in that form.
func TestServicesFormRoundTrip(t *testing.T) {
	src := "name: edge-1\n" + twoServices + "  - name: kube\n    listen: auto\n    ports: [{local_port: 8443}]\n" +
		"    provider: {kubernetes: {namespace: default, service: web, port_name: https}}\n    health_check: {type: tcp}\n" +
		"snat: {ip: 198.51.100.1}\n"
	c := mustParse(t, src)
	ip := netip.MustParseAddr
	if c.Form != FormServices || c.Name != "edge-1" || c.Listen != (Listen{}) || c.Proto != "" || c.Ports != nil ||
		c.Provider != (Provider{}) || c.HealthCheck != nil {
		t.Errorf("Form %v, top-level fields %+v", c.Form, c)
	}
	want := []Service{
		{Name: "web", Listen: Listen{IP: ip("192.0.2.10")}, Proto: "tcp", Ports: []PortMapping{{80, 8080}}, Scheduler: SchedulerRoundRobin,
			Provider: Provider{Static: &StaticProvider{Backends: []Backend{{"198.51.100.11", ip("198.51.100.11"), 1}}}}},
		{Name: "api", Listen: Listen{IP: ip("192.0.2.11")}, Proto: "tcp", Ports: []PortMapping{{443, 443}}, Scheduler: SchedulerRoundRobin,
			Provider: Provider{Static: &StaticProvider{Backends: []Backend{{"198.51.100.12", ip("198.51.100.12"), 1}}}}},
		{Name: "kube", Listen: Listen{Auto: true}, Proto: "tcp", Ports: []PortMapping{{8443, 0}}, Scheduler: SchedulerRoundRobin,
			Provider:    Provider{Kubernetes: &KubernetesProvider{Namespace: "default", Service: "web", PortName: "https"}},
			HealthCheck: &HealthCheck{Type: "tcp", Interval: DefaultHealthCheckInterval, Timeout: DefaultHealthCheckTimeout, Rise: 2, Fall: 3}},
	}
	if !reflect.DeepEqual(c.Services, want) {
		t.Errorf("Services\n%+v\nwant\n%+v", c.Services, want)
	}
	out := roundTrip(t, c)
	if !strings.HasPrefix(string(out), `name: edge-1
services:
  - name: web
    listen:
      ip: 192.0.2.10
    proto: tcp
    ports:
      - local_port: 80
        remote_port: 8080
    scheduler: round_robin
    provider:
      static:
        backends:
          - name: 198.51.100.11
            ip: 198.51.100.11
  - name: api
`) || !strings.Contains(string(out), "\nmode: nat\norphan_ttl_secs: 300\n") {
		t.Errorf("Marshal:\n%s", out)
	}
}

// TestDiffServices: with services, Diff names a service by its name and
// a key inside it; the order of the list does not count.
func TestDiffServices(t *testing.T) {
	a := mustParse(t, twoServices)
	reordered := mustParse(t, "services:\n"+strings.SplitAfterN(twoServices, "\n", 6)[5]+strings.Join(strings.SplitAfter(twoServices, "\n")[1:5], ""))
	ports := mustParse(t, strings.Replace(twoServices, "local_port: 443", "local_port: 444", 1))
	removed := mustParse(t, webService)
	renamed := mustParse(t, strings.Replace(twoServices, "name: api", "name: api2", 1))
	instance := mustParse(t, twoServices+"shutdown_timeout: 0\n")
	topLevel := mustParse(t, "name: web\nlisten: {ip: 192.0.2.10}\nports: [{local_port: 80, remote_port: 8080}]\nprovider: {static: {backends: [{ip: 198.51.100.11}]}}\n")
	oneListed := mustParse(t, "name: web\n"+webService)
	checkDiffs(t, []diffCase{
		{"equal", a, mustParse(t, twoServices), nil},
		{"reordered", a, reordered, nil},
		{"ports of one", a, ports, []string{"services[api].ports"}},
		{"removed", a, removed, []string{"services[api]"}},
		{"renamed", a, renamed, []string{"services[api2]", "services[api]"}},
		{"per-instance key", a, instance, []string{"shutdown_timeout"}},
		{"top-level form to the same service listed", topLevel, oneListed, nil},
		{"top-level form to two services", topLevel, a, []string{"name", "services[api]"}},
	})
}
