package health

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/config"
)

// waitLong bounds every wait for the checker's goroutine: generous, the
// machine is shared and noisy. Nothing asserts how long anything takes.
const waitLong = 20 * time.Second

// fakeClock is a Clock the test steps by hand: every NewTimer is handed to
// the test on timers, and fire advances the time by the timer's duration
// and fires it. A timer request means the checker is idle between checks.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers chan *fakeTimer
}

type fakeTimer struct {
	d time.Duration
	c chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), timers: make(chan *fakeTimer, 16)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{d: d, c: make(chan time.Time, 1)}
	f.timers <- t
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }
func (t *fakeTimer) Stop() bool          { return true }

// advance moves the time on by d (a check that "takes" d).
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// next is the checker's next timer request.
func (f *fakeClock) next(t *testing.T) *fakeTimer {
	t.Helper()
	return receive(t, f.timers, "a timer request")
}

// receive is the next value from ch; the test fails when none comes
// within waitLong.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLong):
		t.Fatalf("no %s within %v", what, waitLong)
		var zero T
		return zero
	}
}

// fire advances the time to tm's end and fires it.
func (f *fakeClock) fire(tm *fakeTimer) {
	f.advance(tm.d)
	tm.c <- f.Now()
}

// change is one onChange call.
type change struct {
	healthy bool
	last    Result
}

// scripted is a checker on a fake clock whose checks return what the test
// feeds them; Run runs until the test ends.
type scripted struct {
	c       *Checker
	clock   *fakeClock
	results chan error
	changes chan change
	targets chan Target // the target of every check
	pending *fakeTimer  // the timer Run waits on
}

func newScripted(t *testing.T, cfg config.HealthCheck, tg Target) *scripted {
	t.Helper()
	s := &scripted{clock: newFakeClock(), results: make(chan error), changes: make(chan change, 100), targets: make(chan Target, 1000)}
	s.c = New(cfg, tg, func(h bool, r Result) { s.changes <- change{h, r} }, Options{Name: "b1", Clock: s.clock, Log: testLog(t)})
	s.c.check = func(ctx context.Context, tg Target) error {
		s.targets <- tg
		select {
		case err := <-s.results:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	s.pending = s.clock.next(t)
	return s
}

// step fires the pending timer, lets one check return err and waits until
// the checker has recorded it (it asks for its next timer).
func (s *scripted) step(t *testing.T, err error) {
	t.Helper()
	s.clock.fire(s.pending)
	select {
	case s.results <- err:
	case <-time.After(waitLong):
		t.Fatal("no check ran after the timer fired")
	}
	s.pending = s.clock.next(t)
}
