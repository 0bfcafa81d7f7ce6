package fleet

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Interval is a time during which a host had no path in the router's
// kernel route to the VIP: drained (its speaker withdrew), down (the
// router's hold timer expired) or not announcing yet.
type Interval struct {
	Host     netip.Addr
	From, To time.Time // To is zero while it lasts
}

// Contains reports whether t lies in the interval, widened by slack on
// both sides (the monitor samples every pollInterval).
func (iv Interval) Contains(t time.Time, slack time.Duration) bool {
	if t.Before(iv.From.Add(-slack)) {
		return false
	}
	return iv.To.IsZero() || !t.After(iv.To.Add(slack))
}

// Change is a change of the router's kernel route to the VIP: its next
// hops from At on, in the kernel's order (none: no route).
type Change struct {
	At    time.Time
	Paths []netip.Addr
}

// RouteCounts count the monitor's samples of the router: all of them,
// and those that found no kernel route or no bird route to the VIP.
type RouteCounts struct {
	Samples, KernelMissing, BirdMissing int
}

// Sub returns the samples taken between two readings.
func (c RouteCounts) Sub(before RouteCounts) RouteCounts {
	return RouteCounts{c.Samples - before.Samples, c.KernelMissing - before.KernelMissing, c.BirdMissing - before.BirdMissing}
}

func (c RouteCounts) String() string {
	return fmt.Sprintf("%d samples, %d without the kernel route, %d without bird's route", c.Samples, c.KernelMissing, c.BirdMissing)
}

const pollInterval = 100 * time.Millisecond

// Monitor samples the router every pollInterval: its kernel route to the
// VIP (netlink) and bird's routes (birdc). It records, per host, when the
// kernel route had no path via it, every change of the kernel route, and
// how many samples found no route at all.
type Monitor struct {
	l       *Lab
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	open    map[netip.Addr]*Interval
	closed  []Interval
	changes []Change
	counts  RouteCounts
	errs    int
	last    string
}

// StartMonitor starts sampling.
func (l *Lab) StartMonitor() *Monitor {
	m := &Monitor{l: l, stop: make(chan struct{}), done: make(chan struct{}), open: map[netip.Addr]*Interval{}}
	m.sample()
	go func() {
		defer close(m.done)
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sample()
			}
		}
	}()
	return m
}

func (m *Monitor) sample() {
	paths, err := m.l.KernelPaths()
	now := time.Now()
	bird, birdOut := m.l.BirdPaths()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.errs++
		m.last = err.Error()
		return
	}
	m.counts.Samples++
	if len(paths) == 0 {
		m.counts.KernelMissing++
	}
	if len(bird) == 0 {
		m.counts.BirdMissing++
		if !strings.Contains(birdOut, "Network not found") {
			m.errs++
			m.last = "birdc: " + strings.TrimSpace(birdOut)
		}
	}
	if n := len(m.changes); n == 0 || !slices.Equal(m.changes[n-1].Paths, paths) {
		m.changes = append(m.changes, Change{At: now, Paths: paths})
	}
	for _, h := range m.l.Hosts {
		iv, in := m.open[h.Addr], slices.Contains(paths, h.Addr)
		switch {
		case !in && iv == nil:
			m.open[h.Addr] = &Interval{Host: h.Addr, From: now}
		case in && iv != nil:
			iv.To = now
			m.closed = append(m.closed, *iv)
			delete(m.open, h.Addr)
		}
	}
}

// Stop stops sampling.
func (m *Monitor) Stop() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// Intervals returns the intervals seen so far in which h had no path (an
// ongoing one last, with a zero To).
func (m *Monitor) Intervals(h *Host) []Interval {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Interval
	for _, iv := range m.closed {
		if iv.Host == h.Addr {
			out = append(out, iv)
		}
	}
	if iv := m.open[h.Addr]; iv != nil {
		out = append(out, *iv)
	}
	return out
}

// IntervalsSince returns h's intervals that began at or after since.
func (m *Monitor) IntervalsSince(h *Host, since time.Time) []Interval {
	var out []Interval
	for _, iv := range m.Intervals(h) {
		if !iv.From.Before(since) {
			out = append(out, iv)
		}
	}
	return out
}

// Drained reports whether h had no path at t (within slack).
func (m *Monitor) Drained(h *Host, t time.Time, slack time.Duration) bool {
	for _, iv := range m.Intervals(h) {
		if iv.Contains(t, slack) {
			return true
		}
	}
	return false
}

// Changes returns the changes of the kernel route after since (the first
// sample counts as a change).
func (m *Monitor) Changes(since time.Time) []Change {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Change
	for _, c := range m.changes {
		if c.At.After(since) {
			out = append(out, c)
		}
	}
	return out
}

// Counts returns the sample counts so far.
func (m *Monitor) Counts() RouteCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts
}

// Errors returns how many samples failed and the last error.
func (m *Monitor) Errors() (int, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errs, m.last
}
