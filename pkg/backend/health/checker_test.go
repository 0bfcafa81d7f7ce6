package health

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/config"
)

var loopback = netip.MustParseAddr("127.0.0.1")

func tcpCheck(interval, timeout time.Duration, rise, fall int) config.HealthCheck {
	return config.HealthCheck{Type: config.HealthCheckTCP, Interval: interval, Timeout: timeout, Rise: rise, Fall: fall}
}

// TestRiseFall feeds sequences of results ('+' pass, '-' fail) and checks
// the verdict after each ('H' healthy, 'U' unhealthy), the onChange calls
// and the counters.
func TestRiseFall(t *testing.T) {
	cases := []struct {
		name       string
		rise, fall int
		seq, want  string
	}{
		{"first pass decides", 2, 3, "+", "H"},
		{"first fail decides", 2, 3, "-", "U"},
		{"unhealthy at exactly fall", 2, 3, "+---", "HHHU"},
		{"a pass resets the failures", 2, 3, "+--+--", "HHHHHH"},
		{"pass after unhealthy needs rise", 2, 3, "+---+", "HHHUU"},
		{"healthy at exactly rise", 2, 3, "+---++", "HHHUUH"},
		{"a fail resets the passes", 3, 3, "-++-++", "UUUUUU"},
		{"rise 1 fall 1 follows every result", 1, 1, "+-+-", "HUHU"},
		{"first fail then rise", 2, 2, "-++", "UUH"},
		{"flap below fall", 2, 2, "+-+-+-", "HHHHHH"},
		{"down, up, down again", 2, 2, "+--++--", "HHUUHHU"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t, tcpCheck(time.Second, 500*time.Millisecond, tc.rise, tc.fall), Target{IP: loopback})
			var oks, fails uint64
			prev := byte(0)
			for i := range len(tc.seq) {
				var err error
				if tc.seq[i] == '-' {
					err = errors.New("connect: connection refused")
					fails++
				} else {
					oks++
				}
				s.step(t, err)
				healthy, known, last, ok, fail := s.c.State()
				got := byte('U')
				if healthy {
					got = 'H'
				}
				if !known || got != tc.want[i] {
					t.Fatalf("after %q: known %v, state %c, want %c", tc.seq[:i+1], known, got, tc.want[i])
				}
				if ok != oks || fail != fails {
					t.Errorf("after %q: counters ok %d fail %d, want %d %d", tc.seq[:i+1], ok, fail, oks, fails)
				}
				if last.OK != (err == nil) || (err != nil && last.Err != err.Error()) {
					t.Errorf("after %q: last result %+v", tc.seq[:i+1], last)
				}
				if got != prev {
					c := <-s.changes
					if c.healthy != (got == 'H') || c.last != last {
						t.Errorf("after %q: onChange(%v, %+v), want (%v, %+v)", tc.seq[:i+1], c.healthy, c.last, got == 'H', last)
					}
				}
				prev = got
				select {
				case c := <-s.changes:
					t.Fatalf("after %q: onChange(%v) without a transition", tc.seq[:i+1], c.healthy)
				default:
				}
			}
		})
	}
}

// TestUnknownUntilFirstResult: no verdict before the first check.
func TestUnknownUntilFirstResult(t *testing.T) {
	s := newScripted(t, tcpCheck(time.Second, 500*time.Millisecond, 2, 3), Target{IP: loopback})
	if _, known, _, ok, fail := s.c.State(); known || ok != 0 || fail != 0 {
		t.Fatalf("before the first check: known %v, ok %d, fail %d", known, ok, fail)
	}
}

// TestJitter checks the waits the checker asks for: the first below
// min(interval × Jitter, FirstDelayMax), the others within interval ×
// (1 − Jitter … 1) and not all equal; a check that took longer than its
// interval is followed at once.
func TestJitter(t *testing.T) {
	for _, interval := range []time.Duration{100 * time.Millisecond, 2 * time.Second} {
		s := newScripted(t, tcpCheck(interval, interval/2, 2, 3), Target{IP: loopback})
		if limit := min(time.Duration(float64(interval)*Jitter), FirstDelayMax); s.pending.d < 0 || s.pending.d >= limit {
			t.Errorf("interval %v: first delay %v, want [0, %v)", interval, s.pending.d, limit)
		}
		lo := time.Duration(float64(interval) * (1 - Jitter))
		hi := interval
		seen := map[time.Duration]bool{}
		for range 50 {
			s.step(t, nil)
			if d := s.pending.d; d < lo || d > hi {
				t.Fatalf("interval %v: wait %v outside [%v, %v]", interval, d, lo, hi)
			}
			seen[s.pending.d] = true
		}
		if len(seen) < 10 {
			t.Errorf("interval %v: only %d different waits in 50: no jitter", interval, len(seen))
		}
	}

	// A check that takes 3 intervals: the next starts at once, not 3 later.
	s := newScripted(t, tcpCheck(time.Second, 500*time.Millisecond, 2, 3), Target{IP: loopback})
	s.clock.fire(s.pending)
	<-s.targets // the check started
	s.clock.advance(3 * time.Second)
	s.results <- nil
	if s.pending = s.clock.next(t); s.pending.d != 0 {
		t.Errorf("after a check longer than the interval: wait %v, want 0", s.pending.d)
	}
	s.step(t, nil)
	if s.pending.d < 800*time.Millisecond {
		t.Errorf("after a quick check: wait %v, want ≥ 800ms", s.pending.d)
	}
}

