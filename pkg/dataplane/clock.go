package dataplane

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cilium/ebpf"
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
	frame := make([]byte, 14)
	if _, err := d.objs.XlbClock.Run(&ebpf.RunOptions{Data: frame, Repeat: 1}); err != nil {
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

// HZ returns the kernel's tick rate (jiffies per second). It is measured
// once per process by timing ten jiffy edges against CLOCK_MONOTONIC (about
// 10 ms at HZ=1000, 100 ms at HZ=100) and rounded to the nearest rate the
// kernel can be built with.
func (d *Dataplane) HZ() (int, error) {
	hzOnce.Do(func() { hzVal, hzErr = d.measureHZ() })
	return hzVal, hzErr
}

func (d *Dataplane) measureHZ() (int, error) {
	const edges = 10
	deadline := time.Now().Add(5 * time.Second)
	edge := func(from Jiffies) (Jiffies, uint64, error) {
		for time.Now().Before(deadline) {
			j, ns, err := d.clockSample()
			if err != nil {
				return 0, 0, err
			}
			if j != from {
				return j, ns, nil
			}
		}
		return 0, 0, errors.New("dataplane: jiffies did not advance")
	}
	j0, _, err := d.clockSample()
	if err != nil {
		return 0, err
	}
	j1, ns1, err := edge(j0)
	if err != nil {
		return 0, err
	}
	j2, ns2 := j1, ns1
	for j2-j1 < edges {
		if j2, ns2, err = edge(j2); err != nil {
			return 0, err
		}
	}
	raw := float64(j2-j1) * 1e9 / float64(ns2-ns1)
	best := 0
	for _, hz := range []int{24, 32, 48, 64, 100, 128, 200, 250, 256, 300, 500, 512, 1000, 1024, 1200} {
		if best == 0 || math.Abs(float64(hz)-raw) < math.Abs(float64(best)-raw) {
			best = hz
		}
	}
	return best, nil
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
