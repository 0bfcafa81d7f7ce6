package dataplane

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// MeasureHZ runs a fresh HZ measurement, bypassing the process-wide cache,
// for the kernel test in clock_test.go.
func (d *Dataplane) MeasureHZ() (int, time.Duration, error) { return d.measureHZ() }

// Arbitrary sample origins: jiffies64 starts at INITIAL_JIFFIES, 300 s below
// 2^32, so spans that cross the 32-bit boundary are the common case.
const (
	testJ0  = Jiffies(1<<32 - 300*250)
	testNs0 = uint64(123_456_789_012)
)

// samplesAt returns the second sample for a span of n observed ticks when the
// true rate is hz and the observed count is e ticks more than the true one
// (so the span really lasted (n-e)/hz seconds).
func samplesAt(hz int, n uint64, e float64) (Jiffies, uint64) {
	ns := math.Round((float64(n) - e) * 1e9 / float64(hz))
	return testJ0 + Jiffies(n), testNs0 + uint64(ns)
}

func TestHZFromSamplesExact(t *testing.T) {
	for _, hz := range hzCandidates {
		for _, n := range []uint64{hzMinSpanTicks, 251, 1000, 12345, 1 << 20} {
			j1, ns1 := samplesAt(hz, n, 0)
			got, err := hzFromSamples(testJ0, testNs0, j1, ns1)
			if err != nil || got != hz {
				t.Errorf("HZ %d, %d ticks: got %d, %v", hz, n, got, err)
			}
		}
	}
}

// TestHZFromSamplesQuantisation sweeps the quantisation error over ±2 ticks
// for every candidate, from the minimum span up: the answer must always be
// the true rate, never a neighbour.
func TestHZFromSamplesQuantisation(t *testing.T) {
	for _, hz := range hzCandidates {
		for _, n := range []uint64{hzMinSpanTicks, hzMinSpanTicks + 1, 300, 1000, 10000} {
			for k := -200; k <= 200; k++ {
				e := float64(k) / 100
				j1, ns1 := samplesAt(hz, n, e)
				got, err := hzFromSamples(testJ0, testNs0, j1, ns1)
				if err != nil || got != hz {
					t.Errorf("HZ %d, %d ticks observed, error %+.2f ticks: got %d, %v", hz, n, e, got, err)
				}
			}
		}
	}
}

// The closest pairs at the minimum span with the worst error pushing each
// towards the other: 250 ticks of HZ=250 observed as if 2 ticks too many
// (252/250 = 1.008) must not become 256, and so on.
func TestHZFromSamplesClosestPairs(t *testing.T) {
	for _, tc := range []struct {
		hz int
		e  float64
	}{
		{250, -2}, {256, +2}, {500, -2}, {512, +2}, {1000, -2}, {1024, +2},
		{250, +2}, {256, -2}, {1000, +2}, {1024, -2},
	} {
		j1, ns1 := samplesAt(tc.hz, hzMinSpanTicks, tc.e)
		got, err := hzFromSamples(testJ0, testNs0, j1, ns1)
		if err != nil || got != tc.hz {
			t.Errorf("HZ %d, error %+v ticks: got %d, %v", tc.hz, tc.e, got, err)
		}
	}
}

// At the minimum span the tolerance windows of neighbouring candidates must
// not overlap; otherwise some estimate could fit either.
func TestHZCandidateWindowsDisjoint(t *testing.T) {
	tol := hzSampleErrTicks/float64(hzMinSpanTicks) + hzMargin
	// The tolerance must cover the worst-case relative error 2/(n-2).
	if worst := hzSampleErrTicks / float64(hzMinSpanTicks-hzSampleErrTicks); tol <= worst {
		t.Fatalf("tolerance %.4f%% does not cover the worst error %.4f%%", 100*tol, 100*worst)
	}
	for i := 1; i < len(hzCandidates); i++ {
		a, b := float64(hzCandidates[i-1]), float64(hzCandidates[i])
		if a >= b {
			t.Fatalf("candidates not ascending at %v, %v", a, b)
		}
		if a*(1+tol) >= b*(1-tol) {
			t.Errorf("windows of %v and %v overlap at %d ticks (±%.3f%%)", a, b, hzMinSpanTicks, 100*tol)
		}
	}
}

func TestHZFromSamplesTooShort(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    uint64
		ns   uint64
	}{
		{"ten ticks at 1000", 10, 10_000_000},
		{"one tick short", hzMinSpanTicks - 1, (hzMinSpanTicks - 1) * 4_000_000},
		{"enough ticks, under 200ms", 300, 150_000_000},
		{"no ticks", 0, 5_000_000_000},
	} {
		got, err := hzFromSamples(testJ0, testNs0, testJ0+Jiffies(tc.n), testNs0+tc.ns)
		if !errors.Is(err, errHZSpanTooShort) {
			t.Errorf("%s: got %d, %v; want errHZSpanTooShort", tc.name, got, err)
		}
	}
}

func TestHZFromSamplesBetweenCandidates(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		rate float64
	}{
		{hzMinSpanTicks, 253},  // midway between 250 and 256
		{hzMinSpanTicks, 1012}, // midway between 1000 and 1024
		{1000, 1012},
		{10000, 1005}, // 0.5% off 1000: outside ±0.27% at 10000 ticks
		{1000, 2000},  // above every candidate
		{1000, 160},   // between 128 and 200
	} {
		ns := uint64(math.Round(float64(tc.n) * 1e9 / tc.rate))
		got, err := hzFromSamples(testJ0, testNs0, testJ0+Jiffies(tc.n), testNs0+ns)
		if err == nil || errors.Is(err, errHZSpanTooShort) {
			t.Errorf("%v ticks/s over %d ticks: got %d, %v; want a no-candidate error", tc.rate, tc.n, got, err)
			continue
		}
		if !strings.Contains(err.Error(), "measured") {
			t.Errorf("error does not report the measurement: %v", err)
		}
		t.Logf("%v", err)
	}
}

func TestHZFromSamplesOutOfOrder(t *testing.T) {
	if got, err := hzFromSamples(testJ0+1000, testNs0, testJ0, testNs0+1_000_000_000); err == nil {
		t.Errorf("jiffies going backwards: got %d, want error", got)
	}
	if got, err := hzFromSamples(testJ0, testNs0, testJ0+1000, testNs0); err == nil {
		t.Errorf("no time passing: got %d, want error", got)
	}
}

// 64-bit jiffies do not wrap in practice; a span crossing 2^32 (as one
// starting at INITIAL_JIFFIES does) must not be truncated to 32 bits.
func TestHZFromSamplesAcross32Bits(t *testing.T) {
	j0 := Jiffies(1<<32 - 100)
	got, err := hzFromSamples(j0, testNs0, j0+1000, testNs0+1_000_000_000)
	if err != nil || got != 1000 {
		t.Errorf("got %d, %v; want 1000", got, err)
	}
}

// A hot-upgrade successor adopts its predecessor's HZ only when Linux can
// be built with it.
func TestAdoptHZRefusesImpossibleRates(t *testing.T) {
	var d *Dataplane
	for _, hz := range []int{0, 7, 999, 2000} {
		if err := d.AdoptHZ(hz); err == nil {
			t.Errorf("AdoptHZ(%d) accepted", hz)
		}
	}
}
