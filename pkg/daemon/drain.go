package daemon

import (
	"errors"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// Errors of a drain request that cannot be carried out now.
var (
	errDrainShuttingDown = errors.New("the instance is shutting down")
	errDrainHandingOver  = errors.New("a hot upgrade is in progress; retry when the new process serves")
)

// drain drains (on) or undrains the instance for the admin API (DESIGN
// §6a): readiness answers draining while drained, and forwarding is
// unchanged. The drain is recorded in the runtime directory first
// (drainstate.go; issue 28), so that a restart or a crash keeps it; a
// record that cannot be written fails the request and changes nothing.
// Every request that changes the state is logged with who sent it and
// from where. It is refused while shutting down, and while a hot upgrade
// hands over (the successor takes the state from the quiesced message,
// so a change after it would be lost). Draining twice is no error and
// keeps the first drain's time and requester.
func (d *runner) drain(on bool, by status.Requester) error {
	d.drainMu.Lock()
	defer d.drainMu.Unlock()
	switch d.store.Load().Lifecycle {
	case api.ShuttingDown:
		return errDrainShuttingDown
	case api.HandingOver:
		return errDrainHandingOver
	}
	log := d.log.WithFields(logrus.Fields(by.Fields()))
	if d.drained == on {
		log.WithField("drained", on).Info("admin: drain request: already in that state")
		return nil
	}
	var rec *drainRecord
	if on {
		rec = &drainRecord{Since: time.Now(), By: by.String()}
	}
	if err := saveDrain(rec); err != nil {
		log.WithError(err).Error("admin: drain request refused: the drain record could not be written")
		return err
	}
	if on {
		log.Info("drained by " + rec.By + ": readiness answers draining, BGP withdraws; every packet is still forwarded")
	} else {
		log.Info("undrained by " + by.String())
	}
	d.setDrained(rec, false)
	return nil
}

// setDrained publishes the drain state rec (nil: not drained); restored
// says it was taken over from a previous process. The caller holds
// drainMu.
func (d *runner) setDrained(rec *drainRecord, restored bool) {
	d.drained = rec != nil
	d.update(func(s *snapshot.Snapshot) {
		s.Drained, s.DrainedSince, s.DrainedBy, s.DrainRestored = false, time.Time{}, "", false
		if rec != nil {
			s.Drained, s.DrainedSince, s.DrainedBy, s.DrainRestored = true, rec.Since, rec.By, restored
		}
	})
	d.reevaluateBGP()
}

// restoreDrain starts the instance drained when a previous process left a
// drain record (a restart or a crash, issue 28) or, in a hot-upgrade
// successor, when the predecessor was drained (predecessorDrained).
// Called before the first BGP verdict, so a drained instance never
// announces. An unreadable record is logged and taken as drained: an
// instance in maintenance must not announce itself by accident.
func (d *runner) restoreDrain(predecessorDrained bool) {
	d.drainMu.Lock()
	defer d.drainMu.Unlock()
	rec, path, err := loadDrain()
	if err != nil {
		d.log.WithError(err).Error("reading the drain record failed: starting drained; `xlbctl undrain` ends it")
		rec = &drainRecord{By: "an unreadable drain record"}
	}
	if rec == nil && predecessorDrained {
		// drained by a version that kept no record: keep one now, so a
		// later crash keeps the drain too
		rec = &drainRecord{By: "the previous process"}
		if err := saveDrain(rec); err != nil {
			d.log.WithError(err).Warn("recording the previous process's drain failed: a crash would forget it")
		}
	}
	if rec == nil {
		return
	}
	d.setDrained(rec, true)
	d.log.WithFields(logrus.Fields{"since": rec.Since.Format(time.RFC3339), "by": rec.By, "record": path}).
		Info("drained, as the previous process was: readiness answers draining, BGP announces nothing; `xlbctl undrain` ends it")
}

// isDrained reports the operator's drain.
func (d *runner) isDrained() bool {
	d.drainMu.Lock()
	defer d.drainMu.Unlock()
	return d.drained
}
