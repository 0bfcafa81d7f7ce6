package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c := mustParse(t, minimal)
	want := Default()
	want.Ports = []PortMapping{{LocalPort: 80, RemotePort: 80}}
	want.Provider = Provider{Static: &StaticProvider{Backends: []Backend{
		{Name: "198.51.100.11", IP: netip.MustParseAddr("198.51.100.11"), Weight: 1},
	}}}
	want.Services = want.ServiceList()
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Parse(minimal) =\n%+v\nwant\n%+v", c, want)
	}
	// The defaults of DESIGN §1, spelled out once.
	d := Default()
	checks := []struct {
		field string
		got   any
		want  any
	}{
		{"name", d.Name, "xlb"},
		{"listen", d.Listen, Listen{Auto: true}},
		{"proto", d.Proto, "tcp"},
		{"mode", d.Mode, "nat"},
		{"orphan_ttl_secs", d.OrphanTTL, 300 * time.Second},
		{"shutdown_timeout", d.ShutdownTimeout, 15 * time.Second},
		{"admin", d.Admin, Admin{Address: netip.MustParseAddr("127.0.0.1"), Port: 8642, Socket: "/run/xlb/admin.sock",
			AllowedHosts: []string{"localhost", "127.0.0.1", "::1"}}},
		{"metrics", d.Metrics, Metrics{Listener: Listener{Address: netip.MustParseAddr("0.0.0.0"), Port: 9642}, PerBackend: true}},
		{"interfaces", len(d.Interfaces), 0},
		{"xdp_mode", d.XDPMode, "auto"},
		{"snat", d.SNAT, SNAT{Auto: true, PortLo: 40000, PortHi: 59999}},
		{"flow_table", d.FlowTable, FlowTable{MaxConnections: 262144, EmbryonicTTL: 10 * time.Second, UDPTimeout: 30 * time.Second, UDPStreamTimeout: 120 * time.Second}},
		{"state_dir", d.StateDir, "/sys/fs/bpf/xlb"},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("default %s = %v, want %v", ch.field, ch.got, ch.want)
		}
	}
}

func TestRemotePortDefaultsToLocalPort(t *testing.T) {
	c := mustParse(t, "ports:\n  - local_port: 80\n  - {local_port: 443, remote_port: 8443}\n"+backendsOnly)
	want := []PortMapping{{80, 80}, {443, 8443}}
	if !reflect.DeepEqual(c.Ports, want) {
		t.Errorf("Ports = %v, want %v", c.Ports, want)
	}
}

func TestOrphanTTL(t *testing.T) {
	tests := []struct {
		value   string
		want    time.Duration
		warning string
	}{
		{"300", 300 * time.Second, ""},
		{"3600", time.Hour, ""},
		{"60", 300 * time.Second, "t.yaml:7: orphan_ttl_secs: 60 is below the minimum of 300 seconds; using 300"},
		{"299", 300 * time.Second, "t.yaml:7: orphan_ttl_secs: 299 is below the minimum of 300 seconds; using 300"},
		{"0", 300 * time.Second, "t.yaml:7: orphan_ttl_secs: 0 is below the minimum of 300 seconds; using 300"},
		{"-5", 300 * time.Second, "t.yaml:7: orphan_ttl_secs: -5 is below the minimum of 300 seconds; using 300"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c, warnings, err := parseT(t, minimal+"orphan_ttl_secs: "+tt.value+"\n")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if c.OrphanTTL != tt.want {
				t.Errorf("OrphanTTL = %v, want %v", c.OrphanTTL, tt.want)
			}
			switch {
			case tt.warning == "" && len(warnings) != 0:
				t.Errorf("warnings = %q, want none", warnings)
			case tt.warning != "" && (len(warnings) != 1 || warnings[0] != tt.warning):
				t.Errorf("warnings = %q, want exactly [%q]", warnings, tt.warning)
			}
		})
	}
}

// A warning is still returned when the file is rejected for another reason.
func TestWarningsWithErrors(t *testing.T) {
	_, warnings, err := parseT(t, minimal+"orphan_ttl_secs: 10\nxdp_mode: fast\n")
	if err == nil || len(warnings) != 1 {
		t.Fatalf("Parse = (warnings %q, err %v), want one warning and an error", warnings, err)
	}
}

