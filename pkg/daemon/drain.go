package daemon

import (
	"errors"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// Errors of a drain request that cannot be carried out now.
var (
	errDrainShuttingDown = errors.New("the instance is shutting down")
	errDrainHandingOver  = errors.New("a hot upgrade is in progress; retry when the new process serves")
)

// drain drains (on) or undrains the instance for the admin API (DESIGN
// §6a): readiness answers draining while drained, and forwarding is
// unchanged. It is refused while shutting down, and while a hot upgrade
// hands over (the successor takes the state from the quiesced message,
// so a change after it would be lost). Draining twice is no error.
func (d *runner) drain(on bool) error {
	d.drainMu.Lock()
	defer d.drainMu.Unlock()
	switch d.store.Load().Lifecycle {
	case api.ShuttingDown:
		return errDrainShuttingDown
	case api.HandingOver:
		return errDrainHandingOver
	}
	if d.drained != on {
		if on {
			d.log.Info("drained by the admin API: readiness answers draining; every packet is still forwarded")
		} else {
			d.log.Info("undrained by the admin API")
		}
	}
	d.drained = on
	d.update(func(s *snapshot.Snapshot) { s.Drained = on })
	d.reevaluateBGP()
	return nil
}

// keepDrained starts a hot-upgrade successor drained, as its predecessor
// was.
func (d *runner) keepDrained() {
	d.drainMu.Lock()
	defer d.drainMu.Unlock()
	d.drained = true
	d.update(func(s *snapshot.Snapshot) { s.Drained = true })
	d.log.Info("drained, as the previous process was: readiness answers draining")
}

// isDrained reports the operator's drain.
func (d *runner) isDrained() bool {
	d.drainMu.Lock()
	defer d.drainMu.Unlock()
	return d.drained
}
