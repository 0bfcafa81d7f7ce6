package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// weighted is api (after webService, lines 6-9) with three weighted static
// backends on line 9 and its scheduler on line 10.
func weighted(scheduler string, extra ...string) string {
	return webService + api("name: api", append([]string{apiRest[0], apiRest[1],
		"provider: {static: {backends: [{name: a, ip: 198.51.100.12, weight: 3}, {name: b, ip: 198.51.100.13}, {name: c, ip: 198.51.100.14, weight: 1}]}}",
		"scheduler: " + scheduler}, extra...)...)
}

// maglevBackends is a services file of one maglev service with n static
// backends, its maglev section on line 6 (none when maglev is "").
func maglevBackends(n int, maglev string) string {
	var bs []string
	for j := range n {
		bs = append(bs, fmt.Sprintf("{ip: 172.16.%d.%d}", j/200, j%200+1))
	}
	src := "services:\n" + service("name: web", "listen: {ip: 192.0.2.10}", "ports: [{local_port: 80}]",
		"provider: {static: {backends: ["+strings.Join(bs, ", ")+"]}}", "scheduler: maglev")
	if maglev != "" {
		src += "    maglev: " + maglev + "\n"
	}
	return src
}

// TestSchedulerKeys: scheduler, maglev and weight decode into the
// service, and TableSize, MaglevHash and TableMemory resolve the defaults
// (DESIGN §9, issue 30).
func TestSchedulerKeys(t *testing.T) {
	c := mustParse(t, weighted("weighted_round_robin"))
	s := &c.Services[1]
	var ws []uint16
	for _, b := range s.Provider.Static.Backends {
		ws = append(ws, b.Weight)
	}
	if s.Scheduler != SchedulerWeightedRoundRobin || s.Maglev != nil || !slices.Equal(ws, []uint16{3, 1, 1}) ||
		s.TableSize() != 0 || s.MaglevHash() != "" || s.TableMemory() != 0 {
		t.Errorf("weighted_round_robin: scheduler %q, maglev %+v, weights %v, TableSize %d, MaglevHash %q",
			s.Scheduler, s.Maglev, ws, s.TableSize(), s.MaglevHash())
	}
	if w := c.Services[0].Provider.Static.Backends[0].Weight; w != DefaultWeight || c.Services[0].TableSize() != 0 {
		t.Errorf("round_robin: weight %d, TableSize %d; want 1, 0", w, c.Services[0].TableSize())
	}
	kube := "services:\n" + service("name: web", "listen: {ip: 192.0.2.10}", "ports: [{local_port: 80}]",
		"provider: {kubernetes: {namespace: prod, service: web}}", "scheduler: maglev")
	for _, tc := range []struct {
		name   string
		src    string
		maglev *Maglev
		hash   string
		size   uint32
		memory uint64
	}{
		{"maglev, no maglev key", maglevBackends(3, ""), nil, "five_tuple", 16381, 64 * (1 + 512)},
		{"hash client_ip", maglevBackends(3, "{hash: client_ip}"), &Maglev{Hash: "client_ip"}, "client_ip", 16381, 64 * (1 + 512)},
		{"hash five_tuple", maglevBackends(3, "{hash: five_tuple}"), &Maglev{Hash: "five_tuple"}, "five_tuple", 16381, 64 * (1 + 512)},
		{"an empty maglev section", maglevBackends(3, "{}"), &Maglev{Hash: "five_tuple"}, "five_tuple", 16381, 64 * (1 + 512)},
		{"table_size", maglevBackends(3, "{table_size: 32749}"), &Maglev{Hash: "five_tuple", TableSize: 32749}, "five_tuple", 32749, 64 * (1 + 1024)},
		{"any prime in range", maglevBackends(3, "{table_size: 20011}"), &Maglev{Hash: "five_tuple", TableSize: 20011}, "five_tuple", 20011, 64 * (1 + 626)},
		{"the largest table", maglevBackends(3, "{table_size: 1048573}"), &Maglev{Hash: "five_tuple", TableSize: 1048573}, "five_tuple", 1048573, 64 * (1 + 32768)},
		{"32 backends: 500 slots each", maglevBackends(32, ""), nil, "five_tuple", 16381, 64 * (1 + 512)},
		{"33 backends: the next size", maglevBackends(33, ""), nil, "five_tuple", 32749, 64 * (1 + 1024)},
		{"100 backends", maglevBackends(100, ""), nil, "five_tuple", 65521, 64 * (1 + 2048)},
		{"1000 backends", maglevBackends(1000, ""), nil, "five_tuple", 524287, 64 * (1 + 16384)},
		{"163 backends fill a table of 16381", maglevBackends(163, "{table_size: 16381}"), &Maglev{Hash: "five_tuple", TableSize: 16381}, "five_tuple", 16381, 64 * (1 + 512)},
		{"kubernetes", kube, nil, "five_tuple", DefaultKubernetesTableSize, 64 * (1 + 2048)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &mustParse(t, tc.src).Services[0]
			if (s.Maglev == nil) != (tc.maglev == nil) || (s.Maglev != nil && *s.Maglev != *tc.maglev) {
				t.Errorf("Maglev = %+v, want %+v", s.Maglev, tc.maglev)
			}
			if s.MaglevHash() != tc.hash || s.TableSize() != tc.size || s.TableMemory() != tc.memory {
				t.Errorf("MaglevHash %q, TableSize %d, TableMemory %d; want %q, %d, %d", s.MaglevHash(), s.TableSize(), s.TableMemory(), tc.hash, tc.size, tc.memory)
			}
		})
	}
	for _, w := range []string{"1", "256"} {
		mustParse(t, strings.Replace(weighted("maglev"), "weight: 3", "weight: "+w, 1))
	}
}

