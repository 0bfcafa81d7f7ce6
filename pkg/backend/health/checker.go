package health

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/config"
)

// Target is what one checker checks and how the check leaves the host: by
// the route the data path uses toward the backend.
type Target struct {
	IP   netip.Addr
	Port uint16 // checked unless health_check.port is set
	// Source is the first SNAT address, the host address the data path
	// sends from; the zero Addr lets routing pick one.
	Source netip.Addr
	// Interface is the egress interface of the backend's route
	// (SO_BINDTODEVICE); "" lets routing decide.
	Interface string
}

// Result is the outcome of one check.
type Result struct {
	OK   bool
	At   time.Time     // when the check ended (Options.Clock)
	Took time.Duration // from the connect to the verdict
	// Err says why a check failed: "timeout" (not done within
	// timeout_ms), the failed system call ("connect: connection
	// refused"), "status 503" (http, another status than
	// expect_status), or "reply does not start with expect_hex" (udp).
	// Empty when OK.
	Err string
}

// Options tune a Checker. Zero values take the defaults noted.
type Options struct {
	Log  logrus.FieldLogger // transitions only; logrus.StandardLogger()
	Name string             // the backend's name in log lines; the address
	// Clock times the waits between checks and the results (the real
	// clock); tests step a fake one.
	Clock Clock
}

// Checker checks one backend (health_check in xlb.yaml, DESIGN §6b) and
// keeps its verdict: unknown until the first result, which decides it;
// then fall consecutive failures make it unhealthy and rise consecutive
// successes healthy again. Checks run one at a time on Run's goroutine,
// interval × (1 − Jitter … 1) apart; the first after at most FirstDelayMax.
// Methods are safe for concurrent use.
type Checker struct {
	cfg      config.HealthCheck
	onChange func(healthy bool, last Result)
	log      logrus.FieldLogger
	clock    Clock
	// check runs one check; tests replace it to script results.
	check func(ctx context.Context, t Target) error

	runMu sync.Mutex // held by Run: one Run, so one check in flight

	mu       sync.Mutex
	target   Target
	v        verdict
	last     Result
	ok, fail uint64
}

// New returns a checker of t by cfg, which must be valid as config.Parse
// returns it (New panics on a non-positive interval or timeout or a rise
// or fall below 1: a programming error). onChange, if not nil, is called
// on every change of the verdict, the first result's included, from Run's
// goroutine, with the result that caused it.
func New(cfg config.HealthCheck, t Target, onChange func(healthy bool, last Result), o Options) *Checker {
	if cfg.Interval <= 0 || cfg.Timeout <= 0 || cfg.Rise < 1 || cfg.Fall < 1 {
		panic(fmt.Sprintf("health: invalid check %+v", cfg))
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.Name == "" {
		o.Name = t.IP.String()
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	c := &Checker{
		cfg: cfg, onChange: onChange, clock: o.Clock, target: t,
		v:   verdict{rise: cfg.Rise, fall: cfg.Fall},
		log: o.Log.WithFields(logrus.Fields{"backend": o.Name, "ip": t.IP, "check": cfg.Type}),
	}
	c.check = func(ctx context.Context, t Target) error { return probe(ctx, cfg, t, cfg.Timeout) }
	return c
}

// Run checks until ctx ends. A check cut short by ctx is not counted. A
// second Run waits for the first to return.
func (c *Checker) Run(ctx context.Context) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	wait := firstDelay(c.cfg.Interval)
	for c.sleep(ctx, wait) {
		t := c.checkTarget()
		start := c.clock.Now()
		err := c.check(ctx, t)
		end := c.clock.Now()
		if ctx.Err() != nil {
			return
		}
		r := Result{OK: err == nil, At: end, Took: end.Sub(start)}
		if err != nil {
			r.Err = err.Error()
		}
		c.record(r)
		wait = nextWait(c.cfg.Interval, start, end)
	}
}

// State returns the verdict (known is false until the first result), the
// last result and the number of passed and failed checks so far (for
// xlb_backend_health_checks_total{result="ok|fail"}).
func (c *Checker) State() (healthy, known bool, last Result, ok, fail uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v.healthy, c.v.known, c.last, c.ok, c.fail
}

// SetTarget replaces the target (the backend's route changed); the next
// check uses it. The verdict is kept.
func (c *Checker) SetTarget(t Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.target = t
}

// checkTarget is the target of the next check: health_check.port, when
// set, replaces the backend's port.
func (c *Checker) checkTarget() Target {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.target
	if c.cfg.Port != 0 {
		t.Port = c.cfg.Port
	}
	return t
}

// sleep waits d on the clock; false when ctx ended first.
func (c *Checker) sleep(ctx context.Context, d time.Duration) bool {
	t := c.clock.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return false
	case <-t.C():
		return true
	}
}

// record counts r, feeds it to the verdict and reports a change.
func (c *Checker) record(r Result) {
	c.mu.Lock()
	if r.OK {
		c.ok++
	} else {
		c.fail++
	}
	c.last = r
	firstResult := !c.v.known
	changed := c.v.add(r.OK)
	healthy := c.v.healthy
	c.mu.Unlock()
	if !changed {
		return
	}
	c.logChange(healthy, firstResult, r)
	if c.onChange != nil {
		c.onChange(healthy, r)
	}
}

// logChange logs one transition: the only log lines a checker writes.
func (c *Checker) logChange(healthy, firstResult bool, r Result) {
	switch {
	case healthy && firstResult:
		c.log.Info("backend healthy: first check passed")
	case healthy:
		c.log.WithField("successes", c.cfg.Rise).Info("backend healthy again")
	case firstResult:
		c.log.WithField("reason", r.Err).Warn("backend unhealthy: first check failed")
	default:
		c.log.WithFields(logrus.Fields{"reason": r.Err, "failures": c.cfg.Fall}).Warn("backend unhealthy")
	}
}
