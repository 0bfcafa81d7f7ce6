package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// roundTrip marshals c, parses the output and requires an equal Config.
func roundTrip(t *testing.T, c *Config) []byte {
	t.Helper()
	out, err := c.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	back, warnings, err := Parse(out, "effective.yaml")
	if err != nil || len(warnings) != 0 {
		t.Fatalf("Parse(Marshal()) = %v, warnings %q\n%s", err, warnings, out)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip changed the config:\n got %+v\nwant %+v\nyaml:\n%s", back, c, out)
	}
	return out
}

func TestMarshalRoundTrip(t *testing.T) {
	example, _, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{
		"minimal":                    minimal,
		"kubernetes with kubeconfig": "ports:\n  - local_port: 80\nprovider:\n  kubernetes: {namespace: prod, service: web, kubeconfig: /etc/xlb/kubeconfig}\n",
		"kubernetes in-cluster":      "ports:\n  - local_port: 80\nprovider:\n  kubernetes: {namespace: prod, service: web}\n",
		"kubernetes port_name, remote_port from discovery and explicit": "ports:\n  - local_port: 80\n  - {local_port: 443, remote_port: 8443}\nprovider:\n  kubernetes: {namespace: prod, service: web, port_name: http}\n",
		"tcp health check":            minimal + "health_check: {type: tcp}\n",
		"http health check":           minimal + "health_check: {type: http}\n",
		"health check every field":    minimal + "health_check: {type: http, port: 8081, interval_ms: 100, timeout_ms: 10, rise: 100, fall: 1, path: \"/a?b=c\", expect_status: 599}\n",
		"health check short interval": minimal + "health_check: {type: tcp, interval_ms: 500}\n",
		"strings that look like other types": `name: "null"
ports:
  - local_port: 80
provider:
  static:
    backends:
      - {name: "123", ip: 10.0.0.1}
      - {name: "true", ip: 10.0.0.2}
      - {name: "a: b # c", ip: 10.0.0.3}
interfaces: ["0", "yes"]
`,
		"shutdown 0 and orphan raised":    minimal + "shutdown_timeout: 0\n",
		"one snat address":                minimal + "snat: {ip: 198.51.100.1}\n",
		"a list of one snat address":      minimal + "snat: {ip: [198.51.100.1]}\n",
		"eight snat addresses":            minimal + "snat:\n  ip: [198.51.100.1, 198.51.100.2, 198.51.100.3, 198.51.100.4, 198.51.100.5, 198.51.100.6, 198.51.100.7, 198.51.100.8]\n",
		"embryonic ttl at the orphan ttl": minimal + "orphan_ttl_secs: 600\nflow_table: {embryonic_ttl_secs: 600}\n",
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) { roundTrip(t, mustParse(t, src)) })
	}
	t.Run("example", func(t *testing.T) { roundTrip(t, example) })
}

// TestMarshalShape pins the effective config of the minimal file: every
// key, defaults filled in, in DESIGN order.
func TestMarshalShape(t *testing.T) {
	out := roundTrip(t, mustParse(t, minimal))
	want := `name: xlb
listen: auto
proto: tcp
mode: nat
ports:
  - local_port: 80
    remote_port: 80
provider:
  static:
    backends:
      - name: 198.51.100.11
        ip: 198.51.100.11
orphan_ttl_secs: 300
shutdown_timeout: 15
admin:
  address: 127.0.0.1
  port: 8642
  socket: /run/xlb/admin.sock
  allowed_hosts: [localhost, 127.0.0.1, '::1']
metrics:
  address: 0.0.0.0
  port: 9642
  per_backend: true
interfaces: []
xdp_mode: auto
snat:
  ip: auto
  port_range: "40000-59999"
flow_table:
  max_connections: 262144
  embryonic_ttl_secs: 10
  udp_timeout_secs: 30
  udp_stream_timeout_secs: 120
state_dir: /sys/fs/bpf/xlb
`
	if string(out) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", out, want)
	}
	// The output's top-level keys are exactly the keys Diff knows.
	var doc yaml.Node
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, n := range doc.Content[0].Content {
		if i%2 == 0 {
			keys = append(keys, n.Value)
		}
	}
	// health_check and bgp are absent when the file has none (no checks,
	// no speaker), udp_unreplied_max when it is the default.
	if want := slices.DeleteFunc(slices.Clone(topLevelKeys), func(k string) bool { return k == "health_check" || k == "bgp" || k == "udp_unreplied_max" }); !reflect.DeepEqual(keys, want) {
		t.Errorf("Marshal keys = %v, want %v", keys, want)
	}
}

func TestMarshalErrors(t *testing.T) {
	c := mustParse(t, minimal)
	c.OrphanTTL = 300*time.Second + time.Millisecond
	if _, err := c.Marshal(); err == nil || !strings.Contains(err.Error(), "orphan_ttl_secs: 5m0.001s is not a whole number of seconds") {
		t.Errorf("Marshal(fractional TTL) error = %v", err)
	}
	c = mustParse(t, minimal)
	c.Listen = Listen{}
	if _, err := c.Marshal(); err == nil || !strings.Contains(err.Error(), "listen.ip: no address") {
		t.Errorf("Marshal(no listen address) error = %v", err)
	}
	if _, err := Default().Marshal(); err != nil {
		t.Errorf("Marshal(Default()) error = %v", err)
	}
}
