package daemon

import (
	"fmt"
	"os"
	"time"
)

// shutdown follows the seed's "XLB shutdown behavior", after withdrawing
// the BGP routes first (DESIGN §6a: before the RST window): readiness 503, stop
// the provider and the maintenance loop, set the data-path shutdown flag,
// stay attached for shutdown_timeout answering matching traffic with RSTs,
// then stop the BGP speaker (Cease), detach and exit. A second stop signal
// ends the window at once.
func (d *runner) shutdown(again <-chan os.Signal) error {
	d.withdrawBGP()
	window := d.cfg.ShutdownTimeout
	deadline := time.Now().Add(window)
	d.publishShutdown(deadline)
	d.notify.Stopping(window+cleanupMargin, fmt.Sprintf("shutting down: %d s left", int(window.Seconds())))
	d.log.WithField("shutdown_timeout", window).Info("shutting down: readiness is 503, new and established connections get a RST when they send")

	d.inst.StopDiscovery()
	d.stopBackground()
	if err := d.inst.DP.SetShutdown(true); err != nil {
		d.log.WithError(err).Error("set the data-path shutdown flag")
	} else {
		d.log.WithField("window", window).Info("shutdown flag set: matching packets are answered with RST until the window ends")
	}

	t := time.NewTicker(time.Second)
	defer t.Stop()
	timer := time.NewTimer(window)
	defer timer.Stop()
wait:
	for {
		select {
		case <-timer.C:
			break wait
		case s := <-again:
			d.log.WithField("signal", s).Warn("second stop signal: ending the shutdown window now")
			break wait
		case <-t.C:
			left := time.Until(deadline).Round(time.Second)
			resets := uint64(0)
			if c, err := d.publishCounters(); err == nil {
				resets = c.ShutdownResets
			}
			d.notify.Status(fmt.Sprintf("shutting down: %d s left, %d resets sent", int(left.Seconds()), resets))
		}
	}
	if c, err := d.publishCounters(); err == nil {
		d.log.WithField("resets_sent", c.ShutdownResets).Info("shutdown window over; detaching")
	}
	if d.watchCancel != nil {
		d.watchCancel()
	}
	d.stopBGP(false)
	if err := d.inst.Stop(); err != nil {
		return err
	}
	d.log.Info("xlb stopped: XDP programs detached, host settings restored")
	return nil
}
