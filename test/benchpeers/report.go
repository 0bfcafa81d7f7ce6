package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// table groups a run's results by load and peer.
type table struct {
	run   *run
	loads []string                       // in -loads order, measured at least once
	peers []string                       // in the report's peer order, among -peers
	by    map[string]map[string][]result // load -> peer -> results
}

func newTable(r *run) *table {
	t := &table{run: r, by: map[string]map[string][]result{}}
	for _, res := range r.Results {
		if t.by[res.Load] == nil {
			t.by[res.Load] = map[string][]result{}
		}
		t.by[res.Load][res.Peer] = append(t.by[res.Load][res.Peer], res)
	}
	for _, l := range r.Options.Loads {
		if t.by[l] != nil {
			t.loads = append(t.loads, l)
		}
	}
	for _, p := range peerNames() {
		if slices.Contains(r.Options.Peers, p) {
			t.peers = append(t.peers, p)
		}
	}
	return t
}

// summaryPeer is the peer the summary table is about.
const summaryPeer = "xlb-native"

// writeReport writes the Markdown report; plot is the PNG's file name
// relative to the report ("" for none).
func writeReport(w io.Writer, r *run, plot string) {
	t := newTable(r)
	m := r.Machine
	fmt.Fprintf(w, "# XLB and its peers (`make bench-peers`)\n\n")
	fmt.Fprintf(w, "Run %s – %s (%s) on %s.\n\n", r.Started.Format(time.RFC3339), r.Finished.Format("15:04:05Z07:00"),
		r.Finished.Sub(r.Started).Round(time.Second), m.Commit)
	fmt.Fprintf(w, "- Machine: %s.\n", m)
	fmt.Fprintf(w, "- Command: `%s`\n", r.Command)
	if m.XLB != "" {
		fmt.Fprintf(w, "- XLB measured: `%s`", m.XLB)
		if m.Baseline != "" {
			fmt.Fprintf(w, "; xlb-baseline: `%s` (%s)", m.Baseline, r.Options.Baseline)
		}
		fmt.Fprintf(w, ".\n")
	}
	o := r.Options
	fmt.Fprintf(w, "- Options: %d repetitions (long loads %d), loads of %v, long loads %v in %v windows, %d workers, %d bulk streams, %d idle pairs writing every %v.\n",
		o.Reps, o.LongReps, o.Duration, o.Long, o.Window, o.Workers, o.Streams, o.IdlePairs, o.Trickle)
	fmt.Fprintf(w, "- The balancer, the load generator and the backends share the machine's CPUs: only ratios measured in the same repetition count. A ratio cell is the median of the per-repetition ratios, those in brackets.\n\n")
	if plot != "" {
		fmt.Fprintf(w, "![ratios](%s)\n\n", plot)
	}
	t.writeSummary(w)
	t.writeXDPTime(w)
	for _, l := range t.loads {
		t.writeLoad(w, loadByName(l))
	}
	t.writeIdleEffect(w)
	t.writeErrors(w)
	t.writeAbout(w)
}

// xdpPeers are the peers that are an XDP program, in the XDP table's
// column order; the first is the reference.
var xdpPeers = []string{"floor", summaryPeer, defaultPeer, baselinePeer, "xlb-generic"}

