package daemon

import (
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// The watchdog keeps pinging while maintenance cycles fail but samples
// arrive, and stops only when a running instance's samples stop.
func TestWatchdogPing(t *testing.T) {
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	failing := maintenance.Maintenance{Errors: 30, ConsecutiveFailures: 30, FailingSince: now.Add(-30 * time.Second), LastError: "maintenance: walk: dataplane: batch read flows: operation not permitted"}
	snap := func(lifecycle api.Lifecycle, age time.Duration, m maintenance.Maintenance) *snapshot.Snapshot {
		return &snapshot.Snapshot{
			Lifecycle:      lifecycle,
			SampleInterval: time.Second,
			Sample:         &maintenance.Sample{Time: now.Add(-age), Cycle: 5, Duration: time.Millisecond, Maintenance: m},
		}
	}
	for _, c := range []struct {
		name string
		snap *snapshot.Snapshot
		ping bool
	}{
		{"running, cycles succeed", snap(api.Running, 500*time.Millisecond, maintenance.Maintenance{}), true},
		{"running, cycles fail, samples arrive", snap(api.Running, 500*time.Millisecond, failing), true},
		{"running, samples stopped", snap(api.Running, time.Minute, maintenance.Maintenance{}), false},
		{"running, failing and samples stopped", snap(api.Running, time.Minute, failing), false},
		{"starting, no sample", &snapshot.Snapshot{Lifecycle: api.Starting, SampleInterval: time.Second}, true},
		{"shutting down, loop stopped", snap(api.ShuttingDown, time.Minute, maintenance.Maintenance{}), true},
	} {
		if got := watchdogPing(c.snap, now); got != c.ping {
			t.Errorf("%s: watchdogPing = %v, want %v", c.name, got, c.ping)
		}
	}
}

// A stop forwards normally for what is left of bgp.withdraw_delay_secs
// from the withdrawal (issue 28): all of it for a withdrawal now, the rest
// after a drain a moment before, nothing after an old drain or when no
// route was announced.
func TestWithdrawWait(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	const delay = 5 * time.Second
	for _, tc := range []struct {
		name        string
		withdrawnAt time.Time
		want        time.Duration
	}{
		{"withdrawn by the stop", now, delay},
		{"drained 2 s before", now.Add(-2 * time.Second), 3 * time.Second},
		{"drained long before", now.Add(-time.Minute), 0},
		{"exactly the delay before", now.Add(-delay), 0},
		{"never announced", time.Time{}, 0},
	} {
		if got := withdrawWait(tc.withdrawnAt, delay, now); got != tc.want {
			t.Errorf("%s: withdrawWait = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := withdrawWait(now, 0, now); got != 0 {
		t.Errorf("withdraw_delay_secs 0: withdrawWait = %v, want 0", got)
	}
}
