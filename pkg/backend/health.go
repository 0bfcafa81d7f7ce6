package backend

import (
	"context"
	"net/netip"
	"time"

	"github.com/xlbproject/xlb/pkg/backend/health"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// Health is a discovered backend's active health-check state (DESIGN §6b),
// for the status API and the metrics.
type Health struct {
	// Healthy: the checks pass (rise successes since the last failure
	// spell, or the first check passed). False before the first result.
	Healthy bool
	// Known: at least one check has answered.
	Known bool
	// Last is the latest result (zero before the first).
	Last health.Result
	// OK and Failed count the check results since the backend was
	// discovered (xlb_backend_health_checks_total{result}).
	OK, Failed uint64
}

// reason is why a resolved backend with this health is not routable.
func (h Health) reason() string {
	if !h.Known {
		return "awaiting the first health check"
	}
	return "health check failing: " + h.Last.Err
}

// checker is one backend's running health check.
type checker struct {
	c      *health.Checker
	cancel context.CancelFunc
	target health.Target
}

func (c *checker) health() Health {
	healthy, known, last, ok, failed := c.c.State()
	return Health{Healthy: healthy, Known: known, Last: last, OK: ok, Failed: failed}
}

// healthTarget is where s is checked from and to: health_check.port, else
// the first mapping's remote_port, else the backend's own port (the port
// the first mapping's traffic goes to, config.HealthCheck.Port); from the
// first SNAT address, out of the interface of the backend's route (the
// data path's way to it; "" before it is resolved: routing decides).
func (m *Manager) healthTarget(s *Status, route hostnet.Route) health.Target {
	port := m.opts.HealthCheck.Port
	if port == 0 {
		port = m.opts.HealthPort
	}
	if port == 0 {
		port = s.Port
	}
	return health.Target{IP: s.IP, Port: port, Source: m.opts.HealthSource, Interface: route.Interface}
}

// startChecker starts s's health checks when they are configured and not
// running yet, or points them at a changed target. The caller holds m.mu.
func (m *Manager) startChecker(s *Status) {
	if m.opts.HealthCheck == nil {
		return
	}
	t := m.healthTarget(s, s.Route)
	if s.checker != nil {
		if s.checker.target != t {
			s.checker.target = t
			s.checker.c.SetTarget(t)
		}
		return
	}
	ip := s.IP
	ctx, cancel := context.WithCancel(m.runCtx)
	c := health.New(*m.opts.HealthCheck, t, func(bool, health.Result) { m.onHealth(ip) },
		health.Options{Log: m.opts.Log, Name: s.Name})
	s.checker = &checker{c: c, cancel: cancel, target: t}
	run := func() { c.Run(ctx) }
	if in := m.opts.HealthNetns; in != nil {
		go in(run)
	} else {
		go run()
	}
}

// stopChecker stops s's health checks (departed). The caller holds m.mu.
func (m *Manager) stopChecker(s *Status) {
	if s.checker != nil {
		s.checker.cancel()
		s.checker = nil
	}
}

// stopCheckers stops every health check (Run ends).
func (m *Manager) stopCheckers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.backends {
		m.stopChecker(s)
	}
}

// onHealth is a checker's transition (first result, healthy, unhealthy):
// the backend's state follows and the routable set is published, under
// m.pubMu, which Snapshot waits for: no snapshot shows a backend unhealthy
// (or routable again) before the data path's set says so.
func (m *Manager) onHealth(ip netip.Addr) {
	m.pubMu.Lock()
	defer m.pubMu.Unlock()
	m.mu.Lock()
	s, ok := m.backends[ip]
	if ok && s.checker != nil {
		m.settle(s)
	}
	m.mu.Unlock()
	if ok {
		m.publishLocked()
	}
}

// awaitFirstChecks holds the initial sync until every resolved backend's
// first health check answered, for at most health_check.timeout_ms plus
// a second, so the first published set leaves out backends that are down
// (a hot upgrade's adopted set keeps serving meanwhile).
func (m *Manager) awaitFirstChecks(ctx context.Context) {
	if m.opts.HealthCheck == nil {
		return
	}
	deadline := time.Now().Add(m.opts.HealthCheck.Timeout + time.Second)
	for time.Now().Before(deadline) {
		if m.firstChecksDone() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (m *Manager) firstChecksDone() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.backends {
		if s.Discovered && s.resolved && s.checker != nil && !s.checker.health().Known {
			return false
		}
	}
	return true
}
