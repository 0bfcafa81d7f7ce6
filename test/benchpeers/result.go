package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// result is one measurement as the results file keeps it.
type result struct {
	Rep      int           `json:"rep"`
	Load     string        `json:"load"`
	Peer     string        `json:"peer"`
	Value    float64       `json:"value"` // in the load's unit; more is better
	Unit     string        `json:"unit"`
	P50      time.Duration `json:"p50_ns,omitempty"`
	P99      time.Duration `json:"p99_ns,omitempty"`
	CPUBusy  float64       `json:"cpu_busy"`                // fraction of all CPUs, 0…1
	CPUPerOp time.Duration `json:"cpu_per_op_ns,omitempty"` // busy CPU time per operation
	Op       string        `json:"op"`
	Windows  []float64     `json:"windows,omitempty"`
	// XDPPerPacket is the balancer's XDP program's average run time per
	// packet during the load (bpf_stats_enabled), XDPPackets its runs.
	XDPPerPacket time.Duration `json:"xdp_per_packet_ns,omitempty"`
	XDPPackets   uint64        `json:"xdp_packets,omitempty"`
	Failed       int           `json:"failed,omitempty"`
	Note         string        `json:"note,omitempty"`
	Error        string        `json:"error,omitempty"` // the measurement failed; Value is 0
	Skipped      string        `json:"skipped,omitempty"`
	Started      time.Time     `json:"started"`

	// Failures counts the new-connection loads' failed connections (the
	// socket errors) by kind: refused (a RST answered the SYN),
	// connect-timeout, reset, io-timeout, no-local-port, bad-reply, other
	// (internal/testnet/loadgen's Failure).
	Failures map[string]int `json:"failures,omitempty"`
}

// ok says whether r has a value to compare.
func (r result) ok() bool { return r.Error == "" && r.Skipped == "" }

// run is the results file: the options and machine it ran with and every
// measurement in the order taken.
type run struct {
	Command  string    `json:"command"` // how it was started: BENCH_PEERS_* settings and arguments
	Options  options   `json:"options"`
	Machine  machine   `json:"machine"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Results  []result  `json:"results"`
}

func (r *run) save(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// loadRuns reads results files and merges them into one run: every
// result, the loads and peers of all in order, the first run's options
// otherwise, the machine of the first, each command.
func loadRuns(paths []string) (*run, error) {
	var m *run
	var commands []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r run
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		commands = append(commands, r.Command)
		if m == nil {
			m = &r
			continue
		}
		m.Results = append(m.Results, r.Results...)
		// The options of the loads a later run adds are that run's.
		if slices.Contains(r.Options.Loads, "idle") && !slices.Contains(m.Options.Loads, "idle") {
			m.Options.IdlePairs, m.Options.Trickle = r.Options.IdlePairs, r.Options.Trickle
		}
		for _, l := range r.Options.Loads {
			if !slices.Contains(m.Options.Loads, l) {
				m.Options.Loads = append(m.Options.Loads, l)
			}
		}
		for _, p := range r.Options.Peers {
			if !slices.Contains(m.Options.Peers, p) {
				m.Options.Peers = append(m.Options.Peers, p)
			}
		}
		if r.Started.Before(m.Started) {
			m.Started = r.Started
		}
		if r.Finished.After(m.Finished) {
			m.Finished = r.Finished
		}
	}
	if m == nil {
		return nil, fmt.Errorf("no results files")
	}
	m.Command = strings.Join(commands, "`, then `")
	return m, nil
}
