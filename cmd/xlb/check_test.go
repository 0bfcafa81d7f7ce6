package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// minimal is a small valid config: local_port on line 2; appended fields
// start on line 4.
const minimal = `ports:
  - local_port: 80
provider: {static: {backends: [{ip: 198.51.100.11}]}}
`

// withoutExposure drops the warnings about listeners reachable beyond
// loopback without auth from a check's stderr: the configs of these tests
// keep the metrics listener's default 0.0.0.0 (TestCheckListenerWarnings
// checks those warnings).
func withoutExposure(stderr string) string {
	var keep []string
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if !strings.Contains(l, "reachable beyond loopback without authentication") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// withBackends is a config with n static backends (backends: on line 5).
func withBackends(n int) string {
	var b strings.Builder
	b.WriteString("ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n")
	for i := range n {
		j := i + 1
		fmt.Fprintf(&b, "      - ip: 10.%d.%d.%d\n", j>>16&0xff, j>>8&0xff, j&0xff)
	}
	return b.String()
}

// withPorts is a config with n port mappings 1..n (ports: on line 1).
func withPorts(n int) string {
	var b strings.Builder
	b.WriteString("ports:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - local_port: %d\n", 1+i)
	}
	b.WriteString("provider:\n  static:\n    backends:\n      - ip: 198.51.100.11\n")
	return b.String()
}

// TestCheckLimits: xlb check enforces the data path's limits (bpf/layout.h
// through pkg/dataplane: 1024 backends, 8 port mappings; flow_table's
// 2^24 pairs; TCP ports) and says so with file, line and field; a number
// beyond 64 bits is reported as an overflow with the field's bounds.
func TestCheckLimits(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       string // stderr; "" for a valid config
	}{
		{"1024 backends", withBackends(1024), ""},
		{"1025 backends", withBackends(1025), "xlb.yaml:5: provider.static.backends: at most 1024 backends are supported (the data path's backend ids), got 1025"},
		{"70000 backends", withBackends(70000), "xlb.yaml:5: provider.static.backends: at most 1024 backends are supported (the data path's backend ids), got 70000"},
		{"8 port mappings", withPorts(8), ""},
		{"9 port mappings", withPorts(9), "xlb.yaml:1: ports: at most 8 port mappings are supported, got 9"},
		{"port 65535", strings.Replace(minimal, "80", "65535", 1), ""},
		{"port 65536", strings.Replace(minimal, "80", "65536", 1), "xlb.yaml:2: ports[0].local_port: must be between 1 and 65535, got 65536"},
		{"port 0", strings.Replace(minimal, "80", "0", 1), "xlb.yaml:2: ports[0].local_port: must be between 1 and 65535, got 0"},
		{"port overflow", strings.Replace(minimal, "80", "99999999999999999999", 1),
			"xlb.yaml:2: ports[0].local_port: must be between 1 and 65535, got 99999999999999999999, which overflows a 64-bit integer"},
		{"port hex overflow", strings.Replace(minimal, "80", "0x10000000000000000", 1),
			"xlb.yaml:2: ports[0].local_port: must be between 1 and 65535, got 0x10000000000000000, which overflows a 64-bit integer"},
		{"a quoted number is a string", strings.Replace(minimal, "80", `"99999999999999999999"`, 1),
			`xlb.yaml:2: ports[0].local_port: must be an integer, got string "99999999999999999999"`},
		{"max_connections 2^24", minimal + "flow_table:\n  max_connections: 16777216\n", ""},
		{"max_connections 2^24+1", minimal + "flow_table:\n  max_connections: 16777217\n",
			"xlb.yaml:5: flow_table.max_connections: must be between 1 and 16777216, got 16777217"},
		{"max_connections 0", minimal + "flow_table:\n  max_connections: 0\n",
			"xlb.yaml:5: flow_table.max_connections: must be between 1 and 16777216, got 0"},
		{"max_connections 2^32", minimal + "flow_table:\n  max_connections: 4294967296\n",
			"xlb.yaml:5: flow_table.max_connections: must be between 1 and 16777216, got 4294967296"},
		{"max_connections 2^64", minimal + "flow_table:\n  max_connections: 18446744073709551616\n",
			"xlb.yaml:5: flow_table.max_connections: must be between 1 and 16777216, got 18446744073709551616, which overflows a 64-bit integer"},
		{"max_connections negative overflow", minimal + "flow_table:\n  max_connections: -99999999999999999999\n",
			"xlb.yaml:5: flow_table.max_connections: must be between 1 and 16777216, got -99999999999999999999, which overflows a 64-bit integer"},
		{"orphan_ttl_secs overflow", minimal + "orphan_ttl_secs: 99999999999999999999\n",
			"xlb.yaml:4: orphan_ttl_secs: 99999999999999999999 overflows a 64-bit integer"},
		{"a float is not an integer", minimal + "shutdown_timeout: 1e3\n", "xlb.yaml:4: shutdown_timeout: must be an integer, got number 1e3"},
		{"every error at once", strings.Replace(withBackends(1025), "80", "65536", 1) + "flow_table:\n  max_connections: 99999999999999999999\n",
			"xlb.yaml:2: ports[0].local_port: must be between 1 and 65535, got 65536\n" +
				"xlb.yaml:5: provider.static.backends: at most 1024 backends are supported (the data path's backend ids), got 1025\n" +
				"xlb.yaml:1032: flow_table.max_connections: must be between 1 and 16777216, got 99999999999999999999, which overflows a 64-bit integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "xlb.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errs bytes.Buffer
			code := run([]string{"check", path}, &out, &errs)
			got := strings.ReplaceAll(withoutExposure(errs.String()), dir+"/", "")
			switch {
			case tc.want == "" && (code != 0 || got != "" || !strings.Contains(out.String(), "local_port:")):
				t.Errorf("exit %d, stderr %q, stdout %.200q; want a valid config", code, got, out.String())
			case tc.want != "" && (code != 1 || got != tc.want+"\n" || out.Len() != 0):
				t.Errorf("exit %d, stdout %.100q, stderr\n%s\nwant exit 1 and\n%s", code, out.String(), got, tc.want)
			}
		})
	}
}

