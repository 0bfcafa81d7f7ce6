package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// dnsQuery is the README's health check payload: a DNS query for ". IN NS".
const dnsQuery = "5842010000010000000000000000020001"

// udpService is a valid proto udp service (lines 6-10 after webService);
// a field appended to it is on line 11.
var udpService = service("name: dns", "listen: {ip: 192.0.2.53}", "proto: udp", "ports: [{local_port: 53, remote_port: 5353}]",
	"provider: {static: {backends: [{ip: 198.51.100.53}]}}")

// TestUDPKeys (issue 31): proto udp in both forms, the flow table's two
// UDP timeouts with their defaults, udp_unreplied_max's default of a
// quarter of max_connections (at least 1), and the udp health check.
func TestUDPKeys(t *testing.T) {
	c := mustParse(t, minimal+"proto: udp\n")
	if s := c.Services[0]; s.Proto != ProtoUDP || s.UDPUnrepliedMax != 0 || c.UDPUnrepliedMax(&s) != DefaultMaxConnections/4 {
		t.Errorf("top-level udp service = %+v, effective cap %d", s, c.UDPUnrepliedMax(&s))
	}
	if ft := c.FlowTable; ft.UDPTimeout != 30*time.Second || ft.UDPStreamTimeout != 120*time.Second {
		t.Errorf("flow_table = %+v, want the UDP timeouts 30 s and 120 s", ft)
	}
	c = mustParse(t, minimal+"proto: udp\nudp_unreplied_max: 7\nflow_table: {max_connections: 7, udp_timeout_secs: 1, udp_stream_timeout_secs: 1}\n")
	if s := c.Services[0]; s.UDPUnrepliedMax != 7 || c.UDPUnrepliedMax(&s) != 7 {
		t.Errorf("udp_unreplied_max at max_connections: %+v", s)
	}
	if ft := c.FlowTable; ft.UDPTimeout != time.Second || ft.UDPStreamTimeout != time.Second {
		t.Errorf("flow_table = %+v, want both UDP timeouts at 1 s", ft)
	}
	c = mustParse(t, minimal+"proto: udp\nflow_table: {max_connections: 3, udp_timeout_secs: 604800, udp_stream_timeout_secs: 604800}\n")
	if s := c.Services[0]; c.UDPUnrepliedMax(&s) != 1 {
		t.Errorf("default cap of a 3-pair table = %d, want 1", c.UDPUnrepliedMax(&s))
	}
	tcp := mustParse(t, minimal)
	if got := tcp.UDPUnrepliedMax(&tcp.Services[0]); got != 0 {
		t.Errorf("a tcp service's cap = %d, want 0", got)
	}

	c = mustParse(t, webService+udpService+"    udp_unreplied_max: 1000\n    health_check: {type: udp, payload_hex: \""+dnsQuery+"\", expect_hex: 5842}\n")
	s := c.Services[1]
	want := HealthCheck{Type: "udp", Interval: 2 * time.Second, Timeout: time.Second, Rise: 2, Fall: 3,
		Payload: "\x58\x42\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01", Expect: "XB"}
	if s.Proto != ProtoUDP || s.UDPUnrepliedMax != 1000 || s.HealthCheck == nil || *s.HealthCheck != want {
		t.Errorf("services[1] = %+v, health check %+v", s, s.HealthCheck)
	}
	// tcp and http checks stay allowed on a UDP service (DNS serves TCP 53).
	mustParse(t, webService+udpService+"    health_check: {type: tcp, port: 53}\n")
	mustParse(t, minimal+"proto: udp\nhealth_check: {type: http, port: 8080}\n")
	// Upper case hex is hex; without expect_hex any reply passes.
	c = mustParse(t, minimal+"proto: udp\nhealth_check: {type: udp, payload_hex: 0A0b}\n")
	if hc := c.HealthCheck; hc.Payload != "\x0a\x0b" || hc.Expect != "" {
		t.Errorf("health check = %+v", hc)
	}
}