// writeXDPTime is the XDP programs' run time per packet, load by load
// (medians over repetitions), and each divided by the floor's in the same
// repetition: the balancer's own cycles, without the stacks around it.
func (t *table) writeXDPTime(w io.Writer) {
	var peers []string
	for _, p := range xdpPeers {
		if slices.Contains(t.peers, p) {
			peers = append(peers, p)
		}
	}
	has := false
	for _, l := range t.loads {
		for _, p := range peers {
			for _, r := range t.by[l][p] {
				has = has || r.XDPPackets > 0
			}
		}
	}
	if !has {
		return
	}
	fmt.Fprintf(w, "## XDP program time per packet\n\nThe kernel's BPF run-time statistics (`bpf_stats_enabled`) over each load: the balancer's program alone, ns per packet (median over repetitions), and in brackets ÷ the floor balancer's in the same repetition.\n\n| load |")
	for _, p := range peers {
		fmt.Fprintf(w, " %s |", p)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(peers)))
	for _, l := range t.loads {
		fmt.Fprintf(w, "| %s |", l)
		for _, p := range peers {
			fmt.Fprintf(w, " %s |", t.xdpCell(l, p, peers[0]))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// xdpCell is peer's median XDP time per packet in load, with the median
// of its per-repetition ratios to ref's; "–" when not measured.
func (t *table) xdpCell(load, peer, ref string) string {
	var own []time.Duration
	var ratios []float64
	for _, r := range t.by[load][peer] {
		if r.XDPPackets == 0 {
			continue
		}
		own = append(own, r.XDPPerPacket)
		for _, f := range t.by[load][ref] {
			if f.Rep == r.Rep && f.XDPPackets > 0 && peer != ref {
				ratios = append(ratios, float64(r.XDPPerPacket)/float64(f.XDPPerPacket))
			}
		}
	}
	if len(own) == 0 {
		return "–"
	}
	s := fmt.Sprintf("%d ns", medianDuration(own).Nanoseconds())
	if len(ratios) > 0 {
		s += fmt.Sprintf(" (%.2f×)", median(ratios))
	}
	return s
}

// writeAbout describes the peers and loads of the run.
func (t *table) writeAbout(w io.Writer) {
	fmt.Fprintf(w, "## What was measured\n\nEvery peer serves %s → the backends' port %d in the one-arm lab (test/lab: one bridge; clients, the balancer namespace and three backends on 192.0.2.0/24), each measurement in a lab of its own. In each repetition every load runs through every peer, the peers' order rotated by one per repetition.\n\n", vip, backendPort)
	for _, p := range t.peers {
		fmt.Fprintf(w, "- `%s`: %s.\n", p, peerByName(p).about)
	}
	fmt.Fprintln(w)
	for _, l := range t.loads {
		fmt.Fprintf(w, "- `%s`: %s.\n", l, loadByName(l).about)
	}
	fmt.Fprintf(w, "\nCPU busy is the host's (all CPUs, /proc/stat) during the measured part; CPU/op is that busy time divided by the operations done.\n")
}

// writeSummary is XLB native's ratios to each reference, load by load, and
// those of XLB with the packaged SNAT space and of the baseline.
func (t *table) writeSummary(w io.Writer) {
	for _, peer := range []string{summaryPeer, defaultPeer, baselinePeer} {
		if !slices.Contains(t.peers, peer) {
			continue
		}
		refs := t.refs()
		if peer == summaryPeer && slices.Contains(t.peers, baselinePeer) {
			refs = append(refs, baselinePeer) // after ÷ before
		}
		if len(refs) == 0 {
			continue
		}
		fmt.Fprintf(w, "## Summary: %s\n\n| load |", peer)
		for _, ref := range refs {
			fmt.Fprintf(w, " ÷ %s |", ref)
		}
		fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(refs)))
		for _, l := range t.loads {
			fmt.Fprintf(w, "| %s |", l)
			for _, ref := range refs {
				fmt.Fprintf(w, " %s |", t.ratioCell(l, peer, ref, false))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
}

// refs are the ratio references this run measured.
func (t *table) refs() []string {
	var out []string
	for _, r := range references {
		if slices.Contains(t.peers, r) {
			out = append(out, r)
		}
	}
	return out
}

// ratioCell is "median (rep1 rep2 …)", or just the median; "–" when not
// measured.
func (t *table) ratioCell(load, peer, ref string, perRep bool) string {
	if peer == ref {
		return "1"
	}
	rs, ok := ratiosOf(t.by[load][peer], t.by[load][ref])
	if !ok {
		return "–"
	}
	s := fmt.Sprintf("%.2f", rs.median)
	if perRep && len(rs.perRep) > 1 {
		parts := make([]string, len(rs.perRep))
		for i, x := range rs.perRep {
			parts[i] = fmt.Sprintf("%.2f", x)
		}
		s += " (" + strings.Join(parts, " ") + ")"
	}
	return s
}

func (t *table) writeLoad(w io.Writer, ld load) {
	refs := t.refs()
	fmt.Fprintf(w, "## %s (`%s`, %s)\n\n| peer | %s | per rep |", ld.title, ld.name, ld.unit, ld.unit)
	for _, ref := range refs {
		fmt.Fprintf(w, " × %s |", ref)
	}
	fmt.Fprintf(w, " p50 | p99 | CPU busy | CPU/%s | socket errors |\n|---|---:|---|%s---:|---:|---:|---:|---:|\n", ld.op, strings.Repeat("---|", len(refs)))
	var long []string
	for _, p := range t.peers {
		rs := t.by[ld.name][p]
		c, ok := cellOf(rs)
		if !ok {
			if why := whyMissing(rs); why != "" {
				fmt.Fprintf(w, "| %s | – | %s |%s – | – | – | – | – |\n", p, why, strings.Repeat(" – |", len(refs)))
			}
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s |", p, number(c.median), numbers(c.values))
		for _, ref := range refs {
			fmt.Fprintf(w, " %s |", t.ratioCell(ld.name, p, ref, true))
		}
		fmt.Fprintf(w, " %s | %s | %.0f%% | %s | %s |\n", latency(c.p50), latency(c.p99), 100*c.cpuBusy, latency(c.cpuPerOp), c.errors())
		if len(c.windows) > 0 {
			long = append(long, p)
		}
	}
	fmt.Fprintln(w)
	if len(long) > 0 {
		t.writeWindows(w, ld, long)
	}
	for _, p := range t.peers {
		if c, ok := cellOf(t.by[ld.name][p]); ok && len(c.notes) > 0 {
			fmt.Fprintf(w, "- %s: %s\n", p, strings.Join(slices.Compact(c.notes), "; "))
		}
	}
	fmt.Fprintln(w)
}

// writeWindows is a long load's rate per window, peer by peer, and the
// lowest window relative to the first.
func (t *table) writeWindows(w io.Writer, ld load, peers []string) {
	win := t.run.Options.Window
	n := 0
	for _, p := range peers {
		c, _ := cellOf(t.by[ld.name][p])
		n = max(n, len(c.windows))
	}
	fmt.Fprintf(w, "%s per %v window (median over repetitions):\n\n| peer |", ld.unit, win)
	for i := range n {
		fmt.Fprintf(w, " %v–%v |", time.Duration(i)*win, time.Duration(i+1)*win)
	}
	fmt.Fprintf(w, " lowest ÷ first |\n|---|%s---:|\n", strings.Repeat("---:|", n))
	for _, p := range peers {
		c, _ := cellOf(t.by[ld.name][p])
		fmt.Fprintf(w, "| %s |", p)
		for i := range n {
			if i < len(c.windows) {
				fmt.Fprintf(w, " %s |", number(c.windows[i]))
			} else {
				fmt.Fprint(w, " – |")
			}
		}
		low := slices.Min(c.windows)
		if c.windows[0] > 0 {
			fmt.Fprintf(w, " %.2f |\n", low/c.windows[0])
		} else {
			fmt.Fprint(w, " – |\n")
		}
	}
	fmt.Fprintln(w)
}

// writeIdleEffect is each peer's keepalive rate with the idle pairs open
// divided by its rate without (both medians): what table size costs.
func (t *table) writeIdleEffect(w io.Writer) {
	if t.by["idle"] == nil || t.by["keepalive"] == nil {
		return
	}
	var rows []string
	for _, p := range t.peers {
		with, ok1 := cellOf(t.by["idle"][p])
		without, ok2 := cellOf(t.by["keepalive"][p])
		if ok1 && ok2 && without.median > 0 {
			rows = append(rows, fmt.Sprintf("| %s | %.2f |\n", p, with.median/without.median))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Table size: keep-alive with %d idle pairs ÷ without\n\n| peer | ratio |\n|---|---:|\n%s\n", t.run.Options.IdlePairs, strings.Join(rows, ""))
}

func (t *table) writeErrors(w io.Writer) {
	var lines []string
	for _, r := range t.run.Results {
		if r.Error != "" {
			lines = append(lines, fmt.Sprintf("- rep %d, %s via %s: %s", r.Rep+1, r.Load, r.Peer, oneLine(r.Error)))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "## Failed measurements\n\n%s\n", strings.Join(lines, "\n"))
	}
}

// whyMissing says why a peer has no value for a load: skipped or failed.
func whyMissing(rs []result) string {
	for _, r := range rs {
		if r.Skipped != "" {
			return "skipped: " + r.Skipped
		}
	}
	if len(rs) > 0 {
		return "failed (below)"
	}
	return ""
}

func oneLine(s string) string {
	line, rest, _ := strings.Cut(s, "\n")
	if len(line) > 300 {
		line = line[:300] + "…"
	}
	if rest != "" {
		line += " …"
	}
	return line
}

// number formats a value with three significant digits or more.
func number(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func numbers(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = number(x)
	}
	return strings.Join(parts, " ")
}

// latency formats d in µs with up to three significant digits, "–" for 0.
func latency(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	us := float64(d) / float64(time.Microsecond)
	if us >= 1000 {
		return fmt.Sprintf("%.1f ms", us/1000)
	}
	return number(us) + " µs"
}
