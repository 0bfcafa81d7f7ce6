package config

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"
)

func sortedKeys() []string {
	return slices.Sorted(slices.Values(topLevelKeys))
}

func TestDiffEqual(t *testing.T) {
	a, b := mustParse(t, minimal), mustParse(t, minimal)
	if got := Diff(a, b); got != nil {
		t.Errorf("Diff(equal) = %v, want nil", got)
	}
	// An omitted interfaces list equals an explicit empty one.
	b = mustParse(t, minimal+"interfaces: []\n")
	if got := Diff(a, b); got != nil {
		t.Errorf("Diff(nil vs empty interfaces) = %v, want nil", got)
	}
	if got := Diff(nil, Default()); got != nil {
		t.Errorf("Diff(nil, Default()) = %v, want nil", got)
	}
}

// TestDiffEachKey changes one top-level key at a time; Diff must name
// exactly that key, and every key must be covered.
func TestDiffEachKey(t *testing.T) {
	ip := netip.MustParseAddr
	edits := map[string]func(c *Config){
		"name":              func(c *Config) { c.Name = "other" },
		"listen":            func(c *Config) { c.Listen = Listen{IP: ip("192.0.2.10")} },
		"proto":             func(c *Config) { c.Proto = "udp" },
		"mode":              func(c *Config) { c.Mode = "dsr" },
		"ports":             func(c *Config) { c.Ports[0].RemotePort = 8080 },
		"provider":          func(c *Config) { c.Provider.Static.Backends[0].Name = "renamed" },
		"health_check":      func(c *Config) { c.HealthCheck = &HealthCheck{Type: HealthCheckTCP} },
		"udp_unreplied_max": func(c *Config) { c.Services[0].UDPUnrepliedMax = 100 },
		"orphan_ttl_secs":   func(c *Config) { c.OrphanTTL = time.Hour },
		"shutdown_timeout":  func(c *Config) { c.ShutdownTimeout = 0 },
		"admin":             func(c *Config) { c.Admin.Auth = &AdminAuth{Username: "ops"} },
		"metrics":           func(c *Config) { c.Metrics.Port = 9000 },
		"interfaces":        func(c *Config) { c.Interfaces = []string{"eth0"} },
		"xdp_mode":          func(c *Config) { c.XDPMode = "generic" },
		"snat":              func(c *Config) { c.SNAT.PortHi = 50000 },
		"flow_table":        func(c *Config) { c.FlowTable.EmbryonicTTL = 20 * time.Second },
		"state_dir":         func(c *Config) { c.StateDir = "/run/xlb" },
		"bgp":               func(c *Config) { c.BGP = &BGP{LocalASN: 64512} },
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range edits {
			if !yield(k) {
				return
			}
		}
	}); !reflect.DeepEqual(got, sortedKeys()) {
		t.Fatalf("test covers %v, want every key %v", got, sortedKeys())
	}
	for key, edit := range edits {
		a, b := mustParse(t, minimal), mustParse(t, minimal)
		edit(b)
		if got := Diff(a, b); !reflect.DeepEqual(got, []string{key}) {
			t.Errorf("Diff after changing %s = %v", key, got)
		}
	}
}

func TestDiffProviderAndAuthPointers(t *testing.T) {
	static := mustParse(t, minimal)
	kube := mustParse(t, "ports:\n  - {local_port: 80, remote_port: 80}\nprovider:\n  kubernetes: {namespace: default, service: web}\n")
	kube2 := mustParse(t, "ports:\n  - {local_port: 80, remote_port: 80}\nprovider:\n  kubernetes: {namespace: default, service: web, kubeconfig: /k}\n")
	kube3 := mustParse(t, "ports:\n  - {local_port: 80, remote_port: 80}\nprovider:\n  kubernetes: {namespace: default, service: web, port_name: http}\n")
	kubeDiscovered := mustParse(t, "ports:\n  - local_port: 80\nprovider:\n  kubernetes: {namespace: default, service: web}\n")
	if got := Diff(static, kube); !reflect.DeepEqual(got, []string{"provider"}) {
		t.Errorf("Diff(static, kubernetes) = %v", got)
	}
	if got := Diff(kube, kube2); !reflect.DeepEqual(got, []string{"provider"}) {
		t.Errorf("Diff(kubeconfig changed) = %v", got)
	}
	if got := Diff(kube, kube3); !reflect.DeepEqual(got, []string{"provider"}) {
		t.Errorf("Diff(port_name changed) = %v", got)
	}
	// remote_port from discovery (0) differs from an explicit one.
	if got := Diff(kube, kubeDiscovered); !reflect.DeepEqual(got, []string{"ports"}) {
		t.Errorf("Diff(remote_port omitted) = %v", got)
	}
	a := mustParse(t, minimal+"admin: {auth: {username: a}}\n")
	b := mustParse(t, minimal+"admin: {auth: {username: a}}\n")
	if got := Diff(a, b); got != nil {
		t.Errorf("Diff(equal auth, distinct pointers) = %v", got)
	}
}

func TestDiffSorted(t *testing.T) {
	a := mustParse(t, minimal)
	b := mustParse(t, "ports:\n  - local_port: 81\nprovider:\n  static:\n    backends:\n      - ip: 198.51.100.12\nstate_dir: /run/xlb\nname: b\n")
	if got, want := Diff(a, b), []string{"name", "ports", "provider", "state_dir"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Diff = %v, want %v", got, want)
	}
}

// snat.ip lists are compared in order: the data path numbers the
// addresses (their port spaces) by position.
func TestDiffSNATList(t *testing.T) {
	a := mustParse(t, minimal+"snat: {ip: [198.51.100.1, 198.51.100.2]}\n")
	same := mustParse(t, minimal+"snat:\n  ip:\n    - 198.51.100.1\n    - 198.51.100.2\n")
	swapped := mustParse(t, minimal+"snat: {ip: [198.51.100.2, 198.51.100.1]}\n")
	one := mustParse(t, minimal+"snat: {ip: 198.51.100.1}\n")
	listOfOne := mustParse(t, minimal+"snat: {ip: [198.51.100.1]}\n")
	checkDiffs(t, []diffCase{
		{"same list, other style", a, same, nil},
		{"order changed", a, swapped, []string{"snat"}},
		{"address removed", a, one, []string{"snat"}},
		{"one address and a list of one", one, listOfOne, nil},
	})
}

// diffCase is two configs and the keys Diff must name.
type diffCase struct {
	name string
	a, b *Config
	want []string
}

func checkDiffs(t *testing.T, cases []diffCase) {
	t.Helper()
	for _, c := range cases {
		if got := Diff(c.a, c.b); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Diff = %v, want %v", c.name, got, c.want)
		}
	}
}
