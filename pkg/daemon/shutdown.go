package daemon

import (
	"fmt"
	"os"
	"time"

	"github.com/sirupsen/logrus"
)

// shutdown follows the seed's "XLB shutdown behavior", after withdrawing
// the BGP routes first (DESIGN §6a: before the RST window) and forwarding
// normally for what is left of bgp.withdraw_delay_secs from the
// withdrawal (issue 28: the SYNs routers send while they converge are
// balanced, not reset): readiness 503 at once; then stop the provider
// and the maintenance loop, set the data-path shutdown flag, stay
// attached for shutdown_timeout answering matching traffic with RSTs,
// then stop the BGP speaker (Cease), detach and exit. systemd is told the
// whole length (EXTEND_TIMEOUT_USEC). A second stop signal ends the delay
// and the window at once.
func (d *runner) shutdown(again <-chan os.Signal) error {
	withdrawnAt := d.withdrawBGP()
	var delay time.Duration
	if d.cfg.BGP != nil {
		delay = withdrawWait(withdrawnAt, d.cfg.BGP.WithdrawDelay, time.Now())
	}
	window := d.cfg.ShutdownTimeout
	resetsFrom := time.Now().Add(delay)
	deadline := resetsFrom.Add(window)
	d.publishShutdown(resetsFrom, deadline)
	d.notify.Stopping(delay+window+cleanupMargin, fmt.Sprintf("shutting down: %d s left", int((delay+window).Seconds())))
	cut := false
	if delay > 0 {
		d.log.WithFields(logrus.Fields{"withdraw_delay": delay, "withdrawn_at": withdrawnAt.Format(time.RFC3339Nano)}).
			Info("shutting down: bgp routes withdrawn; readiness is 503, forwarding as before while the routers converge, then the shutdown window")
		cut = d.waitStopping(resetsFrom, again, func(left time.Duration) string {
			return fmt.Sprintf("shutting down: routes withdrawn, forwarding %d s more before the reset window", int(left.Seconds()))
		})
	}
	d.log.WithField("shutdown_timeout", window).Info("shutting down: readiness is 503, new and established connections get a RST when they send")

	d.inst.StopDiscovery()
	d.stopBackground()
	if err := d.inst.DP.SetShutdown(true); err != nil {
		d.log.WithError(err).Error("set the data-path shutdown flag")
	} else {
		d.log.WithField("window", window).Info("shutdown flag set: matching packets are answered with RST until the window ends")
	}

	if !cut {
		d.waitStopping(deadline, again, func(left time.Duration) string {
			resets := uint64(0)
			if c, err := d.publishCounters(); err == nil {
				resets = c.ShutdownResets
			}
			return fmt.Sprintf("shutting down: %d s left, %d resets sent", int(left.Seconds()), resets)
		})
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

// waitStopping waits until end, telling systemd status(time left) every
// second; it returns true when a second stop signal cut the wait short.
func (d *runner) waitStopping(end time.Time, again <-chan os.Signal, status func(left time.Duration) string) bool {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return false
		case s := <-again:
			d.log.WithField("signal", s).Warn("second stop signal: ending the shutdown now")
			return true
		case <-t.C:
			d.notify.Status(status(time.Until(end).Round(time.Second)))
		}
	}
}
