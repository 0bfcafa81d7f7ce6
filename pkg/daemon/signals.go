package daemon

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// handledSignals are the signals the daemon subscribes to when
// Options.Signals is nil.
var handledSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR2, syscall.SIGHUP}

// subscribe returns the signal channel Run reads: Options.Signals, or the
// process's own signals (handledSignals) with a function that ends the
// subscription.
func subscribe(o Options) (<-chan os.Signal, func()) {
	if o.Signals != nil {
		return o.Signals, func() {}
	}
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, handledSignals...)
	return ch, func() { signal.Stop(ch) }
}

// interpretSignals turns the first SIGTERM/SIGINT into stop, forwards
// later ones to again (which ends the shutdown window early), turns
// SIGUSR2 into a hot upgrade request on upgrade while running (and into an
// immediate failed result otherwise, so `xlb reload` does not wait), and
// logs SIGHUP, which XLB ignores. It returns when sigs is closed or ctx
// ends.
func (d *runner) interpretSignals(ctx context.Context, sigs <-chan os.Signal, stop context.CancelFunc, again chan<- os.Signal, upgrade chan<- struct{}) {
	stopping := false
	for {
		var s os.Signal
		select {
		case <-ctx.Done():
			return
		case sig, ok := <-sigs:
			if !ok {
				return
			}
			s = sig
		}
		switch s {
		case syscall.SIGUSR2:
			l := d.store.Load().Lifecycle
			if l == api.HandingOver {
				d.log.Warn("SIGUSR2: a hot upgrade is already under way")
				continue
			}
			if stopping || l != api.Running {
				err := fmt.Errorf("SIGUSR2 (hot upgrade) while %s: ignored", l)
				d.log.Warn(err.Error())
				writeUpgradeResult(upgradeResult{PID: os.Getpid(), Result: api.UpgradeFailed, Error: err.Error()}, d.log)
				continue
			}
			select {
			case upgrade <- struct{}{}:
			default:
				d.log.Warn("SIGUSR2: a hot upgrade is already under way")
			}
		case syscall.SIGHUP:
			d.log.Warn("SIGHUP ignored: `systemctl reload xlb` (SIGUSR2) applies xlb.yaml changes and upgrades without dropping connections")
		default:
			if !stopping {
				stopping = true
				d.log.WithField("signal", s).Info("stopping")
				stop()
				continue
			}
			select {
			case again <- s:
			default:
			}
		}
	}
}
