package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/xlbproject/xlb/pkg/status/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// recorded is testdata/status.json: the document pkg/status serves for its
// test fixture (a copy of pkg/status/testdata/document.json): one service,
// 3 routable backends, one draining, one unreachable. The test helpers
// below edit its schema 1 fields and rebuild its one service from them
// (schema1Services).
func recorded(t *testing.T) (*api.Document, []byte) {
	t.Helper()
	return recordedFile(t, "status.json")
}

// recordedServices is testdata/status_services.json, the document
// pkg/status serves for its three-service fixture (a copy of
// pkg/status/testdata/document_services.json): web, api (a kubernetes
// provider in error, one backend unreachable) and old, removed by a
// reload, draining.
func recordedServices(t *testing.T) (*api.Document, []byte) {
	t.Helper()
	return recordedFile(t, "status_services.json")
}

func recordedFile(t *testing.T, name string) (*api.Document, []byte) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	d, err := decode(body)
	if err != nil {
		t.Fatal(err)
	}
	return d, body
}

// notReady is the recorded document bent into the worst case: shutting
// down, no sample yet, nothing attached, provider failing, config file
// invalid, no backends, started fresh where nothing could be pinned.
// drained is the recorded document of an instance an operator drained:
// not ready (draining), announcing nothing.
func drained(t *testing.T) *api.Document {
	d, _ := recorded(t)
	d.Drained = true
	d.Drain = &api.Drain{SinceUnixMs: d.GeneratedAtUnixMs - 754_000, By: "unix socket uid 0 pid 4242", Restored: true}
	d.Readiness = api.Readiness{Ready: false, Reason: "draining"}
	d.BGP.Announced = []string{}
	d.Services = schema1Services(d)
	return d
}

// withdrawing is the not-ready document during a stop's BGP withdraw
// delay: the reset window begins in 2.5 s.
func withdrawing(t *testing.T) *api.Document {
	d := notReady(t)
	d.Shutdown.ResetsFromUnixMs = d.GeneratedAtUnixMs + 2500
	return d
}

func notReady(t *testing.T) *api.Document {
	d, _ := recorded(t)
	d.Lifecycle = "shutting_down"
	d.Readiness = api.Readiness{Ready: false, Reason: "shutting_down"}
	d.Shutdown = &api.Shutdown{DeadlineUnixMs: d.GeneratedAtUnixMs + 12500, SecondsLeft: 13}
	d.UptimeSeconds = 42
	d.Dataplane.XDPAttachments = []api.XDPAttachment{}
	d.Dataplane.SampledAtUnixMs, d.Dataplane.SampleAgeMs = nil, nil
	d.Dataplane.FlowMap = api.FlowMap{}
	d.Connections = api.Connections{}
	d.Dataplane.Counters = api.Counters{}
	d.Maintenance = api.Maintenance{}
	d.Provider = api.Provider{Name: "kubernetes", Healthy: false, Error: "watch endpoints: forbidden"}
	d.Backends = []api.Backend{}
	d.Config = api.Config{Path: "/etc/xlb/xlb.yaml", Invalid: "xlb.yaml:7: ports[0].local_port: 0 is out of range 1..65535", ChangedKeys: []string{}}
	d.Dataplane.Features = append(d.Dataplane.Features, api.Feature{
		Name: "pinning", State: string(api.FeatureRefused), Detail: "mount bpffs at /sys/fs/bpf: operation not permitted", Path: string(api.PathUnpinned),
	})
	d.Upgrades = api.Upgrades{Start: api.StartFresh}
	d.Services = schema1Services(d)
	return d
}

// handingOver is the recorded document in the old process of a hot
// upgrade: still ready and serving, pinned, while the successor starts.
func handingOver(t *testing.T) *api.Document {
	d, _ := recorded(t)
	d.Lifecycle = api.HandingOver
	d.Dataplane.Features = append(d.Dataplane.Features, api.Feature{Name: "pinning", State: string(api.FeatureAvailable), Path: string(api.PathPinned)})
	d.Upgrades = api.Upgrades{Start: api.StartAdopted, AdoptedPairs: 250, OK: 5}
	return d
}