func TestUnknownFields(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"top level, close to a known field", minimal + "orphan_ttl: 600\n",
			`t.yaml:7: unknown field "orphan_ttl" (did you mean "orphan_ttl_secs"?)`},
		{"top level, typo", "nmae: web\n" + minimal,
			`t.yaml:1: unknown field "nmae" (did you mean "name"?)`},
		{"top level, prefix of a known field", minimal + "listen_port: 80\n",
			`t.yaml:7: unknown field "listen_port" (did you mean "listen"?)`},
		{"top level, unrelated", minimal + "backends: []\n",
			`t.yaml:7: unknown field "backends" (valid fields: name, listen, proto, mode, ports, provider, health_check, udp_unreplied_max, orphan_ttl_secs, shutdown_timeout, admin, metrics, interfaces, xdp_mode, snat, flow_table, state_dir, bgp, services)`},
		{"in ports[]", "ports:\n  - local_port: 80\n  - local_port: 81\n    listen_port: 82\n" + backendsOnly,
			`t.yaml:4: ports[1]: unknown field "listen_port" (valid fields: local_port, remote_port)`},
		{"in provider", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends: [{ip: 10.0.0.1}]\n  consul: {}\n",
			`t.yaml:6: provider: unknown field "consul" (valid fields: static, kubernetes)`},
		{"in provider.static.backends[]", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: 10.0.0.1\n      - ip: 10.0.0.2\n        port: 2\n",
			`t.yaml:8: provider.static.backends[1]: unknown field "port" (valid fields: name, ip, weight)`},
		{"in admin.auth", minimal + "admin:\n  auth:\n    username: ops\n    password: secret\n",
			`t.yaml:10: admin.auth: unknown field "password" (valid fields: username)`},
		{"in provider.kubernetes", "ports:\n  - local_port: 80\nprovider:\n  kubernetes:\n    namespace: default\n    service: web\n    namspace: x\n",
			`t.yaml:7: provider.kubernetes: unknown field "namspace" (did you mean "namespace"?)`},
		{"duplicate field", minimal + "name: a\nname: b\n",
			`t.yaml:8: duplicate field "name" (first set on line 7)`},
		{"merge key", minimal + "admin:\n  <<: {port: 1}\n",
			`t.yaml:8: admin: merge keys (<<) are not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantError(t, tt.yaml, tt.want) })
	}
}

func TestDocumentErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"empty file", "", "t.yaml: empty config"},
		{"only whitespace", "\n  \n", "t.yaml: empty config"},
		{"only comments", "# xlb.yaml\n# nothing yet\n", "t.yaml: empty config"},
		{"only a document marker", "---\n# nothing\n", "t.yaml: empty config"},
		{"null document", "~\n", "t.yaml: empty config"},
		{"syntax error", "ports:\n  - local_port: 80\nprovider: {static: [\n", "t.yaml:3: YAML syntax error: did not find expected node content"},
		{"tab indentation", "admin:\n\tport: 1\n", "t.yaml:2: YAML syntax error: found character that cannot start any token"},
		{"two documents", minimal + "---\nname: second\n", "t.yaml:7: found a second YAML document; a config file holds exactly one"},
		{"top level sequence", "- local_port: 80\n", "t.yaml:1: the top level must be a mapping of fields, got a sequence"},
		{"top level scalar", "xlb\n", `t.yaml:1: the top level must be a mapping of fields, got string "xlb"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantError(t, tt.yaml, tt.want) })
	}
}

// TestAllErrorsSortedByLine: every problem is reported, one per line,
// sorted by line, and each is reachable as *Error.
func TestAllErrorsSortedByLine(t *testing.T) {
	src := `name: web
ports:
  - local_port: 0
  - local_port: 81
    remote_port: eighty
provider:
  static:
    backends:
      - ip: 127.0.0.1
      - ip: 10.0.0.1
        wieght: 1
admin:
  port: 0
xdp_mode: fast
typo: 1
`
	_, _, err := parseT(t, src)
	want := []string{
		`t.yaml:3: ports[0].local_port: must be between 1 and 65535, got 0`,
		`t.yaml:5: ports[1].remote_port: must be an integer, got string "eighty"`,
		`t.yaml:9: provider.static.backends[0].ip: must not be a loopback address, got 127.0.0.1`,
		`t.yaml:11: provider.static.backends[1]: unknown field "wieght" (did you mean "weight"?)`,
		`t.yaml:13: admin.port: must be between 1 and 65535, got 0`,
		`t.yaml:14: xdp_mode: must be one of auto, native, generic; got "fast"`,
		`t.yaml:15: unknown field "typo" (valid fields: name, listen, proto, mode, ports, provider, health_check, udp_unreplied_max, orphan_ttl_secs, shutdown_timeout, admin, metrics, interfaces, xdp_mode, snat, flow_table, state_dir, bgp, services)`,
	}
	if err == nil {
		t.Fatal("Parse: no error")
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != len(want) {
		t.Fatalf("errors.As(Errors) = %v, %d errors", errs, len(errs))
	}
	var first *Error
	if !errors.As(err, &first) {
		t.Fatal("errors.As(*Error) failed")
	}
	if *first != (Error{Source: "t.yaml", Line: 3, Path: "ports[0].local_port", Msg: "must be between 1 and 65535, got 0"}) {
		t.Errorf("first error = %+v", *first)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "xlb.yaml")
	if err := os.WriteFile(path, []byte(minimal+"flow_table: {max_connections: 0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(path)
	if want := path + ":7: flow_table.max_connections: must be between 1 and 16777216, got 0"; err == nil || err.Error() != want {
		t.Errorf("Load error = %v, want %s", err, want)
	}
	_, _, err = Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want os.ErrNotExist", err)
	}
}

// metrics.per_backend (issue 28 item 9): true by default, false drops the
// per-backend series; anything but a YAML boolean names file, line and
// field.
func TestMetricsPerBackend(t *testing.T) {
	if c := mustParse(t, minimal); !c.Metrics.PerBackend {
		t.Errorf("metrics.per_backend defaults to false, want true")
	}
	if c := mustParse(t, minimal+"metrics:\n  per_backend: false\n"); c.Metrics.PerBackend || c.Metrics.Port != DefaultMetricsPort {
		t.Errorf("metrics %+v: want per_backend false and the default port", c.Metrics)
	}
	wantError(t, minimal+"metrics:\n  per_backend: no\n", `t.yaml:8: metrics.per_backend: must be true or false, got string "no"`)
	wantError(t, minimal+"metrics:\n  per_backend: 0\n", `t.yaml:8: metrics.per_backend: must be true or false, got integer 0`)
}
