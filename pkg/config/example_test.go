package config

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestExampleFile parses testdata/example.yaml, which sets every field.
func TestExampleFile(t *testing.T) {
	c, warnings, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}
	ip := netip.MustParseAddr
	want := &Config{
		Name:   "web-lb",
		Listen: Listen{IP: ip("192.0.2.10")},
		Proto:  "tcp",
		Mode:   "nat",
		Ports:  []PortMapping{{80, 8080}, {443, 443}},
		Provider: Provider{Static: &StaticProvider{Backends: []Backend{
			{"backend-1", ip("198.51.100.11"), 1},
			{"backend-2", ip("198.51.100.12"), 1},
			{"198.51.100.13", ip("198.51.100.13"), 1},
		}}},
		HealthCheck: &HealthCheck{Type: "http", Port: 8081, Interval: 5 * time.Second, Timeout: 1500 * time.Millisecond,
			Rise: 3, Fall: 4, Path: "/healthz", ExpectStatus: 204},
		OrphanTTL:       600 * time.Second,
		ShutdownTimeout: 30 * time.Second,
		Admin: Admin{Address: ip("127.0.0.1"), Port: 9091, WebConfigFile: "/etc/xlb/web-config.yml",
			Auth: &AdminAuth{Username: "operator"}, Socket: "/run/xlb/web.sock", AllowedHosts: []string{"lb1.example.net", "192.0.2.10"}},
		Metrics:    Metrics{Listener: Listener{Address: ip("192.0.2.10"), Port: 9643, WebConfigFile: "/etc/xlb/web-config.yml"}, PerBackend: false},
		Interfaces: []string{"eth0", "eth1"},
		XDPMode:    "native",
		SNAT:       SNAT{IPs: []netip.Addr{ip("198.51.100.1"), ip("198.51.100.2")}, PortLo: 30000, PortHi: 39999},
		FlowTable:  FlowTable{MaxConnections: 65536, EmbryonicTTL: 20 * time.Second, UDPTimeout: 20 * time.Second, UDPStreamTimeout: 180 * time.Second},
		StateDir:   "/sys/fs/bpf/xlb-web",
		BGP: &BGP{LocalASN: 64512, RouterID: ip("192.0.2.21"), HoldTime: 30 * time.Second, GracefulRestart: 300 * time.Second,
			AnnounceListen: true, Announce: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/28")},
			Peers:         []BGPPeer{{ip("192.0.2.1"), 64513, 1179, "XLB_BGP_PASSWORD"}, {ip("192.0.2.2"), 64513, 179, ""}},
			WithdrawDelay: 10 * time.Second},
	}
	want.Services = want.ServiceList()
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load(example) =\n%+v\nwant\n%+v", c, want)
	}
	// Every top-level field but proto, mode (which has one valid value
	// today) and udp_unreplied_max (for proto udp only; the example is an
	// HTTP service) differs from its default.
	wantKeys := slices.DeleteFunc(sortedKeys(), func(k string) bool { return k == "proto" || k == "mode" || k == "udp_unreplied_max" })
	if got := Diff(c, Default()); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("Diff(example, Default()) = %v, want %v", got, wantKeys)
	}
}
