package daemon

import (
	"slices"
	"time"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/configwatch"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// update applies f to a copy of the latest snapshot and publishes it.
func (d *runner) update(f func(*snapshot.Snapshot)) {
	d.storeMu.Lock()
	defer d.storeMu.Unlock()
	d.store.Update(f)
}

// publishStarting publishes the first snapshot: starting, nothing up yet.
func (d *runner) publishStarting() {
	d.storeMu.Lock()
	defer d.storeMu.Unlock()
	d.store.Publish(&snapshot.Snapshot{
		Name: d.cfg.Name, Version: buildinfo.Version, Revision: buildinfo.Revision,
		Lifecycle: api.Starting, StartedAt: time.Now(), XDPMode: d.cfg.XDPMode,
		Config: configwatch.State{Path: d.o.ConfigPath},
	})
}

// publishLifecycle publishes a new process state.
func (d *runner) publishLifecycle(l api.Lifecycle) {
	d.update(func(s *snapshot.Snapshot) { s.Lifecycle = l })
}

// publishShutdown publishes the shutting_down state, when the reset
// window begins (after the BGP withdraw delay) and when it ends.
func (d *runner) publishShutdown(resetsFrom, deadline time.Time) {
	d.update(func(s *snapshot.Snapshot) {
		s.Lifecycle, s.ShutdownResetsFrom, s.ShutdownDeadline = api.ShuttingDown, resetsFrom, deadline
	})
}

// publishSampleInterval publishes the maintenance period (staleness of
// samples is judged against it).
func (d *runner) publishSampleInterval(interval time.Duration) {
	d.update(func(s *snapshot.Snapshot) { s.SampleInterval = interval })
}

// publishConfig publishes the config watch's view of the file.
func (d *runner) publishConfig(st configwatch.State) {
	d.update(func(s *snapshot.Snapshot) { s.Config = st })
}

// publishInstance publishes what the instance resolved and attached, and
// its backends.
func (d *runner) publishInstance() {
	r := d.inst.Resolved
	ports, snat := slices.Clone(d.cfg.Ports), slices.Clone(r.SNAT)
	d.update(func(s *snapshot.Snapshot) {
		s.Listen, s.SNAT, s.Ports, s.Interfaces = r.Listen, snat, ports, r.Interfaces
		s.Attached = d.inst.DP.Attachments()
		s.Features = d.inst.DP.Features()
		s.Provider = d.inst.Backends.ProviderName()
		d.readBackends(s)
	})
}

// onSample publishes a maintenance sample, with the counters it read, with
// the current backend states and the host settings guard's repairs. Samples of failed cycles are published like
// the others (they keep readiness and the watchdog alive;
// maintenance.Sample.Maintenance tells status and metrics about the
// failure) but stay out of the duration histogram, which describes
// successful cycles (snapshot.Snapshot.AddSample).
func (d *runner) onSample(s *maintenance.Sample) {
	var busy []uint32
	for _, b := range s.Backends {
		if b.Active+b.TimeWait > 0 {
			busy = append(busy, b.ID)
		}
	}
	d.inst.Backends.NotePairs(s.Time, busy)
	provErr := ""
	if err := d.inst.Backends.ProviderError(); err != nil {
		provErr = err.Error()
	}
	var settings []snapshot.HostSetting
	for _, r := range d.inst.HostSettings() {
		settings = append(settings, snapshot.HostSetting{Name: r.Setting, Repairs: r.Repairs})
	}
	retired := d.inst.DP.RetiredSNAT()
	d.update(func(snap *snapshot.Snapshot) {
		snap.AddSample(s)
		snap.ProviderError, snap.HostSettings = provErr, settings
		snap.RetiredSNAT = retired
		d.readBackends(snap)
	})
	if d.store.Load().Lifecycle == api.Running {
		d.notify.Status(d.runningStatus())
	}
}

// publishBackends publishes the backend manager's current view.
func (d *runner) publishBackends() { d.update(d.readBackends) }

// readBackends reads the backend manager's view into s. It runs inside
// update, under the store's lock, so two publications never land in the
// opposite order of their reads (a sample must not put back a state a
// health check's transition already replaced).
func (d *runner) readBackends(s *snapshot.Snapshot) {
	s.Backends, s.ProviderSynced, s.ProviderStale = d.inst.Backends.Snapshot(), d.inst.Backends.EverSynced(), d.inst.Backends.Stale()
}

// publishCounters reads the data path's counters into the snapshot, which
// the maintenance loop does each cycle but not during the shutdown window,
// so status and metrics see the shutdown resets grow; a failed read is
// published too (snapshot.Snapshot.SetCounters).
func (d *runner) publishCounters() (dataplane.Counters, error) {
	c, err := d.inst.DP.Counters()
	d.update(func(s *snapshot.Snapshot) { s.SetCounters(c, err) })
	return c, err
}

// publishUpgrades publishes how this process took the data path and the
// hot-upgrade counts of the pinned state.
func (d *runner) publishUpgrades() {
	ad := d.inst.DP.Adoption()
	start := ad.Start
	if d.succ != nil {
		start = api.StartHandedOver
	}
	ok, failed, err := d.inst.DP.HotUpgrades()
	if err != nil {
		d.log.WithError(err).Warn("read the hot-upgrade counts")
	}
	d.update(func(s *snapshot.Snapshot) {
		s.Upgrades.Start, s.Upgrades.AdoptedPairs = start, ad.Pairs
		s.Upgrades.OK, s.Upgrades.Failed = ok, failed
	})
}

// publishUpgradeFailure publishes a failed hand-off: its reason and the
// counts.
func (d *runner) publishUpgradeFailure(cause error) {
	d.publishUpgrades()
	d.update(func(s *snapshot.Snapshot) { s.Upgrades.LastFailure = cause.Error() })
}
