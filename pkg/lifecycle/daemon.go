package lifecycle

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/configwatch"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/instance"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// disableFeaturesEnv names the environment variable that turns optional
// kernel features off, comma-separated (dataplane.AllFeatures), as if the
// host refused them: for hosts where a feature misbehaves, and for tests of
// the fallbacks.
const disableFeaturesEnv = "XLB_DISABLE_FEATURES"

// cleanupMargin is what the shutdown announces to systemd on top of
// shutdown_timeout for detaching and releasing everything.
const cleanupMargin = 10 * time.Second

// Options configure Run.
type Options struct {
	ConfigPath string
	Log        *logrus.Logger
	// Signals delivers SIGTERM/SIGINT (stop; a second one skips the rest of
	// the shutdown window), SIGUSR2 and SIGHUP (logged and ignored).
	Signals <-chan os.Signal
	// Notifier talks to systemd; nil: NewNotifier().
	Notifier *Notifier
	// Store receives the snapshots; nil: a private one.
	Store *snapshot.Store
	// MaintenanceInterval overrides the maintenance period (tests only).
	MaintenanceInterval time.Duration
}

// runner is one run of the XLB daemon.
type runner struct {
	cfg    *config.Config
	o      Options
	log    *logrus.Logger
	store  *snapshot.Store
	notify *Notifier
	inst   *instance.Instance
	loop   *maintenance.Loop
	lis    *listeners
	// current is inst for readers on other goroutines (metrics scrapes).
	current atomic.Pointer[instance.Instance]
	// storeMu serialises snapshot updates from the main, maintenance and
	// config-watch goroutines.
	storeMu sync.Mutex

	bgCancel    context.CancelFunc // the maintenance loop
	watchCancel context.CancelFunc // the config watch
	bg          sync.WaitGroup
}

// Run runs the daemon until a stop signal, following the seed document's
// shutdown sequence, and returns nil after a clean stop.
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	if o.Notifier == nil {
		o.Notifier = NewNotifier()
	}
	if o.Store == nil {
		o.Store = &snapshot.Store{}
	}
	d := &runner{cfg: cfg, o: o, log: o.Log, store: o.Store, notify: o.Notifier}
	return d.run(ctx)
}

