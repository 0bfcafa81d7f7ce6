package config

import (
	"strings"
	"testing"
	"time"
)

// TestHealthCheckDefaults: an omitted block is no checks; each type gets
// the defaults of DESIGN §6b, path and expect_status only with http; an
// interval below the default timeout lowers the default timeout.
func TestHealthCheckDefaults(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want *HealthCheck
	}{
		{"absent", minimal, nil},
		{"null", minimal + "health_check:\n", nil},
		{"tcp", minimal + "health_check: {type: tcp}\n",
			&HealthCheck{Type: "tcp", Interval: 2 * time.Second, Timeout: time.Second, Rise: 2, Fall: 3}},
		{"http", minimal + "health_check: {type: http}\n",
			&HealthCheck{Type: "http", Interval: 2 * time.Second, Timeout: time.Second, Rise: 2, Fall: 3, Path: "/", ExpectStatus: 200}},
		{"interval below the default timeout", minimal + "health_check: {type: tcp, interval_ms: 400}\n",
			&HealthCheck{Type: "tcp", Interval: 400 * time.Millisecond, Timeout: 400 * time.Millisecond, Rise: 2, Fall: 3}},
		{"port 0 is the default", minimal + "health_check: {type: tcp, port: 0}\n",
			&HealthCheck{Type: "tcp", Interval: 2 * time.Second, Timeout: time.Second, Rise: 2, Fall: 3}},
		{"every field at its bounds", minimal + "health_check:\n  type: http\n  port: 65535\n  interval_ms: 3600000\n  timeout_ms: 3600000\n  rise: 1\n  fall: 100\n  path: /healthz?deep=1\n  expect_status: 100\n",
			&HealthCheck{Type: "http", Port: 65535, Interval: time.Hour, Timeout: time.Hour, Rise: 1, Fall: 100, Path: "/healthz?deep=1", ExpectStatus: 100}},
		{"timeout at the floor", minimal + "health_check: {type: tcp, interval_ms: 100, timeout_ms: 10}\n",
			&HealthCheck{Type: "tcp", Interval: 100 * time.Millisecond, Timeout: 10 * time.Millisecond, Rise: 2, Fall: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustParse(t, tt.yaml).HealthCheck
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("HealthCheck = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestHealthCheckRules has one case per rule of health_check, each with
// the complete error text (file, line, field).
func TestHealthCheckRules(t *testing.T) {
	hc := func(body string) string { return minimal + "health_check:\n" + body }
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"not a mapping", minimal + "health_check: tcp\n", `t.yaml:7: health_check: must be a mapping, got string "tcp"`},
		{"empty", minimal + "health_check: {}\n", `t.yaml:7: health_check: missing field "type"`},
		{"type missing", hc("  interval_ms: 1000\n"), `t.yaml:7: health_check: missing field "type"`},
		{"type unknown", hc("  type: icmp\n"), `t.yaml:8: health_check.type: must be "tcp", "http" or "udp", got "icmp"`},
		{"type not a string", hc("  type: [tcp]\n"), `t.yaml:8: health_check.type: must be a string, got a sequence`},
		{"unknown field", hc("  type: tcp\n  intervall_ms: 1000\n"), `t.yaml:9: health_check: unknown field "intervall_ms" (did you mean "interval_ms"?)`},
		{"port negative", hc("  type: tcp\n  port: -1\n"), `t.yaml:9: health_check.port: must be between 0 and 65535, got -1`},
		{"port too big", hc("  type: tcp\n  port: 65536\n"), `t.yaml:9: health_check.port: must be between 0 and 65535, got 65536`},
		{"interval below the floor", hc("  type: tcp\n  interval_ms: 99\n"), `t.yaml:9: health_check.interval_ms: must be between 100 and 3600000 milliseconds, got 99`},
		{"interval above an hour", hc("  type: tcp\n  interval_ms: 3600001\n"), `t.yaml:9: health_check.interval_ms: must be between 100 and 3600000 milliseconds, got 3600001`},
		{"interval not an integer", hc("  type: tcp\n  interval_ms: 2s\n"), `t.yaml:9: health_check.interval_ms: must be an integer, got string "2s"`},
		{"timeout below the floor", hc("  type: tcp\n  timeout_ms: 9\n"), `t.yaml:9: health_check.timeout_ms: must be between 10 and 3600000 milliseconds (and at most interval_ms), got 9`},
		{"timeout above the interval", hc("  type: tcp\n  interval_ms: 1000\n  timeout_ms: 1001\n"), `t.yaml:10: health_check.timeout_ms: must be at most interval_ms (1000), got 1001`},
		{"timeout above the default interval", hc("  type: tcp\n  timeout_ms: 2500\n"), `t.yaml:9: health_check.timeout_ms: must be at most interval_ms (2000), got 2500`},
		{"rise 0", hc("  type: tcp\n  rise: 0\n"), `t.yaml:9: health_check.rise: must be between 1 and 100, got 0`},
		{"rise 101", hc("  type: tcp\n  rise: 101\n"), `t.yaml:9: health_check.rise: must be between 1 and 100, got 101`},
		{"fall 0", hc("  type: tcp\n  fall: 0\n"), `t.yaml:9: health_check.fall: must be between 1 and 100, got 0`},
		{"fall 101", hc("  type: tcp\n  fall: 101\n"), `t.yaml:9: health_check.fall: must be between 1 and 100, got 101`},
		{"path with tcp", hc("  type: tcp\n  path: /healthz\n"), `t.yaml:9: health_check.path: only type http has path (type is tcp)`},
		{"expect_status with tcp", hc("  type: tcp\n  expect_status: 200\n"), `t.yaml:9: health_check.expect_status: only type http has expect_status (type is tcp)`},
		{"path without a slash", hc("  type: http\n  path: healthz\n"), `t.yaml:9: health_check.path: must start with "/" and contain no whitespace or control characters, got "healthz"`},
		{"path empty", hc("  type: http\n  path: \"\"\n"), `t.yaml:9: health_check.path: must start with "/" and contain no whitespace or control characters, got ""`},
		{"path with a space", hc("  type: http\n  path: \"/a b\"\n"), `t.yaml:9: health_check.path: must start with "/" and contain no whitespace or control characters, got "/a b"`},
		{"path with a control character", hc("  type: http\n  path: \"/a\\rb\"\n"), `t.yaml:9: health_check.path: must start with "/" and contain no whitespace or control characters, got "/a\rb"`},
		{"path not a string", hc("  type: http\n  path: {a: b}\n"), `t.yaml:9: health_check.path: must be a string, got a mapping`},
		{"expect_status 99", hc("  type: http\n  expect_status: 99\n"), `t.yaml:9: health_check.expect_status: must be between 100 and 599, got 99`},
		{"expect_status 600", hc("  type: http\n  expect_status: 600\n"), `t.yaml:9: health_check.expect_status: must be between 100 and 599, got 600`},
		{"expect_status quoted", hc("  type: http\n  expect_status: \"200\"\n"), `t.yaml:9: health_check.expect_status: must be an integer, got string "200"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantError(t, tt.yaml, tt.want) })
	}
}

// An error in one field does not add errors about the fields that depend
// on it: a bad interval is not compared with the timeout, a bad type does
// not judge path.
func TestHealthCheckOneErrorPerMistake(t *testing.T) {
	wantError(t, minimal+"health_check: {type: tcp, interval_ms: 50, timeout_ms: 3000}\n",
		`t.yaml:7: health_check.interval_ms: must be between 100 and 3600000 milliseconds, got 50`)
	wantError(t, minimal+"health_check: {type: icmp, path: /x, expect_status: 200}\n",
		`t.yaml:7: health_check.type: must be "tcp", "http" or "udp", got "icmp"`)
}

// TestMarshalHealthCheckAndKubernetes pins how `xlb check` prints the
// health_check block (after provider; path and expect_status only for
// http) and a kubernetes provider with a remote_port from discovery
// (omitted).
func TestMarshalHealthCheckAndKubernetes(t *testing.T) {
	src := "ports:\n  - local_port: 80\n  - {local_port: 443, remote_port: 8443}\nprovider:\n  kubernetes: {namespace: prod, service: web, port_name: http}\nhealth_check: {type: http, interval_ms: 500}\n"
	out := string(roundTrip(t, mustParse(t, src)))
	want := `ports:
  - local_port: 80
  - local_port: 443
    remote_port: 8443
provider:
  kubernetes:
    namespace: prod
    service: web
    kubeconfig: ""
    port_name: http
health_check:
  type: http
  port: 0
  interval_ms: 500
  timeout_ms: 500
  rise: 2
  fall: 3
  path: /
  expect_status: 200
orphan_ttl_secs: 300
`
	if i, j := strings.Index(out, "ports:"), strings.Index(out, "shutdown_timeout:"); i < 0 || j < 0 || out[i:j] != want {
		t.Errorf("Marshal =\n%s\nwant the part\n%s", out, want)
	}
	tcp := string(roundTrip(t, mustParse(t, minimal+"health_check: {type: tcp}\n")))
	if strings.Contains(tcp, "path:") || strings.Contains(tcp, "expect_status:") {
		t.Errorf("Marshal of a tcp check has http fields:\n%s", tcp)
	}
}

func TestMarshalHealthCheckErrors(t *testing.T) {
	c := mustParse(t, minimal+"health_check: {type: tcp}\n")
	c.HealthCheck.Timeout = 1500 * time.Microsecond
	if _, err := c.Marshal(); err == nil || !strings.Contains(err.Error(), "health_check.timeout_ms: 1.5ms is not a whole number of milliseconds") {
		t.Errorf("Marshal(fractional timeout) error = %v", err)
	}
}

func TestDiffHealthCheck(t *testing.T) {
	none := mustParse(t, minimal)
	tcp := mustParse(t, minimal+"health_check: {type: tcp}\n")
	tcp2 := mustParse(t, minimal+"health_check:\n  type: tcp\n  interval_ms: 2000\n")
	fall := mustParse(t, minimal+"health_check: {type: tcp, fall: 4}\n")
	checkDiffs(t, []diffCase{
		{"added", none, tcp, []string{"health_check"}},
		{"removed", tcp, none, []string{"health_check"}},
		{"equal, distinct pointers, default spelled out", tcp, tcp2, nil},
		{"fall changed", tcp, fall, []string{"health_check"}},
	})
}