// maintenanceFailing is the recorded document while maintenance cycles
// fail: still ready, the sample fresh, the figures the last good cycle's.
func maintenanceFailing(t *testing.T) *api.Document {
	d, _ := recorded(t)
	since := d.GeneratedAtUnixMs - 12_400
	d.Maintenance = api.Maintenance{
		Failing: true, ErrorsTotal: 15, ConsecutiveFailures: 13, FailingSinceUnixMs: &since,
		LastError: "maintenance: walk: dataplane: batch read flows: operation not permitted",
		// Carried from the last good cycle, like the pair figures.
		CloseEvents: d.Maintenance.CloseEvents, Walk: d.Maintenance.Walk,
	}
	return d
}

// earlier is the recorded document one sample (2 s) before, for top's rates.
func earlier(t *testing.T) *api.Document {
	d, _ := recorded(t)
	at := *d.Dataplane.SampledAtUnixMs - 2000
	d.Dataplane.SampledAtUnixMs = &at
	d.Connections.OpenedTotal -= 40
	d.Connections.ClosedTotal -= 30
	d.Dataplane.Counters.NoBackendTotal -= 4
	bs := append([]api.Backend{}, d.Backends...)
	for i := range bs {
		if bs[i].State == "routable" {
			bs[i].OpenedTotal -= 10 + uint64(i)
			bs[i].SentBytesTotal -= 200_000
			bs[i].ReceivedBytesTotal -= 4 << 20
		}
	}
	d.Backends = bs
	d.Services = schema1Services(d)
	return d
}

