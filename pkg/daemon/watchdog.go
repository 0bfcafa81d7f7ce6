package daemon

import (
	"context"
	"time"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// watchdog pings systemd while the maintenance loop keeps publishing, and
// through the shutdown window, until ctx ends (watchdogPing decides).
func (d *runner) watchdog(ctx context.Context) {
	every := WatchdogInterval()
	if every == 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if watchdogPing(d.store.Load(), time.Now()) {
				d.notify.Watchdog()
			} else {
				d.log.Warn("maintenance samples are stale; withholding the systemd watchdog ping")
			}
		case <-ctx.Done():
			return
		}
	}
}

// watchdogPing decides one systemd watchdog ping: yes unless the instance
// is running and its maintenance samples stopped (snapshot.SampleStale:
// the loop stopped or a cycle hangs). Failing cycles keep publishing
// samples, so they keep the pings going: the data path forwards without
// the loop, and killing the daemon for it would only risk the forwarding.
// Before running and while shutting down the loop may legitimately be
// quiet.
func watchdogPing(s *snapshot.Snapshot, now time.Time) bool {
	return s.Lifecycle != api.Running || !s.SampleStale(now)
}
