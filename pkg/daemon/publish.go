package daemon

import (
	"net/netip"
	"slices"
	"time"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/configwatch"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/instance"
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
		Lifecycle: api.Starting, StartedAt: time.Now(), XDPMode: d.cfg.XDPMode, Form: d.cfg.Form,
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
// its services and their backends.
func (d *runner) publishInstance() {
	r := d.inst.Resolved
	snat := slices.Clone(r.SNAT)
	d.update(func(s *snapshot.Snapshot) {
		s.SNAT, s.Interfaces = snat, r.Interfaces
		s.Attached = d.inst.DP.Attachments()
		s.Features = d.inst.DP.Features()
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
	d.inst.Pool.NotePairs(s.Time, busy)
	d.freeDrained()
	counts := d.counts.add(d.inst.Services(), s)
	var settings []snapshot.HostSetting
	for _, r := range d.inst.HostSettings() {
		settings = append(settings, snapshot.HostSetting{Name: r.Setting, Repairs: r.Repairs})
	}
	retired := d.inst.DP.RetiredSNAT()
	d.update(func(snap *snapshot.Snapshot) {
		snap.AddSample(s)
		d.svcCounts = counts
		snap.HostSettings = settings
		snap.RetiredSNAT = retired
		d.readBackends(snap)
	})
	if d.store.Load().Lifecycle == api.Running {
		d.notify.Status(d.runningStatus())
	}
}

// publishBackends publishes the backend managers' current view.
func (d *runner) publishBackends() { d.update(d.readBackends) }

// readBackends reads every service and its backend manager's view into s
// (DESIGN §9), and, while the instance has exactly one serving service,
// the one-service fields of status schema 1. It runs inside update, under
// the store's lock, so two publications never land in the opposite order
// of their reads (a sample must not put back a state a health check's
// transition already replaced).
func (d *runner) readBackends(s *snapshot.Snapshot) {
	list := d.inst.Services()
	svcs := make([]snapshot.Service, 0, len(list))
	for _, is := range list {
		m := is.Backends
		ss := snapshot.Service{ID: is.ID, Name: is.Name, State: snapshot.ServiceServing, Listen: is.Listen,
			Proto: is.Proto, Ports: slices.Clone(is.Ports), Scheduler: config.SchedulerRoundRobin,
			Provider: m.ProviderName(), ProviderSynced: m.EverSynced(), ProviderStale: m.Stale(), Backends: m.Snapshot(),
			UDPUnrepliedMax: is.UDPUnrepliedMax}
		if is.Draining {
			ss.State = snapshot.ServiceDraining
		}
		if is.Config != nil && is.Config.Scheduler != "" {
			ss.Scheduler = is.Config.Scheduler
		}
		if is.Maglev != nil {
			mg := *is.Maglev
			ss.Maglev = &mg
		}
		// The table the data path holds (weighted round robin, Maglev).
		if sch, ok := d.inst.DP.Schedule(is.ID); ok {
			ss.Schedule = sch
		}
		if err := m.ProviderError(); err != nil {
			ss.ProviderError = err.Error()
		}
		svcs = append(svcs, ss)
	}
	for i := range svcs {
		svcs[i].Counts = d.svcCounts[svcs[i].Name]
	}
	s.Services = svcs
	s.Listen, s.Ports, s.Provider, s.ProviderError, s.ProviderSynced, s.ProviderStale, s.Backends = netip.Addr{}, nil, "", "", false, false, nil
	serving := slices.DeleteFunc(slices.Clone(svcs), func(s snapshot.Service) bool { return s.State != snapshot.ServiceServing })
	if len(serving) == 1 { // the file's one service (a removed or renamed one may drain beside it)
		o := serving[0]
		s.Listen, s.Ports, s.Provider, s.ProviderError, s.ProviderSynced, s.ProviderStale, s.Backends =
			o.Listen, o.Ports, o.Provider, o.ProviderError, o.ProviderSynced, o.ProviderStale, o.Backends
	}
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

// freeDrained frees the id of every draining service whose members have
// held no pair for backend.IDReuseQuiet (DESIGN §9): it leaves the data
// path, the status and the metrics.
func (d *runner) freeDrained() {
	for _, s := range d.inst.Services() {
		if !s.Draining || !d.inst.Pool.Quiet(s.Name) {
			continue
		}
		if err := d.inst.FreeService(s); err != nil {
			d.log.WithField("service", s.Name).WithError(err).Warn("free the drained service's id")
		}
	}
}

// serviceCounter keeps each service's connection counters
// (snapshot.ServiceCounts) from the samples: the sums of its members'
// cells, plus what members it no longer lists (an id another member
// took over) had counted, so they never decrease while the service keeps
// its id. Only the maintenance loop's goroutine calls add.
type serviceCounter struct {
	last    map[uint32]memberShare // by member id, as of the previous sample
	retired map[string]snapshot.ServiceCounts
}

// memberShare is one member's cells in a sample.
type memberShare struct {
	service string
	counts  snapshot.ServiceCounts
}

// add takes a sample and returns every service's counters. With one
// service they are the instance's; with several, the sums of the
// members' cells (closures by kind and initiator: the data path's pair
// events per member).
func (c *serviceCounter) add(svcs []*instance.Service, smp *maintenance.Sample) map[string]snapshot.ServiceCounts {
	out := map[string]snapshot.ServiceCounts{}
	if len(svcs) == 1 {
		out[svcs[0].Name] = snapshot.ServiceCounts{Opened: smp.Opened, Closed: smp.Closed, Orphaned: smp.Orphaned, EmbryonicExpired: smp.EmbryonicExpired,
			UDP: snapshot.UDPCounts{Opened: smp.UDP.Opened, ExpiredUnreplied: smp.UDP.ExpiredUnreplied, ExpiredReplied: smp.UDP.ExpiredReplied}}
		return out
	}
	if c.retired == nil {
		c.retired = map[string]snapshot.ServiceCounts{}
	}
	cur := map[uint32]memberShare{}
	for _, s := range svcs {
		for _, b := range s.Backends.Snapshot() {
			if bs, ok := smp.Backend(b.ID); ok {
				st := bs.Stats
				cur[b.ID] = memberShare{service: s.Name, counts: snapshot.ServiceCounts{
					Opened: st.Opened, Orphaned: bs.Reaped.Orphaned, EmbryonicExpired: bs.Reaped.Embryonic,
					UDP: snapshot.UDPCounts{Opened: bs.UDPOpened, ExpiredUnreplied: bs.Reaped.UDPUnreplied, ExpiredReplied: bs.Reaped.UDPReplied},
					Closed: maintenance.Closed{
						ClientFIN: st.ClosedFIN - st.ClosedFINByBackend, BackendFIN: st.ClosedFINByBackend,
						ClientRST: st.ClosedRST - st.ClosedRSTByBackend, BackendRST: st.ClosedRSTByBackend,
					}}}
			}
		}
	}
	for id, old := range c.last {
		if now, ok := cur[id]; !ok || now.service != old.service {
			c.retired[old.service] = addCounts(c.retired[old.service], old.counts)
		}
	}
	c.last = cur
	for _, s := range svcs {
		out[s.Name] = c.retired[s.Name]
	}
	for _, m := range cur {
		out[m.service] = addCounts(out[m.service], m.counts)
	}
	return out
}

func addCounts(a, b snapshot.ServiceCounts) snapshot.ServiceCounts {
	a.Opened += b.Opened
	a.Orphaned += b.Orphaned
	a.EmbryonicExpired += b.EmbryonicExpired
	a.UDP.Opened += b.UDP.Opened
	a.UDP.ExpiredUnreplied += b.UDP.ExpiredUnreplied
	a.UDP.ExpiredReplied += b.UDP.ExpiredReplied
	a.Closed.ClientFIN += b.Closed.ClientFIN
	a.Closed.BackendFIN += b.Closed.BackendFIN
	a.Closed.ClientRST += b.Closed.ClientRST
	a.Closed.BackendRST += b.Closed.BackendRST
	return a
}
