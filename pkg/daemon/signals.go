package daemon

import (
	"context"
	"os"
	"os/signal"
	"syscall"
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
// later ones to again (which ends the shutdown window early), and logs the
// signals XLB ignores. It returns when sigs is closed or ctx ends.
func (d *runner) interpretSignals(ctx context.Context, sigs <-chan os.Signal, stop context.CancelFunc, again chan<- os.Signal) {
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
			d.log.Warn("SIGUSR2 (hot upgrade) is not supported by this version; ignored, xlb keeps running")
		case syscall.SIGHUP:
			d.log.Warn("SIGHUP ignored: xlb.yaml changes take effect on restart")
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
