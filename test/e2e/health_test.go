package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// The lab tests of active health checks (issue 14, DESIGN §6b).

// healthCheckBlock is the lab setting: checks start 160…200 ms
// apart (pkg/backend/health: 80…100 % of interval_ms), so a stopped
// server (refused at once) is unhealthy at most fall × interval = 600 ms
// later and a restarted one routable at most rise × interval = 400 ms
// later, plus the manager's publishing and this test's polling.
const healthCheckBlock = "health_check:\n  type: tcp\n  interval_ms: 200\n  timeout_ms: 100\n  fall: 3\n  rise: 2\n"

// healthCycles is how many times TestHealthCheckStoppedBackend stops and
// restarts one backend's server (the detection times are over these).
const healthCycles = 8

// statePoll is how often the health tests read the status document: the
// resolution of the measured detection time.
const statePoll = 20 * time.Millisecond

// listedBackend is backend name as the status document lists it (zero
// when it is not listed).
func listedBackend(t *testing.T, l *lab.Lab, name string) api.Backend {
	t.Helper()
	for _, b := range statusDoc(t, l).Backends {
		if b.Name == name {
			return b
		}
	}
	return api.Backend{}
}

// waitBackendState polls the status document until backend name is in
// state want, and returns when it saw it (at most statePoll late) and the
// backend as listed then.
func waitBackendState(t *testing.T, l *lab.Lab, name string, want api.BackendState, timeout time.Duration) (time.Time, api.Backend) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		last := listedBackend(t, l, name)
		if last.State == want {
			return time.Now(), last
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %s: state %q (%+v) after %v, want %q", name, last.State, last.Health, timeout, want)
		}
		time.Sleep(statePoll)
	}
}

