package health

import (
	"math/rand/v2"
	"time"
)

// Timing of the checks (plan14.md "Health checks": jittered, never more
// than one in flight).
const (
	// Jitter is the spread of every interval: checks start interval ×
	// (1 − Jitter … 1) apart, uniformly, so checks of backends configured
	// together drift apart instead of arriving in bursts. The spread is
	// below interval_ms, never above: interval_ms is the longest time
	// between two checks, so a backend that fails is unhealthy at most
	// fall × interval_ms (plus the last check's timeout) after it failed,
	// the bound the issue states.
	Jitter = 0.20
	// FirstDelayMax bounds the wait before the first check: uniform in
	// [0, min(interval × Jitter, FirstDelayMax)). It spreads the first
	// checks of a whole discovered set without holding a new backend back
	// (it is published only once its first check passes).
	FirstDelayMax = 100 * time.Millisecond
)

// firstDelay is the wait before a checker's first check.
func firstDelay(interval time.Duration) time.Duration {
	limit := min(time.Duration(float64(interval)*Jitter), FirstDelayMax)
	if limit <= 0 {
		return 0
	}
	return rand.N(limit)
}

// nextWait is the wait after a check that started at start and ended at
// end: checks start interval × (1 − Jitter … 1) apart, start to start; a
// check that ran past that is followed at once (no burst to catch up, no
// overlap: the checker's one goroutine runs them one after another).
func nextWait(interval time.Duration, start, end time.Time) time.Duration {
	f := 1 - Jitter*rand.Float64()
	due := start.Add(time.Duration(float64(interval) * f))
	return max(due.Sub(end), 0)
}