// TestUDPRefusals has one case per rule of issue 31's keys, each with the
// complete error text (file, line, field).
func TestUDPRefusals(t *testing.T) {
	long := strings.Repeat("00", MaxHealthCheckPayload+1)
	udpHC := func(body string) string { return minimal + "proto: udp\nhealth_check:\n  type: udp\n" + body }
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"udp_timeout_secs 0", minimal + "flow_table: {udp_timeout_secs: 0}\n", `t.yaml:7: flow_table.udp_timeout_secs: must be between 1 and 604800 seconds, got 0`},
		{"udp_timeout_secs above seven days", minimal + "flow_table: {udp_timeout_secs: 604801}\n", `t.yaml:7: flow_table.udp_timeout_secs: must be between 1 and 604800 seconds, got 604801`},
		{"udp_timeout_secs not an integer", minimal + "flow_table: {udp_timeout_secs: 30s}\n", `t.yaml:7: flow_table.udp_timeout_secs: must be an integer, got string "30s"`},
		{"udp_stream_timeout_secs 0", minimal + "flow_table: {udp_stream_timeout_secs: 0}\n", `t.yaml:7: flow_table.udp_stream_timeout_secs: must be between 1 and 604800 seconds (and at least udp_timeout_secs), got 0`},
		{"udp_stream_timeout_secs below udp_timeout_secs", minimal + "flow_table:\n  udp_stream_timeout_secs: 10\n", `t.yaml:8: flow_table.udp_stream_timeout_secs: must be at least udp_timeout_secs (30), got 10`},
		{"udp_stream_timeout_secs below a raised udp_timeout_secs", minimal + "flow_table:\n  udp_timeout_secs: 200\n  udp_stream_timeout_secs: 120\n", `t.yaml:9: flow_table.udp_stream_timeout_secs: must be at least udp_timeout_secs (200), got 120`},
		{"udp_stream_timeout_secs below the default udp_timeout_secs", minimal + "flow_table: {udp_timeout_secs: 121}\n", `t.yaml:7: flow_table.udp_stream_timeout_secs: must be at least udp_timeout_secs (121), got 120`},

		{"udp_unreplied_max on a tcp service", minimal + "udp_unreplied_max: 10\n", `t.yaml:7: udp_unreplied_max: udp_unreplied_max is for proto udp services (proto is tcp)`},
		{"udp_unreplied_max on a listed tcp service", twoServices + "    udp_unreplied_max: 10\n", `t.yaml:10: services[1].udp_unreplied_max: udp_unreplied_max is for proto udp services (proto is tcp)`},
		{"udp_unreplied_max 0", minimal + "proto: udp\nudp_unreplied_max: 0\n", `t.yaml:8: udp_unreplied_max: must be between 1 and 16777216 (and at most flow_table.max_connections), got 0`},
		{"udp_unreplied_max above max_connections", minimal + "proto: udp\nudp_unreplied_max: 101\nflow_table: {max_connections: 100}\n", `t.yaml:8: udp_unreplied_max: must be at most flow_table.max_connections (100), got 101`},
		{"udp_unreplied_max above the default max_connections", webService + udpService + "    udp_unreplied_max: 262145\n", `t.yaml:11: services[1].udp_unreplied_max: must be at most flow_table.max_connections (262144), got 262145`},
		{"udp_unreplied_max at the top level of the services form", webService + "udp_unreplied_max: 10\n", `t.yaml:6: udp_unreplied_max: the file lists services:, so udp_unreplied_max belongs inside each service (a file uses the top-level form or services:, not both)`},
		{"udp_unreplied_max not an integer", minimal + "proto: udp\nudp_unreplied_max: many\n", `t.yaml:8: udp_unreplied_max: must be an integer, got string "many"`},

		{"health check udp on a tcp service", minimal + "health_check: {type: udp, payload_hex: \"00\"}\n", `t.yaml:7: health_check.type: type udp is for proto udp services; use tcp or http`},
		{"health check udp on a listed tcp service", twoServices + "    health_check:\n      type: udp\n      payload_hex: \"00\"\n", `t.yaml:11: services[1].health_check.type: type udp is for proto udp services; use tcp or http`},
		{"payload_hex missing", udpHC(""), `t.yaml:8: health_check: missing field "payload_hex"`},
		{"payload_hex odd", udpHC("  payload_hex: abc\n"), `t.yaml:10: health_check.payload_hex: must be an even number of hex digits (0-9, a-f), got "abc"`},
		{"payload_hex not hex", udpHC("  payload_hex: zz\n"), `t.yaml:10: health_check.payload_hex: must be an even number of hex digits (0-9, a-f), got "zz"`},
		{"payload_hex empty", udpHC("  payload_hex: \"\"\n"), `t.yaml:10: health_check.payload_hex: must name 1 to 512 bytes (2 to 1024 hex digits), got 0`},
		{"payload_hex too long", udpHC("  payload_hex: " + long + "\n"), `t.yaml:10: health_check.payload_hex: must name 1 to 512 bytes (2 to 1024 hex digits), got 513`},
		{"payload_hex not a string", udpHC("  payload_hex: [00]\n"), `t.yaml:10: health_check.payload_hex: must be a string, got a sequence`},
		{"expect_hex too long", udpHC("  payload_hex: \"00\"\n  expect_hex: " + strings.Repeat("ab", 65) + "\n"), `t.yaml:11: health_check.expect_hex: must name 1 to 64 bytes (2 to 128 hex digits), got 65`},
		{"expect_hex not hex", udpHC("  payload_hex: \"00\"\n  expect_hex: \"0x00\"\n"), `t.yaml:11: health_check.expect_hex: must be an even number of hex digits (0-9, a-f), got "0x00"`},
		{"path with udp", udpHC("  payload_hex: \"00\"\n  path: /\n"), `t.yaml:11: health_check.path: only type http has path (type is udp)`},
		{"expect_status with udp", udpHC("  payload_hex: \"00\"\n  expect_status: 200\n"), `t.yaml:11: health_check.expect_status: only type http has expect_status (type is udp)`},
		{"payload_hex with tcp", minimal + "proto: udp\nhealth_check: {type: tcp, payload_hex: \"00\"}\n", `t.yaml:8: health_check.payload_hex: only type udp has payload_hex (type is tcp)`},
		{"expect_hex with http", minimal + "health_check:\n  type: http\n  expect_hex: \"00\"\n", `t.yaml:9: health_check.expect_hex: only type udp has expect_hex (type is http)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantError(t, tt.yaml, tt.want) })
	}
}

// TestUDPUnrepliedMaxSumWarns: one warning when the UDP services' caps
// add up to more than the flow table (issue 31); none at the table's size.
func TestUDPUnrepliedMaxSumWarns(t *testing.T) {
	dns2 := service("name: dns2", "listen: {ip: 192.0.2.54}", "proto: udp", "ports: [{local_port: 53}]",
		"provider: {static: {backends: [{ip: 198.51.100.54}]}}")
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"two defaults fit", webService + udpService + dns2, nil},
		{"at the table's size", webService + udpService + "    udp_unreplied_max: 100\n" + dns2 + "    udp_unreplied_max: 100\nflow_table: {max_connections: 200}\n", nil},
		{"beyond it", webService + udpService + "    udp_unreplied_max: 100\n" + dns2 + "flow_table: {max_connections: 120}\n",
			[]string{`t.yaml:1: services: the 2 UDP services' udp_unreplied_max add up to 130, more than flow_table.max_connections (120): floods on these services together could fill the flow table TCP needs; lower udp_unreplied_max`}},
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

// TestUDPRoundTrip: `xlb check` prints the UDP keys back (the timeouts
// always, udp_unreplied_max where the file sets it, the payload in lower
// case hex) and Parse of that output is the same Config.
func TestUDPRoundTrip(t *testing.T) {
	for name, src := range map[string]string{
		"top-level, defaults": minimal + "proto: udp\n",
		"top-level, every udp key": minimal + "proto: udp\nudp_unreplied_max: 9\nhealth_check: {type: udp, payload_hex: " + dnsQuery + ", expect_hex: 58AB}\n" +
			"flow_table: {udp_timeout_secs: 5, udp_stream_timeout_secs: 600}\n",
		"services":                 webService + udpService + "    udp_unreplied_max: 1000\n    health_check: {type: udp, payload_hex: \"" + dnsQuery + "\"}\n",
		"services, default cap":    webService + udpService,
		"services, tcp check port": webService + udpService + "    health_check: {type: tcp, port: 53}\n",
	} {
		t.Run(name, func(t *testing.T) { roundTrip(t, mustParse(t, src)) })
	}
	out := string(roundTrip(t, mustParse(t, webService+udpService+"    udp_unreplied_max: 1000\n    health_check: {type: udp, payload_hex: \"0A\", expect_hex: \"0B\"}\n")))
	for _, want := range []string{"\n    udp_unreplied_max: 1000\n", "\n      payload_hex: \"0a\"\n      expect_hex: \"0b\"\n",
		"\n  udp_timeout_secs: 30\n  udp_stream_timeout_secs: 120\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("Marshal has no %q:\n%s", want, out)
		}
	}
	if tcp := string(roundTrip(t, mustParse(t, webService))); strings.Contains(tcp, "udp_unreplied_max") || strings.Contains(tcp, "_hex") {
		t.Errorf("Marshal of a tcp service has UDP keys:\n%s", tcp)
	}
}