// TestWeightsIgnoredByRoundRobinWarns: weights on a round_robin service
// are not refused (the issue refuses only weights out of range); they
// give one warning per service, at the first weight.
func TestWeightsIgnoredByRoundRobinWarns(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"services form", weighted("round_robin"),
			[]string{`t.yaml:9: services[1].provider.static.backends[0].weight: weights are ignored by round_robin (2 backends give one); set scheduler: weighted_round_robin or maglev to use them`}},
		{"services form, default scheduler", strings.Replace(weighted("round_robin"), "    scheduler: round_robin\n", "", 1),
			[]string{`t.yaml:9: services[1].provider.static.backends[0].weight: weights are ignored by round_robin (2 backends give one); set scheduler: weighted_round_robin or maglev to use them`}},
		{"top-level form", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: 198.51.100.11\n      - {ip: 198.51.100.12, weight: 2}\n",
			[]string{`t.yaml:7: provider.static.backends[1].weight: weights are ignored by round_robin (1 backend gives one); the top-level form's service is round robin; list it under services: with scheduler weighted_round_robin or maglev to use them`}},
		{"weighted_round_robin", weighted("weighted_round_robin"), nil},
		{"maglev", weighted("maglev"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, warnings, err := parseT(t, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(warnings, tc.want) {
				t.Errorf("warnings\n%q\nwant\n%q", warnings, tc.want)
			}
		})
	}
}