func (d *runner) run(ctx context.Context) error {
	if err := checkCapabilities(); err != nil {
		return err
	}
	d.store.Publish(&snapshot.Snapshot{
		Name: d.cfg.Name, Version: buildinfo.Version, Revision: buildinfo.Revision,
		Lifecycle: snapshot.Starting, StartedAt: time.Now(), XDPMode: d.cfg.XDPMode,
		Config: snapshot.ConfigState{Path: d.o.ConfigPath},
	})
	d.notify.Status("starting: attaching XDP and resolving backends")

	lis, err := d.startListeners(d.dataplaneCounters)
	if err != nil {
		return err
	}
	d.lis = lis
	defer func() {
		if err := lis.stop(); err != nil {
			d.log.WithError(err).Warn("stopping listeners")
		}
	}()

	stopCh := make(chan os.Signal, 4)
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	go d.signals(stopCh, cancelStart)

	disable, err := dataplane.ParseFeatures(os.Getenv(disableFeaturesEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", disableFeaturesEnv, err)
	}
	inst, err := instance.Start(startCtx, d.cfg, instance.Options{Log: d.log, Disable: disable})
	if err != nil {
		if startCtx.Err() != nil {
			// a stop signal during startup: Start undid what it had done
			d.log.Info("stopped during startup")
			return nil
		}
		return err
	}
	d.inst = inst
	d.current.Store(inst)
	d.publishInstance()

	if err := d.startMaintenance(); err != nil {
		d.inst.Stop()
		return err
	}
	if err := d.awaitFirstSample(startCtx); err != nil {
		d.stopBackground()
		d.inst.Stop()
		if startCtx.Err() != nil {
			d.log.Info("stopped during startup")
			return nil
		}
		return err
	}
	d.update(func(s *snapshot.Snapshot) { s.Lifecycle = snapshot.Running })
	d.startConfigWatch()
	d.notify.Ready(d.runningStatus())
	d.log.WithField("status", d.runningStatus()).Info("xlb running")
	wdCtx, stopWatchdog := context.WithCancel(context.Background())
	defer stopWatchdog()
	go d.watchdog(wdCtx)

	<-startCtx.Done() // first stop signal
	return d.shutdown(stopCh)
}

// update applies f to a copy of the latest snapshot and publishes it.
func (d *runner) update(f func(*snapshot.Snapshot)) {
	d.storeMu.Lock()
	defer d.storeMu.Unlock()
	d.store.Update(f)
}

// signals turns the first SIGTERM/SIGINT into cancel, forwards later ones
// to stopCh, and logs the signals XLB ignores.
func (d *runner) signals(stopCh chan<- os.Signal, cancel context.CancelFunc) {
	stopping := false
	for s := range d.o.Signals {
		switch s {
		case syscall.SIGUSR2:
			d.log.Warn("SIGUSR2 (hot upgrade) is not supported by this version; ignored, xlb keeps running")
		case syscall.SIGHUP:
			d.log.Warn("SIGHUP ignored: xlb.yaml changes take effect on restart")
		default:
			if !stopping {
				stopping = true
				d.log.WithField("signal", s).Info("stopping")
				cancel()
				continue
			}
			select {
			case stopCh <- s:
			default:
			}
		}
	}
}

func (d *runner) publishInstance() {
	r := d.inst.Resolved
	ports := make([]snapshot.PortMap, len(d.cfg.Ports))
	for i, p := range d.cfg.Ports {
		ports[i] = snapshot.PortMap{LocalPort: p.LocalPort, RemotePort: p.RemotePort}
	}
	d.update(func(s *snapshot.Snapshot) {
		s.Listen, s.SNAT, s.Ports, s.Interfaces = r.Listen, r.SNAT, ports, r.Interfaces
		s.Attached = d.inst.DP.Attachments()
		s.Features = d.inst.DP.Features()
		s.Provider = d.inst.Backends.ProviderName()
		s.Backends = d.inst.Backends.Snapshot()
	})
}

func (d *runner) startMaintenance() error {
	interval := d.o.MaintenanceInterval
	if interval == 0 {
		interval = maintenance.DefaultInterval
	}
	loop, err := maintenance.New(d.inst.DP, maintenance.Options{
		OrphanTTL: d.cfg.OrphanTTL,
		Interval:  interval,
		BackendIDs: func() []uint32 {
			var ids []uint32
			for _, b := range d.inst.Backends.Snapshot() {
				ids = append(ids, b.ID)
			}
			return ids
		},
		OnSample: d.onSample,
		Log:      d.log.WithField("component", "maintenance"),
	})
	if err != nil {
		return err
	}
	d.loop = loop
	ctx, cancel := context.WithCancel(context.Background())
	d.bgCancel = cancel
	d.update(func(s *snapshot.Snapshot) { s.SampleInterval = interval })
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		if err := loop.Run(ctx); err != nil && ctx.Err() == nil {
			d.log.WithError(err).Error("maintenance loop stopped")
		}
	}()
	return nil
}

// onSample publishes a maintenance sample with the current backend states.
// Samples of failed cycles are published like the others (they keep
// readiness and the watchdog alive; maintenance.Sample.Maintenance tells status
// and metrics about the failure) but stay out of the duration histogram,
// which describes successful cycles.
func (d *runner) onSample(s *maintenance.Sample) {
	provErr := ""
	if err := d.inst.Backends.ProviderError(); err != nil {
		provErr = err.Error()
	}
	backends := d.inst.Backends.Snapshot()
	if !s.Maintenance.Failing() {
		d.lis.metrics.ObserveMaintenance(s.Duration)
	}
	d.update(func(snap *snapshot.Snapshot) {
		snap.Sample, snap.Backends, snap.ProviderError = s, backends, provErr
	})
	if d.store.Load().Lifecycle == snapshot.Running {
		d.notify.Status(d.runningStatus())
	}
}