// TestDiffUDP: the timeouts are flow_table's; a service's proto, cap and
// check are its keys; a default cap is named by nothing but max_connections.
func TestDiffUDP(t *testing.T) {
	base := mustParse(t, webService+udpService)
	checkDiffs(t, []diffCase{
		{"timeout", mustParse(t, minimal), mustParse(t, minimal+"flow_table: {udp_timeout_secs: 20}\n"), []string{"flow_table"}},
		{"stream timeout", mustParse(t, minimal), mustParse(t, minimal+"flow_table: {udp_stream_timeout_secs: 300}\n"), []string{"flow_table"}},
		{"proto", mustParse(t, webService+strings.Replace(udpService, "proto: udp", "proto: tcp", 1)), base, []string{"services[dns].proto"}},
		{"cap", base, mustParse(t, webService+udpService+"    udp_unreplied_max: 10\n"), []string{"services[dns].udp_unreplied_max"}},
		{"cap spelled as the default", base, mustParse(t, webService+udpService+"    udp_unreplied_max: 65536\n"), []string{"services[dns].udp_unreplied_max"}},
		{"udp check", base, mustParse(t, webService+udpService+"    health_check: {type: udp, payload_hex: \"00\"}\n"), []string{"services[dns].health_check"}},
		{"payload", mustParse(t, webService+udpService+"    health_check: {type: udp, payload_hex: \"00\"}\n"),
			mustParse(t, webService+udpService+"    health_check: {type: udp, payload_hex: \"01\"}\n"), []string{"services[dns].health_check"}},
		{"top-level cap", mustParse(t, minimal+"proto: udp\n"), mustParse(t, minimal+"proto: udp\nudp_unreplied_max: 5\n"), []string{"udp_unreplied_max"}},
	})
}
