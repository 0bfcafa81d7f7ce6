package dataplane

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// hzCandidates are the tick rates (jiffies per second) Linux can be built
// with (CONFIG_HZ across architectures), in ascending order. The closest
// neighbours (250/256, 500/512, 1000/1024) are 2.4% apart.
var hzCandidates = []int{24, 32, 48, 64, 100, 128, 200, 250, 256, 300, 500, 512, 1000, 1024, 1200}

const (
	// hzSampleErrTicks bounds the error, in ticks, of the jiffy count
	// between two clock samples. Each sample reads bpf_jiffies64 and
	// bpf_ktime_get_ns back to back in the kernel, so its only error is
	// the jiffy quantisation (less than one tick); two samples, at most
	// two ticks.
	hzSampleErrTicks = 2

	// hzMinSpanTicks and hzMinSpan are the shortest span hzFromSamples
	// accepts. At 250 ticks the worst-case rate error is 2/250 = 0.8%,
	// well under half the 2.4% gap between the closest candidates.
	hzMinSpanTicks = 250
	hzMinSpan      = 200 * time.Millisecond

	// hzMargin widens the tolerance beyond the quantisation bound, to
	// cover 2/(n-2) versus 2/n (0.007% at 250 ticks), CLOCK_MONOTONIC
	// slewing (NTP: at most 0.05%) and float rounding. At the minimum
	// span the tolerance is then 0.8% + 0.25% = 1.05%, which still keeps
	// the windows of 1000 and 1024 (and 250/256, 500/512) apart.
	hzMargin = 0.0025
)

// errHZSpanTooShort reports that two clock samples are too close together to
// tell neighbouring tick rates apart; sampling longer fixes it.
var errHZSpanTooShort = errors.New("span too short")

// hzFromSamples derives the kernel's tick rate from two clock samples, each a
// pair (jiffies, CLOCK_MONOTONIC ns) read together in the kernel, the second
// taken after the first.
//
// The estimate is r = n / t, with n = j1-j0 ticks over t = ns1-ns0. If the
// true rate is h, n = h*t + e with |e| <= 2 ticks (one tick of quantisation
// per sample), whatever happened in userspace between the samples, so
// |r-h|/h = |e|/(n-e) <= 2/(n-2). hzFromSamples accepts the nearest
// candidate c only if |r-c| <= tol*c with tol = 2/n + hzMargin, and only if
// that window excludes c's neighbours (c' - c > tol*(c+c')): then the true
// rate lies in its own window, no other candidate's window overlaps it, and
// the answer cannot be a neighbour. It requires n >= 250 ticks and
// t >= 200ms, enough for the windows of every pair of neighbouring candidates
// to be disjoint; a shorter span returns an error wrapping
// errHZSpanTooShort. An estimate within no candidate's window returns an
// error naming what was measured instead of a guess. Jiffies are 64-bit and
// do not wrap (2^64 ticks at 1200 Hz is 487 million years); j1 < j0 or
// ns1 <= ns0 is an error.
func hzFromSamples(j0 Jiffies, ns0 uint64, j1 Jiffies, ns1 uint64) (int, error) {
	if j1 < j0 || ns1 <= ns0 {
		return 0, fmt.Errorf("dataplane: HZ: clock samples out of order: (%d jiffies, %d ns) then (%d jiffies, %d ns)", j0, ns0, j1, ns1)
	}
	n := uint64(j1 - j0)
	span := time.Duration(ns1 - ns0)
	if n < hzMinSpanTicks || span < hzMinSpan {
		return 0, fmt.Errorf("dataplane: HZ: %d ticks in %v: %w (need at least %d ticks and %v)",
			n, span, errHZSpanTooShort, hzMinSpanTicks, hzMinSpan)
	}
	r := float64(n) * 1e9 / float64(ns1-ns0)
	tol := hzSampleErrTicks/float64(n) + hzMargin

	best := 0
	for i, c := range hzCandidates {
		if math.Abs(r-float64(c))/float64(c) < math.Abs(r-float64(hzCandidates[best]))/float64(hzCandidates[best]) {
			best = i
		}
	}
	c := hzCandidates[best]
	for _, i := range []int{best - 1, best + 1} {
		if i < 0 || i >= len(hzCandidates) {
			continue
		}
		// Unreachable at the minimum span with the candidates above;
		// kept so that a change to either cannot turn into a guess.
		if nb := hzCandidates[i]; math.Abs(float64(nb-c)) <= tol*float64(nb+c) {
			return 0, fmt.Errorf("dataplane: HZ: %d ticks in %v: %w to tell %d from %d (tolerance ±%.2f%%)",
				n, span, errHZSpanTooShort, c, nb, 100*tol)
		}
	}
	if off := math.Abs(r-float64(c)) / float64(c); off > tol {
		return 0, fmt.Errorf("dataplane: HZ: measured %.2f ticks/s (%d ticks in %v); nearest rate %d is %.2f%% off, outside the ±%.2f%% a %d-tick span allows",
			r, n, span, c, 100*off, 100*tol, n)
	}
	return c, nil
}