// earlierServices is the three-service document one sample (2 s)
// before, for top's rates: web's and api's routable backends opened 10
// connections each since, sending 10 kB and receiving 100 kB each.
func earlierServices(t *testing.T) *api.Document {
	d, _ := recordedServices(t)
	at := *d.Dataplane.SampledAtUnixMs - 2000
	d.Dataplane.SampledAtUnixMs = &at
	d.Connections.OpenedTotal -= 20
	d.Connections.ClosedTotal -= 15
	d.UDPPairs.OpenedTotal -= 200
	d.UDPPairs.ExpiredTotal.Replied -= 180
	svcs := append([]api.Service{}, d.Services...)
	for i := range svcs {
		bs := append([]api.Backend{}, svcs[i].Backends...)
		for j := range bs {
			if bs[j].State == "routable" && bs[j].UDP != nil {
				u := *bs[j].UDP
				u.OpenedTotal -= 100
				bs[j].UDP = &u
			} else if bs[j].State == "routable" {
				bs[j].OpenedTotal -= 10
			}
			if bs[j].State == "routable" {
				bs[j].SentBytesTotal -= 10_000
				bs[j].ReceivedBytesTotal -= 100_000
			}
		}
		svcs[i].Backends = bs
	}
	d.Services = svcs
	return d
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestGolden(t *testing.T) {
	doc, _ := recorded(t)
	services, _ := recordedServices(t)
	cases := []struct {
		name   string
		render func(*bytes.Buffer) error
	}{
		{"status", func(b *bytes.Buffer) error { return renderStatus(b, doc) }},
		{"backends", func(b *bytes.Buffer) error { return renderBackends(b, doc, units{}) }},
		{"backends_bytes", func(b *bytes.Buffer) error { return renderBackends(b, doc, units{exact: true}) }},
		{"flows", func(b *bytes.Buffer) error { return renderFlows(b, doc) }},
		{"top", func(b *bytes.Buffer) error { return renderTop(b, earlier(t), doc, units{}) }},
		{"top_bytes", func(b *bytes.Buffer) error { return renderTop(b, earlier(t), doc, units{exact: true}) }},
		{"top_first", func(b *bytes.Buffer) error { return renderTop(b, nil, doc, units{}) }},
		{"status_not_ready", func(b *bytes.Buffer) error { return renderStatus(b, notReady(t)) }},
		{"backends_none", func(b *bytes.Buffer) error { return renderBackends(b, notReady(t), units{}) }},
		{"flows_no_sample", func(b *bytes.Buffer) error { return renderFlows(b, notReady(t)) }},
		{"status_maintenance_failing", func(b *bytes.Buffer) error { return renderStatus(b, maintenanceFailing(t)) }},
		{"flows_maintenance_failing", func(b *bytes.Buffer) error { return renderFlows(b, maintenanceFailing(t)) }},
		{"status_handing_over", func(b *bytes.Buffer) error { return renderStatus(b, handingOver(t)) }},
		{"status_drained", func(b *bytes.Buffer) error { return renderStatus(b, drained(t)) }},
		{"status_withdrawing", func(b *bytes.Buffer) error { return renderStatus(b, withdrawing(t)) }},
		{"status_services", func(b *bytes.Buffer) error { return renderStatus(b, services) }},
		{"backends_services", func(b *bytes.Buffer) error { return renderBackends(b, services, units{}) }},
		{"backends_service_api", func(b *bytes.Buffer) error {
			d, _ := recordedServices(t)
			if err := selectService(d, "api"); err != nil {
				return err
			}
			return renderBackends(b, d, units{})
		}},
		{"flows_services", func(b *bytes.Buffer) error { return renderFlows(b, services) }},
		{"top_services", func(b *bytes.Buffer) error { return renderTop(b, earlierServices(t), services, units{}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := c.render(&b); err != nil {
				t.Fatal(err)
			}
			golden(t, c.name, b.Bytes())
		})
	}
}

// TestFlowsNoAddresses: flows shows counts only; no backend or client
// address and no listen address appears.
func TestFlowsNoAddresses(t *testing.T) {
	doc, _ := recorded(t)
	var b bytes.Buffer
	if err := renderFlows(&b, doc); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"192.0.2.", "198.51.100."} {
		if bytes.Contains(b.Bytes(), []byte(ip)) {
			t.Errorf("flows output contains an address (%s...):\n%s", ip, b.String())
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1288490: "1.2 MiB",
		36700160: "35.0 MiB", 5 << 30: "5.0 GiB", 1 << 62: "4.0 EiB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestUptime(t *testing.T) {
	for s, want := range map[int64]string{0: "0s", 45: "45s", 65: "1m05s", 7985: "2h13m05s", 3*86400 + 4*3600 + 13*60: "3d04h13m"} {
		if got := uptime(s); got != want {
			t.Errorf("uptime(%d) = %q, want %q", s, got, want)
		}
	}
}

// TestRecordedIsServed keeps testdata/status.json identical to what
// pkg/status serves for its fixture (pkg/status/testdata/document.json,
// regenerated there with -update); -update here copies it over.
func TestRecordedIsServed(t *testing.T) {
	served, err := os.ReadFile(filepath.Join("..", "..", "pkg", "status", "testdata", "document.json"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "status.json")
	if *update {
		if err := os.WriteFile(path, served, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, recordedBody := recorded(t)
	if !bytes.Equal(recordedBody, served) {
		t.Errorf("%s differs from pkg/status/testdata/document.json; run go test -update here", path)
	}
	// Every field of the served document is one xlbctl knows.
	dec := json.NewDecoder(bytes.NewReader(served))
	dec.DisallowUnknownFields()
	var d api.Document
	if err := dec.Decode(&d); err != nil {
		t.Errorf("decode with DisallowUnknownFields: %v", err)
	}
	servedServices, err := os.ReadFile(filepath.Join("..", "..", "pkg", "status", "testdata", "document_services.json"))
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join("testdata", "status_services.json")
	if *update {
		if err := os.WriteFile(path, servedServices, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, body := recordedServices(t); !bytes.Equal(body, servedServices) {
		t.Errorf("%s differs from pkg/status/testdata/document_services.json; run go test -update here", path)
	}
}

// TestSchema1: a schema version 1 document (a daemon before services)
// renders as the same document of schema 2 does: its one service comes
// from the top-level fields.
func TestSchema1(t *testing.T) {
	_, body := recorded(t)
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	v["schema_version"] = 1
	delete(v, "services")
	old, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := decode(old)
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := recorded(t)
	for name, render := range renderers {
		var b1, b2 bytes.Buffer
		if err := render(&b1, d1, units{}); err != nil {
			t.Fatal(err)
		}
		if err := render(&b2, d2, units{}); err != nil {
			t.Fatal(err)
		}
		if b1.String() != b2.String() {
			t.Errorf("%s of schema 1:\n%s\nof schema 2:\n%s", name, b1.String(), b2.String())
		}
	}
}

// TestSelectService: --service keeps the one service; an unknown name is
// an error that lists the instance's services.
func TestSelectService(t *testing.T) {
	d, _ := recordedServices(t)
	if err := selectService(d, "api"); err != nil || len(d.Services) != 1 || d.Services[0].Name != "api" {
		t.Errorf("select api: %v, %+v", err, d.Services)
	}
	d, _ = recordedServices(t)
	err := selectService(d, "nope")
	if err == nil || err.Error() != "--service nope: the instance has no such service (its services: web, api, old, dns)" {
		t.Errorf("select nope: %v", err)
	}
	if err := selectService(d, ""); err != nil || len(d.Services) != 4 {
		t.Errorf("no --service: %v, %d services", err, len(d.Services))
	}
}

// TestOlderDaemonAndQuietHost: a daemon older than the SNAT list and the
// host settings guard sends snat.ip alone and no host_settings; a guard
// that never repaired anything says so.
func TestOlderDaemonAndQuietHost(t *testing.T) {
	if got := snat(api.SNAT{IP: "198.51.100.1"}); got != "198.51.100.1" {
		t.Errorf("snat(ip only) = %q", got)
	}
	if got := snat(api.SNAT{}); got != "-" {
		t.Errorf("snat(nothing) = %q", got)
	}
	if got := hostSettings(nil); got != "-" {
		t.Errorf("hostSettings(nil) = %q", got)
	}
	quiet := []api.HostSetting{{Name: "net.ipv4.conf.lo.forwarding"}, {Name: "net.ipv4.ip_local_reserved_ports"}}
	if got := hostSettings(quiet); got != "2 guarded, never reset" {
		t.Errorf("hostSettings(no repairs) = %q", got)
	}
}

// TestServiceScheduler: the scheduler with its hash and table as the
// service line shows it (issue 30), before the first table and overfull.
func TestServiceScheduler(t *testing.T) {
	for _, c := range []struct {
		svc  api.Service
		want string
	}{
		{api.Service{Scheduler: "round_robin"}, "round_robin"},
		{api.Service{Scheduler: "weighted_round_robin", Table: &api.ServiceTable{Size: 5, RebuildsTotal: 1}}, "weighted_round_robin: 5 slots, 1 rebuild"},
		{api.Service{Scheduler: "maglev", Maglev: &api.Maglev{Hash: "five_tuple", TableSize: 16381}, Table: &api.ServiceTable{}},
			"maglev: five_tuple, no table yet"},
		{api.Service{Scheduler: "maglev", Maglev: &api.Maglev{Hash: "client_ip", TableSize: 16381},
			Table: &api.ServiceTable{Size: 16381, RebuildsTotal: 9, Overfull: true}},
			"maglev: client_ip, 16381 slots, 9 rebuilds, OVERFULL: under 100 slots per routable backend"},
	} {
		if got := serviceScheduler(c.svc); got != c.want {
			t.Errorf("serviceScheduler(%+v) = %q, want %q", c.svc, got, c.want)
		}
	}
}