// TestSchedulerRefusals: the refusals, each with its file, line
// and field.
func TestSchedulerRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"weight 0", strings.Replace(weighted("weighted_round_robin"), "weight: 3", "weight: 0", 1),
			`t.yaml:9: services[1].provider.static.backends[0].weight: must be between 1 and 256, got 0`},
		{"weight 257", strings.Replace(weighted("maglev"), "weight: 1}", "weight: 257}", 1),
			`t.yaml:9: services[1].provider.static.backends[2].weight: must be between 1 and 256, got 257`},
		{"weight x", strings.Replace(weighted("weighted_round_robin"), "weight: 3", "weight: x", 1),
			`t.yaml:9: services[1].provider.static.backends[0].weight: must be an integer, got string "x"`},
		{"weight -1", strings.Replace(weighted("weighted_round_robin"), "weight: 3", "weight: -1", 1),
			`t.yaml:9: services[1].provider.static.backends[0].weight: must be between 1 and 256, got -1`},
		{"maglev under weighted_round_robin", weighted("weighted_round_robin", "maglev: {hash: client_ip}"),
			`t.yaml:11: services[1].maglev: maglev settings apply only to scheduler maglev; the scheduler is weighted_round_robin (set scheduler: maglev, or remove maglev)`},
		{"maglev under round_robin", webService + api("name: api", append(slices.Clone(apiRest), "scheduler: round_robin", "maglev: {table_size: 16381}")...),
			`t.yaml:11: services[1].maglev: maglev settings apply only to scheduler maglev; the scheduler is round_robin (set scheduler: maglev, or remove maglev)`},
		{"maglev under the default scheduler", webService + api("name: api", append(slices.Clone(apiRest), "maglev: {hash: client_ip}")...),
			`t.yaml:10: services[1].maglev: maglev settings apply only to scheduler maglev; the scheduler is round_robin (set scheduler: maglev, or remove maglev)`},
		{"maglev in the top-level form", minimal + "maglev: {hash: client_ip}\n",
			`t.yaml:7: unknown field "maglev" (valid fields: name, listen, proto, mode, ports, provider, health_check, udp_unreplied_max, orphan_ttl_secs, shutdown_timeout, admin, metrics, interfaces, xdp_mode, snat, flow_table, state_dir, bgp, services)`},
		{"scheduler unknown", weighted("wrr"),
			`t.yaml:10: services[1].scheduler: must be one of round_robin, weighted_round_robin, maglev; got "wrr"`},
		{"hash src", maglevBackends(3, "{hash: src}"),
			`t.yaml:7: services[0].maglev.hash: must be "five_tuple" or "client_ip", got "src"`},
		{"unknown maglev key", maglevBackends(3, "{hash: client_ip, size: 16381}"),
			`t.yaml:7: services[0].maglev: unknown field "size" (did you mean "table_size"?)`},
		{"table_size 16000", maglevBackends(3, "{table_size: 16000}"),
			`t.yaml:7: services[0].maglev.table_size: must be a prime between 16381 and 1048573, got 16000 (the default sizes are 16381, 32749, 65521, 131071, 262139, 524287, 1048573)`},
		{"table_size 16383, not prime", maglevBackends(3, "{table_size: 16383}"),
			`t.yaml:7: services[0].maglev.table_size: must be a prime, got 16383; the nearest primes are 16381 and 16411 (the default sizes are 16381, 32749, 65521, 131071, 262139, 524287, 1048573)`},
		{"table_size 1048583, prime but too large", maglevBackends(3, "{table_size: 1048583}"),
			`t.yaml:7: services[0].maglev.table_size: must be a prime between 16381 and 1048573, got 1048583 (the default sizes are 16381, 32749, 65521, 131071, 262139, 524287, 1048573)`},
		{"table_size 0", maglevBackends(3, "{table_size: 0}"),
			`t.yaml:7: services[0].maglev.table_size: must be a prime between 16381 and 1048573, got 0 (the default sizes are 16381, 32749, 65521, 131071, 262139, 524287, 1048573)`},
		{"table_size -1", maglevBackends(3, "{table_size: -1}"),
			`t.yaml:7: services[0].maglev.table_size: must be a prime between 16381 and 1048573, got -1 (the default sizes are 16381, 32749, 65521, 131071, 262139, 524287, 1048573)`},
		{"table_size beyond 32 bits", maglevBackends(3, "{table_size: 4294967296}"),
			`t.yaml:7: services[0].maglev.table_size: must be a prime between 16381 and 1048573, got 4294967296 (the default sizes are 16381, 32749, 65521, 131071, 262139, 524287, 1048573)`},
		{"200 static backends with table_size 16381", maglevBackends(200, "{table_size: 16381}"),
			`t.yaml:7: services[0].maglev.table_size: a table of 16381 slots holds at most 163 backends (100 slots each), and the service has 200 static backends; use table_size 32749 or more, or omit it (131071 for 200 backends)`},
		{"164 static backends with table_size 16381", maglevBackends(164, "{table_size: 16381}"),
			`t.yaml:7: services[0].maglev.table_size: a table of 16381 slots holds at most 163 backends (100 slots each), and the service has 164 static backends; use table_size 32749 or more, or omit it (131071 for 164 backends)`},
	} {
		t.Run(tc.name, func(t *testing.T) { wantError(t, tc.src, tc.want) })
	}
}

