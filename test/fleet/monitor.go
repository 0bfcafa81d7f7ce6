package fleet

import (
	"sync"
	"time"
)

// Interval is a time during which a host was drained: weight 1 in the
// router's nexthop group (draining), or out of the group.
type Interval struct {
	NexthopID int
	From, To  time.Time // To is zero while it lasts
}

// Contains reports whether t lies in the interval, widened by slack on
// both sides (the monitor samples the group every pollInterval).
func (iv Interval) Contains(t time.Time, slack time.Duration) bool {
	if t.Before(iv.From.Add(-slack)) {
		return false
	}
	return iv.To.IsZero() || !t.After(iv.To.Add(slack))
}

const pollInterval = 100 * time.Millisecond

// Monitor samples the router's nexthop group and records, per host, when
// it was drained.
type Monitor struct {
	l      *Lab
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	open   map[int]*Interval
	closed []Interval
	errs   int
	last   string
}

// StartMonitor starts sampling.
func (l *Lab) StartMonitor() *Monitor {
	m := &Monitor{l: l, stop: make(chan struct{}), done: make(chan struct{}), open: map[int]*Interval{}}
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
	members, _, err := m.l.Group()
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.errs++
		m.last = err.Error()
		return
	}
	// In service: a member with more than the minimum weight (the drain
	// hook gives the draining host weight 1 and scales the others up).
	full := map[int]bool{}
	for _, mem := range members {
		if mem.Weight > 1 {
			full[mem.ID] = true
		}
	}
	for _, h := range m.l.Hosts {
		iv := m.open[h.NexthopID]
		switch {
		case !full[h.NexthopID] && iv == nil:
			m.open[h.NexthopID] = &Interval{NexthopID: h.NexthopID, From: now}
		case full[h.NexthopID] && iv != nil:
			iv.To = now
			m.closed = append(m.closed, *iv)
			delete(m.open, h.NexthopID)
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

// Intervals returns the drain intervals of nexthop id seen so far (an
// ongoing one last, with a zero To).
func (m *Monitor) Intervals(id int) []Interval {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Interval
	for _, iv := range m.closed {
		if iv.NexthopID == id {
			out = append(out, iv)
		}
	}
	if iv := m.open[id]; iv != nil {
		out = append(out, *iv)
	}
	return out
}

// Drained reports whether nexthop id was drained at t (within slack).
func (m *Monitor) Drained(id int, t time.Time, slack time.Duration) bool {
	for _, iv := range m.Intervals(id) {
		if iv.Contains(t, slack) {
			return true
		}
	}
	return false
}

// Errors returns how many samples failed and the last error.
func (m *Monitor) Errors() (int, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errs, m.last
}
