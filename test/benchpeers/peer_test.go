package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// The new-connection loads' socket errors appear in the report by kind,
// summed over the repetitions, and in the results file.
func TestReportSocketErrors(t *testing.T) {
	res := func(rep int, peer string, v float64, failures map[string]int) result {
		n := 0
		for _, f := range failures {
			n += f
		}
		return result{Rep: rep, Load: "conn-server-first", Peer: peer, Value: v, Unit: "conn/s", Op: "conn", Failed: n, Failures: failures}
	}
	r := &run{
		Options: options{Reps: 2, LongReps: 1, Peers: []string{"iptables", defaultPeer}, Loads: []string{"conn-server-first"}},
		Results: []result{
			res(0, "iptables", 3000, nil), res(0, defaultPeer, 2000, map[string]int{"refused": 100, "connect-timeout": 2}),
			res(1, "iptables", 3000, nil), res(1, defaultPeer, 2000, map[string]int{"refused": 50}),
		},
	}
	var b bytes.Buffer
	writeReport(&b, r, "")
	for _, want := range []string{"| socket errors |", "| 152: refused 150, connect-timeout 2 |\n", "| iptables | 3000 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if !strings.Contains(b.String(), "| 0 |\n") {
		t.Errorf("iptables' row lacks its 0 socket errors:\n%s", b.String())
	}
}

// xlb-default runs the new-connection loads only, the floor, which
// answers one client address, sits out the loads from 8, and the peers
// that do not balance UDP sit out the UDP loads.
func TestSkips(t *testing.T) {
	e := &env{opts: fullDefaults}
	for _, c := range []struct{ load, peer, why string }{
		{"keepalive", defaultPeer, "new-connection loads only"},
		{"idle", defaultPeer, "new-connection loads only"},
		{"conn-server-first-8addr", "floor", "serves 1 client address(es), the load needs 8"},
		{"conn-server-first-8addr-long", "floor", "the load needs 8"},
		// the proxies and the floor do not balance UDP (issue 31)
		{"udp-rr", "haproxy", "haproxy does not balance UDP"},
		{"udp-bulk", "nginx", "nginx does not balance UDP"},
		{"udp-rr", "floor", "floor does not balance UDP"},
		{"udp-bulk", defaultPeer, "does not balance UDP"},
	} {
		r := measure(context.Background(), e, loadByName(c.load), peerByName(c.peer), 0)
		if !strings.Contains(r.Skipped, c.why) {
			t.Errorf("%s via %s: skipped %q, want %q", c.load, c.peer, r.Skipped, c.why)
		}
	}
}

// xlb-default's snat section is the packages': one address, a port range.
func TestPackagedSNAT(t *testing.T) {
	s, err := packagedSNAT()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%v:\n%s", err, s)
	}
	snat := m["snat"]
	if len(m) != 1 || snat == nil {
		t.Fatalf("not one snat section:\n%s", s)
	}
	if _, one := snat["ip"].(string); !one || snat["port_range"] == nil || strings.Contains(s, "#") {
		t.Errorf("want one address (ip: a string), a port_range and no comments:\n%s", s)
	}
	t.Logf("%s", s)
}
