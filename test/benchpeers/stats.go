package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xlbproject/xlb/internal/testnet/loadgen"
)

// cell is what the report shows for one load and peer: medians over the
// repetitions that measured it.
type cell struct {
	values   []float64 // per repetition, in rep order
	median   float64
	p50, p99 time.Duration
	cpuBusy  float64
	cpuPerOp time.Duration
	failed   int            // summed over the repetitions
	failures map[string]int // failed by kind, summed over the repetitions
	windows  []float64      // long loads: the median of each window
	notes    []string
}

// cellOf summarises the successful results rs of one load and peer.
func cellOf(rs []result) (cell, bool) {
	var c cell
	var p50s, p99s, perOp []time.Duration
	var busy []float64
	var windows [][]float64
	for _, r := range rs {
		if !r.ok() {
			continue
		}
		c.values = append(c.values, r.Value)
		p50s, p99s, perOp = append(p50s, r.P50), append(p99s, r.P99), append(perOp, r.CPUPerOp)
		busy = append(busy, r.CPUBusy)
		c.failed += r.Failed
		for k, n := range r.Failures {
			if c.failures == nil {
				c.failures = map[string]int{}
			}
			c.failures[k] += n
		}
		if len(r.Windows) > 0 {
			windows = append(windows, r.Windows)
		}
		if r.Note != "" {
			c.notes = append(c.notes, r.Note)
		}
	}
	if len(c.values) == 0 {
		return c, false
	}
	c.median = median(c.values)
	c.p50, c.p99, c.cpuPerOp = medianDuration(p50s), medianDuration(p99s), medianDuration(perOp)
	c.cpuBusy = median(busy)
	for i := 0; len(windows) > 0 && i < len(windows[0]); i++ {
		var w []float64
		for _, ws := range windows {
			if i < len(ws) {
				w = append(w, ws[i])
			}
		}
		c.windows = append(c.windows, median(w))
	}
	return c, true
}

// errors is the socket errors cell: the failed connections or requests
// over all repetitions, and by kind where the load tells them apart
// ("1234: refused 1200, connect-timeout 34").
func (c cell) errors() string {
	s := strconv.Itoa(c.failed)
	if len(c.failures) == 0 {
		return s
	}
	var parts []string
	for k := loadgen.Refused; k <= loadgen.Other; k++ {
		if n := c.failures[k.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return s + ": " + strings.Join(parts, ", ")
}

// ratios are a peer's values divided by a reference's, repetition by
// repetition (only reps both measured), and their median.
type ratios struct {
	perRep []float64
	median float64
}

func ratiosOf(peer, ref []result) (ratios, bool) {
	byRep := map[int]float64{}
	for _, r := range ref {
		if r.ok() && r.Value > 0 {
			byRep[r.Rep] = r.Value
		}
	}
	var out ratios
	for _, r := range peer {
		if v, ok := byRep[r.Rep]; ok && r.ok() {
			out.perRep = append(out.perRep, r.Value/v)
		}
	}
	if len(out.perRep) == 0 {
		return out, false
	}
	out.median = median(out.perRep)
	return out, true
}

// median of xs (the mean of the middle two for an even count; 0 when
// empty). xs is not changed.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianDuration(ds []time.Duration) time.Duration {
	fs := make([]float64, len(ds))
	for i, d := range ds {
		fs[i] = float64(d)
	}
	return time.Duration(median(fs))
}