// TestOneInFlight: checks slower than the interval never overlap, also
// with a second Run on the same checker. Real time, short intervals.
func TestOneInFlight(t *testing.T) {
	c := New(tcpCheck(20*time.Millisecond, 10*time.Millisecond, 1, 1), Target{IP: loopback}, nil, Options{Log: testLog(t)})
	var inFlight, most, checks atomic.Int32
	c.check = func(ctx context.Context, _ Target) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		checks.Add(1)
		select {
		case <-time.After(60 * time.Millisecond): // 3 intervals
		case <-ctx.Done():
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { c.Run(ctx) })
	}
	deadline := time.Now().Add(waitLong)
	for checks.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if checks.Load() < 5 {
		t.Fatalf("only %d checks within %v", checks.Load(), waitLong)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d checks in flight at once, want 1", m)
	}
}

// TestSetTarget: the check after SetTarget goes to the new target;
// health_check.port replaces the target's port.
func TestSetTarget(t *testing.T) {
	s := newScripted(t, tcpCheck(time.Second, 500*time.Millisecond, 2, 3), Target{IP: loopback})
	s.step(t, nil)
	if got := <-s.targets; got.IP != loopback {
		t.Fatalf("first check to %v", got)
	}
	nt := Target{IP: netip.MustParseAddr("192.0.2.31"), Port: 8080, Source: netip.MustParseAddr("192.0.2.10"), Interface: "eth1"}
	s.c.SetTarget(nt)
	s.step(t, nil)
	if got := <-s.targets; got != nt {
		t.Errorf("check after SetTarget to %+v, want %+v", got, nt)
	}
	if healthy, _, _, _, _ := s.c.State(); !healthy {
		t.Error("SetTarget changed the verdict")
	}

	cfg := tcpCheck(time.Second, 500*time.Millisecond, 2, 3)
	cfg.Port = 9000
	p := newScripted(t, cfg, nt)
	p.step(t, nil)
	if got := <-p.targets; got.Port != 9000 || got.IP != nt.IP {
		t.Errorf("with health_check.port 9000: check to %+v", got)
	}
}

// TestRunRealTime runs a tcp checker with short real intervals against a
// listener that is stopped and started again: healthy, unhealthy with the
// connect error as the reason, healthy again. Polls with generous bounds.
func TestRunRealTime(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(ln.Addr().String())
	go acceptAll(ln)
	changes := make(chan bool, 10)
	c := New(tcpCheck(50*time.Millisecond, 40*time.Millisecond, 2, 2), Target{IP: addr.Addr(), Port: addr.Port()},
		func(h bool, _ Result) { changes <- h }, Options{Name: "rt", Log: testLog(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	wantChange(t, changes, true)
	ln.Close()
	wantChange(t, changes, false)
	if _, _, last, _, fail := c.State(); last.Err != "connect: connection refused" || fail < 2 {
		t.Errorf("after the listener closed: last %+v, %d failures", last, fail)
	}
	ln, err = net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptAll(ln)
	wantChange(t, changes, true)
}

// testLog writes the checker's log lines to the test's output.
func testLog(t *testing.T) logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(t.Output())
	return l
}

func wantChange(t *testing.T, changes <-chan bool, want bool) {
	t.Helper()
	if got := receive(t, changes, "change of the verdict"); got != want {
		t.Fatalf("changed to healthy=%v, want %v", got, want)
	}
}

// acceptAll accepts and closes connections until ln is closed.
func acceptAll(ln net.Listener) { serveConns(ln, func(net.Conn) {}) }

// serveConns runs handle on each connection ln accepts, in its own
// goroutine, and closes it afterwards, until ln is closed.
func serveConns(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}