// waitReadyz polls /readyz until it answers code with body.
func waitReadyz(t *testing.T, l *lab.Lab, code int, body string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, _, b := get(t, l.XLB, adminURL+"/readyz", "", "")
		if c == code && b == body {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz %d %q, want %d %q", c, b, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// attempt is one connection of a clientLoad.
type attempt struct {
	start, end time.Time
	err        error
}

// clientLoad opens echo connections through XLB from the lab's client,
// one after another on each of its workers, and records every one.
type clientLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	attempts []attempt
}

func startClientLoad(l *lab.Lab, workers int) *clientLoad {
	ctx, cancel := context.WithCancel(context.Background())
	ld := &clientLoad{cancel: cancel}
	msg := []byte("health check lab\n")
	for range workers {
		ld.wg.Go(func() {
			for ctx.Err() == nil {
				a := attempt{start: time.Now()}
				a.err = l.Client().EchoCheck(listenAddr, msg, 10*time.Second)
				a.end = time.Now()
				ld.mu.Lock()
				ld.attempts = append(ld.attempts, a)
				ld.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	return ld
}

// startedSince counts the attempts that started at or after t and ended.
func (ld *clientLoad) startedSince(t time.Time) int {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	n := 0
	for _, a := range ld.attempts {
		if !a.start.Before(t) {
			n++
		}
	}
	return n
}

// waitStartedSince waits until n attempts that started at or after t
// ended: the load ran through a phase.
func (ld *clientLoad) waitStartedSince(t *testing.T, since time.Time, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for ld.startedSince(since) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d connections since %v", ld.startedSince(since), since.Format(time.StampMilli))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (ld *clientLoad) stop() []attempt {
	ld.cancel()
	ld.wg.Wait()
	return ld.attempts
}

// detection is one stop of a backend's server: stopped, and when the
// status document showed it unhealthy.
type detection struct{ stopped, seen time.Time }

// clientConns counts the connections backend server s completed from
// XLB's data path: the source port is in the lab's snat.port_range
// (health checks come from the host stack, outside the range XLB
// reserves).
func clientConns(s *testnet.Server) int {
	n := 0
	for _, c := range s.Stats().Conns {
		if p := c.Remote.Port(); p >= 40000 && p <= 59999 {
			n++
		}
	}
	return n
}

// A backend whose server stops is unhealthy within about fall × interval
// and gets no new connection from then on; restarted, it is routable
// again. New connections keep working throughout, except those that
// reached the dead server before the status showed it unhealthy (the
// detection window: the checks need fall failures). Every backend
// unhealthy: a new connection gets the data path's RST and /readyz says
// no_routable_backends.
func TestHealthCheckStoppedBackend(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm, SinkPort: -1})
	p := startXLB(t, l, labConfig(l, healthCheckBlock))
	for i := range l.Backends {
		_, b := waitBackendState(t, l, fmt.Sprintf("backend-%d", i+1), api.Routable, 30*time.Second)
		if b.Health == nil || !b.Health.Healthy || b.Health.LastResult != api.HealthCheckOK {
			t.Fatalf("backend-%d routable with health %+v", i+1, b.Health)
		}
	}
	waitReadyz(t, l, 200, "ready")

	const name = "backend-1"
	victim := l.Backends[0]
	server := victim.Echo
	fails := map[string]string{"backend": name, "result": string(api.HealthCheckFail)}
	ld := startClientLoad(l, 2)
	var windows []detection
	var detect, recovery, firstConn []time.Duration
	for cycle := range healthCycles {
		// The status follows the maintenance sample (each second): stop
		// at a random phase of it.
		time.Sleep(rand.N(time.Second))
		failsBefore := counter(t, l, "xlb_backend_health_checks_total", fails)
		stopped := time.Now()
		if err := server.Close(); err != nil {
			t.Fatal(err)
		}
		seen, b := waitBackendState(t, l, name, api.Unhealthy, 30*time.Second)
		windows = append(windows, detection{stopped, seen})
		detect = append(detect, seen.Sub(stopped))
		if b.Health == nil || b.Health.Healthy || b.Health.LastResult != api.HealthCheckFail || b.Health.LastError == "" || b.AvailableForNewConnections {
			t.Errorf("cycle %d: unhealthy backend listed as %+v, health %+v", cycle, b, b.Health)
		}
		if v, ok := waitCounter(t, l, "xlb_backends", map[string]string{"state": string(api.Unhealthy)}, 30*time.Second,
			func(v float64) bool { return v == 1 }); !ok {
			t.Errorf("cycle %d: xlb_backends{state=unhealthy} %v, want 1", cycle, v)
		}
		if v, ok := waitCounter(t, l, "xlb_backend_health_checks_total", fails, 30*time.Second,
			func(v float64) bool { return v >= failsBefore+3 }); !ok {
			t.Errorf("cycle %d: %s fail checks %v after the stop, want ≥ %v", cycle, name, v, failsBefore+3)
		}
		// New connections while it is down: all must succeed (checked
		// below, with the rest of the load).
		ld.waitStartedSince(t, seen, 40)

		var err error
		if server, err = victim.Serve(fmt.Sprintf(":%d", lab.DefaultEchoPort), testnet.Echo); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		// Routable in status, and new connections reach it again.
		var back, reached time.Time
		deadline := started.Add(30 * time.Second)
		for back.IsZero() || clientConns(server) < 5 {
			now := time.Now()
			if reached.IsZero() && clientConns(server) > 0 {
				reached = now
			}
			if back.IsZero() && listedBackend(t, l, name).State == api.Routable {
				back = now
			}
			if now.After(deadline) {
				t.Fatalf("cycle %d: restarted: status routable at %v, %d connections reached it", cycle, back, clientConns(server))
			}
			time.Sleep(statePoll)
		}
		recovery = append(recovery, back.Sub(started))
		firstConn = append(firstConn, reached.Sub(started))
	}
	attempts := ld.stop()

	// Connections that failed must have overlapped a detection window
	// (opened before the status showed the backend unhealthy, and not
	// ended before its server stopped); those are counted, any other is
	// an error. The last one to fail in a window was opened just before
	// the data path dropped the backend.
	inWindow := 0
	lastFail := make([]time.Duration, len(windows))
	for _, a := range attempts {
		if a.err == nil {
			continue
		}
		if i := slices.IndexFunc(windows, func(w detection) bool { return a.start.Before(w.seen) && a.end.After(w.stopped) }); i >= 0 {
			inWindow++
			lastFail[i] = max(lastFail[i], a.start.Sub(windows[i].stopped))
			continue
		}
		t.Errorf("a connection opened at %s outside every detection window failed: %v", a.start.Format(time.StampMilli), a.err)
	}
	t.Logf("%d connections, %d failed inside the %d detection windows (reached the stopped server before it was unhealthy), 0 outside",
		len(attempts), inWindow, len(windows))
	t.Logf("health_check tcp interval 200 ms, fall 3, rise 2; %d stops and restarts of %s's server:", healthCycles, name)
	t.Logf("  server stopped → last new connection that failed (the data path's detection): median %v, max %v, all %v",
		median(lastFail), slices.Max(lastFail), lastFail)
	t.Logf("  server stopped → status unhealthy (published with the routable set; polled every %v): median %v, max %v, all %v",
		statePoll, median(detect), slices.Max(detect), detect)
	t.Logf("  server restarted → first new connection reaches it: median %v, max %v, all %v",
		median(firstConn), slices.Max(firstConn), firstConn)
	t.Logf("  server restarted → status routable: median %v, max %v, all %v",
		median(recovery), slices.Max(recovery), recovery)

	// Every backend unhealthy: the data path answers SYNs with a RST.
	resetsBefore := counter(t, l, "xlb_no_backend_resets_total", nil)
	servers := []*testnet.Server{server}
	for _, b := range l.Backends[1:] {
		servers = append(servers, b.Echo)
	}
	for _, s := range servers {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range l.Backends {
		waitBackendState(t, l, fmt.Sprintf("backend-%d", i+1), api.Unhealthy, 30*time.Second)
	}
	waitReadyz(t, l, 503, string(api.ReasonNoRoutableBackends))
	const refused = 5
	for i := range refused {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := l.Client().Dial(ctx, listenAddr)
		cancel()
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("connection %d with every backend unhealthy: %v, want ECONNREFUSED (a RST)", i, err)
		}
	}
	if v, ok := waitCounter(t, l, "xlb_no_backend_resets_total", nil, 30*time.Second,
		func(v float64) bool { return v >= resetsBefore+refused }); !ok {
		t.Errorf("xlb_no_backend_resets_total %v, want ≥ %v: the RSTs did not come from the data path", v, resetsBefore+refused)
	}

	// Back up: routable and ready again, connections work.
	for _, b := range l.Backends {
		if _, err := b.Serve(fmt.Sprintf(":%d", lab.DefaultEchoPort), testnet.Echo); err != nil {
			t.Fatal(err)
		}
	}
	for i := range l.Backends {
		waitBackendState(t, l, fmt.Sprintf("backend-%d", i+1), api.Routable, 30*time.Second)
	}
	waitReadyz(t, l, 200, "ready")
	if err := l.Client().EchoCheck(listenAddr, []byte("back\n"), 10*time.Second); err != nil {
		t.Fatalf("after every backend came back: %v", err)
	}
	stopXLB(t, l, p)
}
