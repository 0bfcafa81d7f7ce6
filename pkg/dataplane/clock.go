package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Jiffies is a reading of the data path's clock (bpf_jiffies64): the
// kernel's monotonic tick counter. Flow entries store their last-seen and
// close times in it.
type Jiffies uint64

// KernelNow returns the data path's current clock reading. It runs the
// xlb_clock program once (BPF_PROG_TEST_RUN), so userspace and the data path
// read the very same counter.
func (d *Dataplane) KernelNow() (Jiffies, error) {
	j, _, err := d.clockSample()
	return j, err
}

// clockSample returns jiffies and CLOCK_MONOTONIC nanoseconds read together.
func (d *Dataplane) clockSample() (Jiffies, uint64, error) {
	d.clockMu.Lock()
	defer d.clockMu.Unlock()
	if _, err := runOnce(d.objs.XlbClock); err != nil {
		return 0, 0, fmt.Errorf("dataplane: read clock: %w", err)
	}
	var st xlbXlbState
	if err := d.objs.XlbShared.Lookup(uint32(0), &st); err != nil {
		return 0, 0, fmt.Errorf("dataplane: read clock: %w", err)
	}
	return Jiffies(st.ClockJiffies), st.ClockNs, nil
}

var (
	hzOnce sync.Once
	hzVal  int
	hzErr  error
)

const (
	// hzSampleEvery is the sleep between clock samples while measuring HZ.
	hzSampleEvery = 20 * time.Millisecond
	// hzGiveUp bounds the measurement: 250 ticks take 10.4 s at the
	// slowest candidate rate (24 Hz), and about 1 s at HZ=250.
	hzGiveUp = 15 * time.Second
)

// HZ returns the kernel's tick rate (jiffies per second), the unit of
// bpf_jiffies64 and of every time the data path stores.
//
// It is measured once per process (the result, or the error, is cached) from
// two clock samples taken at least 250 ticks and 200 ms apart: about 250 ms
// at HZ=1000, 1 s at HZ=250, 2.5 s at HZ=100. Each sample is a (jiffies,
// CLOCK_MONOTONIC ns) pair read back to back in the kernel (clockSample), so
// the jiffy count over the span is off by at most 2 ticks however long this
// process was descheduled, and the measured rate by at most 2/250 = 0.8%.
// The result is the rate Linux can be built with (24 ... 1200) whose window
// of ±(2/ticks + 0.25%) holds the measured rate; at 250 ticks or more those
// windows do not overlap, even for the closest pairs (250/256, 500/512,
// 1000/1024, 2.4% apart), so HZ cannot return a neighbour of the true rate.
// A measured rate in no window is an error that reports it, not a guess;
// so is a clock whose jiffies do not reach 250 ticks within 15 s.
// See hzFromSamples for the arithmetic.
func (d *Dataplane) HZ() (int, error) {
	hzOnce.Do(func() { hzVal, _, hzErr = d.measureHZ() })
	return hzVal, hzErr
}

// measureHZ samples the clock until hzFromSamples has a span long enough to
// decide, and returns its answer and how long the measurement took.
func (d *Dataplane) measureHZ() (int, time.Duration, error) {
	start := time.Now()
	j0, ns0, err := d.clockSample()
	if err != nil {
		return 0, 0, err
	}
	for {
		time.Sleep(hzSampleEvery)
		j1, ns1, err := d.clockSample()
		if err != nil {
			return 0, time.Since(start), err
		}
		hz, err := hzFromSamples(j0, ns0, j1, ns1)
		if !errors.Is(err, errHZSpanTooShort) {
			return hz, time.Since(start), err
		}
		if el := time.Since(start); el > hzGiveUp {
			if j1 == j0 {
				return 0, el, fmt.Errorf("dataplane: HZ: jiffies did not advance in %v (stuck at %d)", el, j1)
			}
			return 0, el, fmt.Errorf("dataplane: HZ: gave up after %v: %w", el, err)
		}
	}
}

// Ticks converts a duration to jiffies at the kernel's HZ, rounding up.
func (d *Dataplane) Ticks(dur time.Duration) (Jiffies, error) {
	hz, err := d.HZ()
	if err != nil {
		return 0, err
	}
	return Jiffies((int64(dur)*int64(hz) + int64(time.Second) - 1) / int64(time.Second)), nil
}

// Duration converts jiffies to a duration at the kernel's HZ.
func (d *Dataplane) Duration(j Jiffies) (time.Duration, error) {
	hz, err := d.HZ()
	if err != nil {
		return 0, err
	}
	return time.Duration(uint64(j) * uint64(time.Second) / uint64(hz)), nil
}

// AdoptHZ takes the tick rate a hot-upgrade predecessor measured on this
// same kernel (HZ does not change while it runs), so that the successor's
// first maintenance cycle does not spend a second measuring it again. It
// refuses a rate Linux cannot be built with, and does nothing once this
// process has measured or adopted one.
func (d *Dataplane) AdoptHZ(hz int) error {
	if !slices.Contains(hzCandidates, hz) {
		return fmt.Errorf("dataplane: HZ %d handed over is not a rate Linux can be built with %v", hz, hzCandidates)
	}
	hzOnce.Do(func() { hzVal = hz })
	return nil
}
