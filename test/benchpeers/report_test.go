package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeRun is two repetitions of keepalive through the floor, direct and
// XLB, and a skipped idle load through the floor.
func fakeRun() *run {
	res := func(rep int, peer string, v float64) result {
		return result{Rep: rep, Load: "keepalive", Peer: peer, Value: v, Unit: "req/s", Op: "req", P50: 40 * time.Microsecond, P99: 2 * time.Millisecond, CPUBusy: 0.9, CPUPerOp: 30 * time.Microsecond}
	}
	return &run{
		Options: options{Reps: 2, LongReps: 1, Duration: time.Second, Long: 2 * time.Second, Window: time.Second, Workers: 1, Streams: 1, IdlePairs: 10,
			Peers: []string{"xlb-native", "direct", "floor"}, Loads: []string{"keepalive", "idle"}},
		Results: []result{
			res(0, "floor", 1000), res(0, "direct", 2000), res(0, "xlb-native", 900),
			res(1, "xlb-native", 1000), res(1, "floor", 1250), res(1, "direct", 2500),
			{Rep: 0, Load: "idle", Peer: "floor", Skipped: "one client"},
			{Rep: 0, Load: "idle", Peer: "direct", Error: "boom\nsecond line"},
		},
	}
}

func TestRatiosAreTakenWithinARepetition(t *testing.T) {
	tb := newTable(fakeRun())
	// xlb ÷ floor: 0.9 in rep 1, 0.8 in rep 2, median 0.85.
	if got, want := tb.ratioCell("keepalive", "xlb-native", "floor", true), "0.85 (0.90 0.80)"; got != want {
		t.Errorf("ratio cell %q, want %q", got, want)
	}
	if got := tb.ratioCell("keepalive", "floor", "floor", true); got != "1" {
		t.Errorf("a reference's own cell %q, want 1", got)
	}
	if got := tb.ratioCell("keepalive", "xlb-native", "iptables", true); got != "–" {
		t.Errorf("a ratio to a peer not measured %q, want –", got)
	}
}

func TestReport(t *testing.T) {
	var b bytes.Buffer
	writeReport(&b, fakeRun(), "p.png")
	out := b.String()
	for _, want := range []string{
		"| xlb-native | 950 | 900 1000 | 0.85 (0.90 0.80) | 0.43 (0.45 0.40) |",
		"| floor | – | skipped: one client |",
		"- rep 1, idle via direct: boom …",
		"![ratios](p.png)",
		"| keepalive | 0.85 | 0.43 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.png")
	drawn, err := writePlot(fakeRun(), path)
	if err != nil || !drawn {
		t.Fatalf("writePlot: %v, drawn %v", err, drawn)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("not a PNG: %v", err)
	}
}

func TestOptionsPrecedence(t *testing.T) {
	env := map[string]string{"BENCH_PEERS_QUICK": "1", "BENCH_PEERS_REPS": "2"}
	o, err := parseOptions([]string{"-duration", "5s", "-peers", "direct,xlb-native"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if o.Reps != 2 || o.Duration != 5*time.Second || o.Long != quickDefaults.Long || o.IdlePairs != quickDefaults.IdlePairs {
		t.Errorf("reps %d duration %v long %v idle %d: want env's 2, the flag's 5s, quick's %v and %d", o.Reps, o.Duration, o.Long, o.IdlePairs, quickDefaults.Long, quickDefaults.IdlePairs)
	}
	if len(o.Peers) != 2 {
		t.Errorf("peers %v", o.Peers)
	}
	if _, err := parseOptions([]string{"-peers", "envoy"}, func(string) string { return "" }); err == nil {
		t.Error("an unknown peer was accepted")
	}
}

func TestOptionsBaseline(t *testing.T) {
	none := func(string) string { return "" }
	o, err := parseOptions(nil, none)
	if err != nil || slices.Contains(o.Peers, baselinePeer) {
		t.Fatalf("without -baseline: peers %v, %v; want no %s", o.Peers, err, baselinePeer)
	}
	if _, err := parseOptions([]string{"-peers", "floor," + baselinePeer}, none); err == nil {
		t.Errorf("peer %s without -baseline was accepted", baselinePeer)
	}
	if _, err := parseOptions([]string{"-baseline", t.TempDir()}, none); err == nil {
		t.Error("a directory as -baseline was accepted")
	}
	bin := filepath.Join(t.TempDir(), "xlb")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o, err = parseOptions(nil, func(k string) string { return map[string]string{"BENCH_PEERS_BASELINE": bin}[k] })
	if err != nil || !slices.Contains(o.Peers, baselinePeer) || o.Baseline != bin {
		t.Errorf("BENCH_PEERS_BASELINE: peers %v baseline %q, %v; want %s among the peers", o.Peers, o.Baseline, err, baselinePeer)
	}
}

func TestReportXDPTime(t *testing.T) {
	r := fakeRun()
	for i := range r.Results {
		res := &r.Results[i]
		switch {
		case res.Load != "keepalive":
		case res.Peer == "floor":
			res.XDPPerPacket, res.XDPPackets = 40, 1000
		case res.Peer == "xlb-native":
			res.XDPPerPacket, res.XDPPackets = time.Duration(60+20*res.Rep), 1000
		}
	}
	var b bytes.Buffer
	writeReport(&b, r, "")
	// xlb ÷ floor: 1.5 in rep 1, 2.0 in rep 2; direct is no XDP program.
	if want := "| keepalive | 40 ns | 70 ns (1.75×) |"; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
	var none bytes.Buffer
	writeReport(&none, fakeRun(), "")
	if strings.Contains(none.String(), "XDP program time") {
		t.Error("an XDP table without XDP statistics")
	}
}