func (d *runner) awaitFirstSample(ctx context.Context) error {
	deadline := time.After(30 * time.Second)
	for d.store.Load().Sample == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("no maintenance sample within 30 s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// runningStatus is the STATUS= line while running.
func (d *runner) runningStatus() string {
	s := d.store.Load()
	var modes []string
	for _, a := range s.Attached {
		modes = append(modes, a.Interface+" "+string(a.Mode))
	}
	var active uint64
	if s.Sample != nil {
		active = s.Sample.Active
	}
	discovered := 0
	for _, b := range s.Backends {
		if b.Discovered {
			discovered++
		}
	}
	line := fmt.Sprintf("running: XDP %s; %d/%d backends routable; %d active connections",
		strings.Join(modes, ", "), s.Routable(), discovered, active)
	if s.Sample != nil && s.Sample.Maintenance.Failing() {
		line += fmt.Sprintf("; maintenance failing (%d cycles in a row)", s.Sample.Maintenance.ConsecutiveFailures)
	}
	return line
}

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
	return s.Lifecycle != snapshot.Running || !s.SampleStale(now)
}

// startConfigWatch reports edits of the config file (DESIGN §1: a change
// never alters the running instance; it is logged and shown in status and
// metrics until reverted).
func (d *runner) startConfigWatch() {
	if d.o.ConfigPath == "" {
		return
	}
	w := configwatch.New(d.o.ConfigPath, d.cfg, d.log.WithField("component", "configwatch"), func(st snapshot.ConfigState) {
		d.update(func(s *snapshot.Snapshot) { s.Config = st })
	})
	ctx, cancel := context.WithCancel(context.Background())
	d.watchCancel = cancel
	go func() {
		if err := w.Run(ctx); err != nil {
			d.log.WithError(err).Warn("config file watch unavailable")
		}
	}()
}

func (d *runner) stopBackground() {
	if d.bgCancel != nil {
		d.bgCancel()
	}
	d.bg.Wait()
	if d.loop != nil {
		if err := d.loop.Close(); err != nil {
			d.log.WithError(err).Warn("close the maintenance loop's close event reader")
		}
		d.loop = nil
	}
}

// shutdown follows the seed's "XLB shutdown behavior": readiness 503, stop
// the provider and the maintenance loop, set the data-path shutdown flag,
// stay attached for shutdown_timeout answering matching traffic with RSTs,
// then detach and exit. A second stop signal ends the window at once.
func (d *runner) shutdown(stopCh <-chan os.Signal) error {
	window := d.cfg.ShutdownTimeout
	deadline := time.Now().Add(window)
	d.update(func(s *snapshot.Snapshot) {
		s.Lifecycle, s.ShutdownDeadline = snapshot.ShuttingDown, deadline
	})
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
		case s := <-stopCh:
			d.log.WithField("signal", s).Warn("second stop signal: ending the shutdown window now")
			break wait
		case <-t.C:
			left := time.Until(deadline).Round(time.Second)
			resets := uint64(0)
			if c, err := d.inst.DP.Counters(); err == nil {
				resets = c.ShutdownResets
			}
			d.notify.Status(fmt.Sprintf("shutting down: %d s left, %d resets sent", int(left.Seconds()), resets))
		}
	}
	if c, err := d.inst.DP.Counters(); err == nil {
		d.log.WithField("resets_sent", c.ShutdownResets).Info("shutdown window over; detaching")
	}
	if d.watchCancel != nil {
		d.watchCancel()
	}
	d.current.Store(nil)
	if err := d.inst.Stop(); err != nil {
		return err
	}
	d.log.Info("xlb stopped: XDP programs detached, host settings restored")
	return nil
}