// TestSchedulerRoundTrip: Marshal writes scheduler, maglev (as the file
// set it: an omitted table_size stays omitted, so the default follows the
// backends) and weights other than 1, and parses back equal.
func TestSchedulerRoundTrip(t *testing.T) {
	for name, src := range map[string]string{
		"weighted_round_robin":          weighted("weighted_round_robin"),
		"maglev, no maglev key":         weighted("maglev"),
		"maglev client_ip":              weighted("maglev", "maglev: {hash: client_ip}"),
		"maglev table_size":             weighted("maglev", "maglev: {hash: client_ip, table_size: 32749}"),
		"maglev of kubernetes backends": "services:\n" + service("name: web", "listen: {ip: 192.0.2.10}", "ports: [{local_port: 80}]", "provider: {kubernetes: {namespace: prod, service: web}}", "scheduler: maglev", "maglev: {table_size: 131071}"),
	} {
		t.Run(name, func(t *testing.T) { roundTrip(t, mustParse(t, src)) })
	}
	out := string(roundTrip(t, mustParse(t, weighted("maglev", "maglev: {hash: client_ip, table_size: 32749}"))))
	if !strings.Contains(out, `    scheduler: maglev
    maglev:
      hash: client_ip
      table_size: 32749
    provider:
      static:
        backends:
          - name: a
            ip: 198.51.100.12
            weight: 3
          - name: b
            ip: 198.51.100.13
          - name: c
            ip: 198.51.100.14
mode: nat
`) {
		t.Errorf("Marshal:\n%s", out)
	}
}

// TestDiffSchedulers: a reload applies scheduler, maglev and weight
// changes (DESIGN §9); Diff names them: scheduler and maglev as keys of
// the service (maglev by its effective hash and table size), weights
// under provider.
func TestDiffSchedulers(t *testing.T) {
	rr, _, err := parseT(t, weighted("round_robin")) // warns: weights are ignored
	if err != nil {
		t.Fatal(err)
	}
	wrr := mustParse(t, weighted("weighted_round_robin"))
	mg := mustParse(t, weighted("maglev"))
	mgDefault := mustParse(t, weighted("maglev", "maglev: {hash: five_tuple}"))
	mgSameSize := mustParse(t, weighted("maglev", "maglev: {table_size: 16381}"))
	mgClient := mustParse(t, weighted("maglev", "maglev: {hash: client_ip}"))
	mgSize := mustParse(t, weighted("maglev", "maglev: {table_size: 32749}"))
	reweighted := mustParse(t, strings.Replace(weighted("weighted_round_robin"), "weight: 3", "weight: 4", 1))
	checkDiffs(t, []diffCase{
		{"round_robin to weighted_round_robin", rr, wrr, []string{"services[api].scheduler"}},
		{"weighted_round_robin to maglev", wrr, mg, []string{"services[api].maglev", "services[api].scheduler"}},
		{"maglev to round_robin", mg, rr, []string{"services[api].maglev", "services[api].scheduler"}},
		{"the defaults spelled out", mg, mgDefault, nil},
		{"the default size spelled out", mg, mgSameSize, nil},
		{"hash", mg, mgClient, []string{"services[api].maglev"}},
		{"table_size", mg, mgSize, []string{"services[api].maglev"}},
		{"a weight", wrr, reweighted, []string{"services[api].provider"}},
		{"backends crossing a default size", mustParse(t, maglevBackends(32, "")), mustParse(t, maglevBackends(33, "")),
			[]string{"services[web].maglev", "services[web].provider"}},
		{"backends within a default size", mustParse(t, maglevBackends(3, "")), mustParse(t, maglevBackends(4, "")),
			[]string{"services[web].provider"}},
	})
}

// TestMaglevStarvedWeightWarns: a configured table too small for the
// lightest backend's weight (less than one slot: m × w / Σw < 1) warns
// once, naming that backend; the default sizes never starve one.
func TestMaglevStarvedWeightWarns(t *testing.T) {
	starved := func(size string) string {
		bs := []string{"{name: light, ip: 172.16.0.1, weight: 1}"}
		for j := range 162 {
			bs = append(bs, fmt.Sprintf("{ip: 172.16.1.%d, weight: 256}", j+1))
		}
		src := "services:\n" + service("name: web", "listen: {ip: 192.0.2.10}", "ports: [{local_port: 80}]",
			"provider: {static: {backends: ["+strings.Join(bs, ", ")+"]}}", "scheduler: maglev")
		if size != "" {
			src += "    maglev: {table_size: " + size + "}\n"
		}
		return src
	}
	for _, tc := range []struct {
		name, size string
		want       []string
	}{
		{"16381", "16381", []string{`t.yaml:5: services[0].provider.static.backends[0].weight: weight 1 of the weights' sum 41473 gives backend light 0.39 of the Maglev table's 16381 slots: it may get no new connections; raise table_size or its weight`}},
		{"65521", "65521", nil},
		{"default", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, warnings, err := parseT(t, starved(tc.size))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(warnings, tc.want) {
				t.Errorf("warnings\n%q\nwant\n%q", warnings, tc.want)
			}
		})
	}
}