// TestCheckStdin: "-" reads the config from standard input; messages name
// it "stdin".
func TestCheckStdin(t *testing.T) {
	for _, tc := range []struct {
		name, args, yaml string
		code             int
		stdout, stderr   string
	}{
		{"valid", "-", minimal, 0, "local_port: 80", ""},
		{"valid by --config", "--config -", minimal, 0, "local_port: 80", ""},
		{"invalid", "-", strings.Replace(minimal, "80", "65536", 1), 1, "", "stdin:2: ports[0].local_port: must be between 1 and 65535, got 65536\n"},
		{"empty", "-", "", 1, "", "stdin: empty config\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			code := check(strings.Fields(tc.args), strings.NewReader(tc.yaml), &out, &errs)
			if code != tc.code || !strings.Contains(out.String(), tc.stdout) || (tc.stdout == "" && out.Len() > 0) || withoutExposure(errs.String()) != tc.stderr {
				t.Errorf("xlb check %s: exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errs.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// TestCheckEnvFile: with --env-file, xlb check fails where the daemon's
// start would on its environment (issue 16 item 1): admin.auth without a
// password, a BGP peer's empty password_env, an unknown
// XLB_DISABLE_FEATURES name. Values are read as systemd reads them, so a
// quoted password with quotes and backslashes passes.
func TestCheckEnvFile(t *testing.T) {
	const auth = minimal + "admin:\n  auth:\n    username: ops\n"
	const bgp = minimal + "bgp:\n  local_asn: 64512\n  peers:\n    - {address: 198.51.100.1, asn: 64513, password_env: XLB_BGP_PASSWORD}\n"
	long := strings.Repeat("k", 81)
	for _, tc := range []struct {
		name, yaml string
		env        []string // the env files' contents; "<missing>" is a file not there
		code       int
		stderr     string // E is the env file, E2 the second one
	}{
		{"no auth, no password", minimal, []string{"# nothing\n"}, 0, ""},
		{"auth, password set", auth, []string{"XLB_ADMIN_PASSWORD=s3cret\n"}, 0, ""},
		{"auth, quoted password", auth, []string{`XLB_ADMIN_PASSWORD="a\"b'c\\d e"` + "\n"}, 0, ""},
		{"auth, no password", auth, []string{"#XLB_ADMIN_PASSWORD=\n"}, 1,
			`E: XLB_ADMIN_PASSWORD is not set, but xlb.yaml sets admin.auth.username "ops", so xlb would refuse to start`},
		{"auth, empty password", auth, []string{"# x\nXLB_ADMIN_PASSWORD=\n"}, 1,
			`E:2: XLB_ADMIN_PASSWORD is empty, but xlb.yaml sets admin.auth.username "ops", so xlb would refuse to start`},
		{"auth, empty quotes", auth, []string{`XLB_ADMIN_PASSWORD=""` + "\n"}, 1,
			`E:1: XLB_ADMIN_PASSWORD is empty, but xlb.yaml sets admin.auth.username "ops", so xlb would refuse to start`},
		{"a later file overrides", auth, []string{"XLB_ADMIN_PASSWORD=x\n", "XLB_ADMIN_PASSWORD=\n"}, 1,
			`E2:1: XLB_ADMIN_PASSWORD is empty, but xlb.yaml sets admin.auth.username "ops", so xlb would refuse to start`},
		{"unset in both files", auth, []string{"A=1\n", "B=2\n"}, 1,
			`E, E2: XLB_ADMIN_PASSWORD is not set, but xlb.yaml sets admin.auth.username "ops", so xlb would refuse to start`},
		{"bgp password set", bgp, []string{"XLB_BGP_PASSWORD=md5key\n"}, 0, ""},
		{"bgp password unset", bgp, []string{"\n"}, 1,
			`E: XLB_BGP_PASSWORD is not set, but xlb.yaml names it in bgp.peers[0].password_env (198.51.100.1), so xlb would refuse to start`},
		{"bgp password too long", bgp, []string{"XLB_BGP_PASSWORD=" + long + "\n"}, 1,
			`E:1: XLB_BGP_PASSWORD: the password is 81 bytes, TCP MD5 takes at most 80`},
		{"unknown feature", minimal, []string{"XLB_DISABLE_FEATURES=ringbuf,warp\n"}, 1, "E:1: XLB_DISABLE_FEATURES: "},
		{"ignored line", minimal, []string{"export XLB_ADMIN_PASSWORD=x\n"}, 0,
			`warning: E:1: ignored, as systemd ignores it: "export XLB_ADMIN_PASSWORD" is not a valid variable name`},
		{"missing env file", minimal, []string{"<missing>"}, 1, "env file: open E: no such file or directory"},
		{"config errors first", strings.Replace(auth, "80", "0", 1), []string{"\n"}, 1, "xlb.yaml:2: ports[0].local_port: must be between 1 and 65535, got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "xlb.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"check"}
			names := []string{"E", "E2"}
			for i, content := range tc.env {
				p := filepath.Join(dir, names[i])
				if content != "<missing>" {
					if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				args = append(args, "--env-file", p)
			}
			args = append(args, path)
			var out, errs bytes.Buffer
			code := run(args, &out, &errs)
			got := strings.TrimSuffix(strings.ReplaceAll(withoutExposure(errs.String()), dir+"/", ""), "\n")
			if code != tc.code || !strings.HasPrefix(got, tc.stderr) || (tc.stderr == "" && got != "") || (code == 0) != (out.Len() > 0) {
				t.Errorf("exit %d, stderr\n%s\nwant exit %d, stderr starting\n%s", code, got, tc.code, tc.stderr)
			}
		})
	}
}

// Without --env-file the environment is not checked, but a config with
// admin.auth gets a warning that says how to check it.
func TestCheckAuthWithoutEnvFileWarns(t *testing.T) {
	var out, errs bytes.Buffer
	code := check([]string{"-"}, strings.NewReader(minimal+"admin:\n  auth:\n    username: ops\n"), &out, &errs)
	if code != 0 || !strings.Contains(errs.String(), "warning: admin.auth is set: xlb starts only with XLB_ADMIN_PASSWORD in its environment; check that with --env-file /etc/default/xlb") {
		t.Errorf("exit %d, stderr %q", code, errs.String())
	}
}

// TestCheckListenerWarnings: xlb check opens the web config files as the
// start does: it warns about a listener reachable beyond loopback without
// auth and fails on a missing file.
func TestCheckListenerWarnings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "xlb.yaml")
	if err := os.WriteFile(path, []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"check", path}, &out, &errs); code != 0 || !strings.Contains(errs.String(), "warning: metrics listener on 0.0.0.0 is reachable beyond loopback without authentication") {
		t.Errorf("default metrics listener: exit %d, stderr %q", code, errs.String())
	}
	missing := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(path, []byte(minimal+"metrics:\n  web_config_file: "+missing+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errs.Reset()
	if code := run([]string{"check", path}, &out, &errs); code != 1 || !strings.Contains(errs.String(), missing) || out.Len() != 0 {
		t.Errorf("a missing web config file: exit %d, stdout %q, stderr %q", code, out.String(), errs.String())
	}
}

// TestCheckUnitWarnings (issue 28): xlb check warns, and still passes the
// config, about what the packaged unit would trip over: an admin or
// metrics port below 1024 (no CAP_NET_BIND_SERVICE in xlb.service), a
// state_dir outside a BPF filesystem (`xlb mount-bpffs` would mount one
// over its parent), a router id equal to the listen address.
func TestCheckUnitWarnings(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(dir, "pins", "xlb")
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings, one warning line each
	}{
		{"defaults", minimal, nil},
		{"state_dir under /sys/fs/bpf", minimal + "state_dir: /sys/fs/bpf/xlb-other\n", nil},
		{"admin port 443", minimal + "admin: {port: 443}\n",
			[]string{"warning: xlb.yaml:4: admin.port: 443 is below 1024: binding it needs CAP_NET_BIND_SERVICE, which the packaged xlb.service does not grant"}},
		{"state_dir elsewhere", minimal + "state_dir: " + elsewhere + "\n",
			[]string{"warning: state_dir " + elsewhere + " is not on a BPF filesystem: xlb mount-bpffs (the unit's ExecStartPre) would mount one over " + filepath.Dir(elsewhere) + ", hiding what that directory holds"}},
		{"router id is the listen address", minimal + "listen: {ip: 192.0.2.10}\nbgp:\n  local_asn: 64512\n  router_id: 192.0.2.10\n  peers:\n    - {address: 198.51.100.1, asn: 64513}\n",
			[]string{"warning: xlb.yaml:7: bgp.router_id: 192.0.2.10 is the listen address, which every host announcing this service shares"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "xlb.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errs bytes.Buffer
			code := run([]string{"check", path}, &out, &errs)
			got := strings.ReplaceAll(withoutExposure(errs.String()), dir+"/xlb.yaml", "xlb.yaml")
			lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
			if got == "" {
				lines = nil
			}
			if code != 0 || out.Len() == 0 || len(lines) != len(tc.want) {
				t.Fatalf("exit %d, stdout %d bytes, stderr\n%s\nwant exit 0, the config and %d warnings", code, out.Len(), got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("warning %d:\n%s\nwant it to start\n%s", i, lines[i], w)
				}
			}
		})
	}
}

// fakeAddrs is a host with eth0 (192.0.2.2, the default route) and a
// fleet VIP on lo.
type fakeAddrs struct{ noDefault bool }

func (f fakeAddrs) DefaultRouteIPv4() (netip.Addr, string, error) {
	if f.noDefault {
		return netip.Addr{}, "", errors.New("listen: auto needs an IPv4 default route, and there is none")
	}
	return netip.MustParseAddr("192.0.2.2"), "eth0", nil
}

func (fakeAddrs) InterfaceOf(a netip.Addr) (string, error) {
	switch a.String() {
	case "192.0.2.2":
		return "eth0", nil
	case "203.0.113.7":
		return "lo", nil
	}
	return "", fmt.Errorf("no interface holds %s", a)
}

// TestCheckServiceAddresses (issue 29 item 8): after the effective config,
// xlb check lists each service's address on this host as comments: an
// address of which interface, lo included, what auto resolves to, or an
// address routed here.
func TestCheckServiceAddresses(t *testing.T) {
	defer func(b addressBook) { hostAddrs = b }(hostAddrs)
	const services = `services:
  - {name: web, listen: {ip: 192.0.2.2}, ports: [{local_port: 80}], provider: {static: {backends: [{ip: 198.51.100.11}]}}}
  - {name: vip, listen: {ip: 203.0.113.7}, ports: [{local_port: 80}], provider: {static: {backends: [{ip: 198.51.100.11}]}}}
  - {name: routed, listen: {ip: 198.51.100.80}, ports: [{local_port: 80}], provider: {static: {backends: [{ip: 198.51.100.11}]}}}
  - {name: any, listen: auto, ports: [{local_port: 443}], provider: {static: {backends: [{ip: 198.51.100.11}]}}}
`
	const head = "# The services' addresses on this host (xlb check resolves them; the start resolves them again):\n"
	for _, tc := range []struct {
		name, yaml string
		book       fakeAddrs
		want       string
	}{
		{"services", services, fakeAddrs{}, head +
			"#   web: 192.0.2.2, an address of eth0\n" +
			"#   vip: 203.0.113.7, an address of lo\n" +
			"#   routed: 198.51.100.80, not an address of this host: must be routed here\n" +
			"#   any: auto = 192.0.2.2, the primary IPv4 address of eth0 (the default route's interface)\n"},
		{"top-level form", minimal, fakeAddrs{}, head +
			"#   xlb: auto = 192.0.2.2, the primary IPv4 address of eth0 (the default route's interface)\n"},
		{"no default route", minimal, fakeAddrs{noDefault: true}, head +
			"#   xlb: auto, unresolved: listen: auto needs an IPv4 default route, and there is none\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostAddrs = tc.book
			var out, errs bytes.Buffer
			code := check([]string{"-"}, strings.NewReader(tc.yaml), &out, &errs)
			config, comments, found := strings.Cut(out.String(), head)
			if code != 0 || !found || head+comments != tc.want || !strings.Contains(config, "local_port: ") {
				t.Errorf("exit %d, stderr %q, stdout\n%s\nwant the config, then\n%s", code, errs.String(), out.String(), tc.want)
			}
		})
	}
}

// TestCheckSchedulers (issue 30): after the effective config, xlb check
// lists each service's scheduler as comments: the Maglev hash, the table
// size and where it comes from, and one table's kernel memory.
func TestCheckSchedulers(t *testing.T) {
	defer func(b addressBook) { hostAddrs = b }(hostAddrs)
	hostAddrs = fakeAddrs{}
	const src = `services:
  - {name: web, listen: {ip: 192.0.2.2}, ports: [{local_port: 80}], provider: {static: {backends: [{ip: 198.51.100.11}]}}}
  - {name: wrr, listen: {ip: 192.0.2.3}, ports: [{local_port: 80}], scheduler: weighted_round_robin, provider: {static: {backends: [{ip: 198.51.100.11, weight: 6}, {ip: 198.51.100.12, weight: 2}, {ip: 198.51.100.13, weight: 2}]}}}
  - {name: cache, listen: {ip: 192.0.2.4}, ports: [{local_port: 80}], scheduler: maglev, maglev: {hash: client_ip}, provider: {static: {backends: [{ip: 198.51.100.11}, {ip: 198.51.100.12}]}}}
  - {name: big, listen: {ip: 192.0.2.5}, ports: [{local_port: 80}], scheduler: maglev, maglev: {table_size: 1048573}, provider: {static: {backends: [{ip: 198.51.100.11}]}}}
  - {name: kube, listen: {ip: 192.0.2.6}, ports: [{local_port: 80}], scheduler: maglev, provider: {kubernetes: {namespace: prod, service: web}}}
  - {name: kwrr, listen: {ip: 192.0.2.7}, ports: [{local_port: 80}], scheduler: weighted_round_robin, provider: {kubernetes: {namespace: prod, service: web}}}
`
	const want = "# The services' schedulers (the kernel memory of one table; a service may hold two, one per backend set):\n" +
		"#   web: round_robin (no table)\n" +
		"#   wrr: weighted_round_robin, a cycle of 5 connections with every backend routable, 128 bytes\n" +
		"#   cache: maglev, hash client_ip, table of 16381 slots (the default for 2 static backends, up to 32; more change it and move nearly every client: set maglev.table_size to keep it), 32.1 KiB\n" +
		"#   big: maglev, hash five_tuple, table of 1048573 slots (maglev.table_size), 2.0 MiB\n" +
		"#   kube: maglev, hash five_tuple, table of 65521 slots (the Kubernetes default: 655 endpoints at 100 slots each, more make it overfull: set maglev.table_size for more), 128.1 KiB\n" +
		"#   kwrr: weighted_round_robin, a cycle as long as the endpoints' weights add up (divided by their gcd), 64 bytes per 32 connections of it\n" +
		"# The services' addresses on this host"
	var out, errs bytes.Buffer
	code := check([]string{"-"}, strings.NewReader(src), &out, &errs)
	if code != 0 || !strings.Contains(out.String(), "\n"+want) {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant the config, then\n%s", code, errs.String(), out.String(), want)
	}
}

// TestCheckUDP (issue 31): with a proto udp service, xlb check lists the
// UDP timeouts, the UDP SNAT half's kernel memory (1024 backend ids × 2
// addresses × 16 words × 8 bytes for a 1000-port range) and each UDP
// service's cap; a config without one prints none of it.
func TestCheckUDP(t *testing.T) {
	defer func(b addressBook) { hostAddrs = b }(hostAddrs)
	hostAddrs = fakeAddrs{}
	const src = `services:
  - {name: web, listen: {ip: 192.0.2.2}, ports: [{local_port: 80}], provider: {static: {backends: [{ip: 198.51.100.11}]}}}
  - {name: dns, listen: {ip: 192.0.2.3}, proto: udp, ports: [{local_port: 53}], udp_unreplied_max: 500, provider: {static: {backends: [{ip: 198.51.100.11}]}}}
  - {name: syslog, listen: {ip: 192.0.2.3}, proto: udp, ports: [{local_port: 514}], provider: {static: {backends: [{ip: 198.51.100.11}]}}}
snat: {ip: [198.51.100.1, 198.51.100.2], port_range: "40000-40999"}
flow_table: {max_connections: 1000, udp_timeout_secs: 20, udp_stream_timeout_secs: 180}
`
	const want = "# UDP: a pair expires 20 s after its last datagram without a reply (flow_table.udp_timeout_secs), 180 s with one (udp_stream_timeout_secs); the SNAT ports' UDP half takes 256.0 KiB of kernel memory\n" +
		"#   dns: at most 500 pairs without a reply (udp_unreplied_max)\n" +
		"#   syslog: at most 250 pairs without a reply (the default, a quarter of flow_table.max_connections)\n" +
		"# The services' addresses on this host"
	var out, errs bytes.Buffer
	code := check([]string{"-"}, strings.NewReader(src), &out, &errs)
	if code != 0 || !strings.Contains(out.String(), "no table)\n"+want) {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant the schedulers, then\n%s", code, errs.String(), out.String(), want)
	}
	out.Reset()
	if code := check([]string{"-"}, strings.NewReader(minimal), &out, &errs); code != 0 || strings.Contains(out.String(), "# UDP") {
		t.Errorf("a TCP config: exit %d, stdout\n%s", code, out.String())
	}
}
