package daemon

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/instance"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// cleanupMargin is what the shutdown announces to systemd on top of
// shutdown_timeout for detaching and releasing everything.
const cleanupMargin = 10 * time.Second

// firstSampleTimeout bounds the wait for the first maintenance sample,
// which readiness and READY=1 wait for.
const firstSampleTimeout = 30 * time.Second

// Options configure Run. The zero value (with Log) is what cmd/xlb runs;
// the other fields let tests watch and drive the process.
type Options struct {
	// ConfigPath is the config file, watched for edits and shown in status.
	ConfigPath string
	Log        *logrus.Logger
	// Signals delivers SIGTERM/SIGINT (stop; a second one skips the rest of
	// the shutdown window), SIGUSR2 (hot upgrade) and SIGHUP (logged and
	// ignored); nil: the process's own signals.
	Signals <-chan os.Signal
	// Notifier talks to systemd; nil: NewNotifier().
	Notifier *Notifier
	// Store receives the snapshots; nil: a private one.
	Store *snapshot.Store
	// MaintenanceInterval is the maintenance period; 0:
	// maintenance.DefaultInterval.
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
	// storeMu serialises snapshot updates from the main, maintenance and
	// config-watch goroutines (publish.go).
	storeMu sync.Mutex
	// svcCounts are the services' counters as of the latest sample,
	// under storeMu; counts keeps them (maintenance goroutine only).
	svcCounts map[string]snapshot.ServiceCounts
	counts    serviceCounter

	// drainMu guards drained, an operator's drain (drain.go).
	drainMu sync.Mutex
	drained bool

	succ *successor // non-nil in a hot-upgrade successor
	// bgp is the BGP speaker's announcer, nil without a bgp section
	// (bgp.go); stored once the speaker started, read by the admin API's
	// drain as well.
	bgp         atomic.Pointer[announcer]
	bgCancel    context.CancelFunc // the maintenance loop
	watchCancel context.CancelFunc // the config watch
	bg          sync.WaitGroup
}

// Run runs the daemon through its states (see the package doc) until a
// stop signal, following the seed document's shutdown sequence, and
// returns nil after a clean stop, or the error that kept it from running.
// The instance is brought up in the calling thread's network namespace.
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	if o.Notifier == nil {
		o.Notifier = NewNotifier()
	}
	if o.Store == nil {
		o.Store = &snapshot.Store{}
	}
	if o.MaintenanceInterval == 0 {
		o.MaintenanceInterval = maintenance.DefaultInterval
	}
	d := &runner{cfg: cfg, o: o, log: o.Log, store: o.Store, notify: o.Notifier}
	return d.run(ctx)
}

func (d *runner) run(ctx context.Context) (err error) {
	sigs, unsubscribe := subscribe(d.o)
	defer unsubscribe()
	succ, err := inheritedSuccessor()
	if err != nil {
		return err
	}
	d.succ = succ
	defer func() {
		if err != nil {
			succ.fail(err)
		}
		succ.close()
	}()
	if err := checkCapabilities(); err != nil {
		return err
	}
	disable, err := dataplane.ParseFeatures(os.Getenv(api.EnvDisableFeatures))
	if err != nil {
		return fmt.Errorf("%s: %w", api.EnvDisableFeatures, err)
	}
	d.publishStarting()
	d.notify.Status("starting: attaching XDP and resolving backends")

	lis, err := d.startListeners()
	if err != nil {
		return err
	}
	if succ == nil {
		lis.serve(d.log)
	}
	// Last: requests in flight are answered. After a hand-off only this
	// process's descriptors of the listening sockets close; the successor
	// accepts on its own, connections still queued included.
	handedOver := false
	defer func() {
		stop := lis.stop
		if handedOver {
			stop = lis.release
		}
		if err := stop(); err != nil {
			d.log.WithError(err).Warn("stopping listeners")
		}
	}()

	again := make(chan os.Signal, 4)
	upgrade := make(chan struct{}, 1)
	startCtx, stop := context.WithCancel(ctx)
	defer stop()
	sigCtx, endSignals := context.WithCancel(context.Background())
	defer endSignals()
	go d.interpretSignals(sigCtx, sigs, stop, again, upgrade)

	if err := d.bringUp(startCtx, disable); err != nil {
		if startCtx.Err() != nil {
			// a stop signal during startup: bringUp undid what it had done
			d.log.Info("stopped during startup")
			return nil
		}
		return err
	}
	d.publishLifecycle(api.Running)
	d.runBGP()
	d.startConfigWatch()
	if succ != nil {
		lis.serve(d.log)
		d.takeOver(succ)
	} else {
		d.notify.Ready(d.runningStatus())
	}
	d.log.WithField("status", d.runningStatus()).Info("xlb running")
	wdCtx, stopWatchdog := context.WithCancel(context.Background())
	defer stopWatchdog()
	go d.watchdog(wdCtx)

	for {
		select {
		case <-startCtx.Done(): // first stop signal
			return d.shutdown(again)
		case <-upgrade:
			if d.handOff(startCtx, lis) {
				handedOver = true
				return d.exitHandedOver()
			}
		}
	}
}

// takeOver finishes a hot upgrade in the successor: it tells systemd that
// this process is the service's main process now and ready, counts the
// hand-off, and lets the predecessor exit.
func (d *runner) takeOver(s *successor) {
	d.notify.ReadyAs(os.Getpid(), d.runningStatus())
	if err := d.inst.DP.CountHotUpgrade(true); err != nil {
		d.log.WithError(err).Warn("count the hot upgrade")
	}
	d.publishUpgrades()
	if err := s.ready(); err != nil {
		d.log.WithError(err).Warn("hot upgrade: tell the previous process (it exits when it sees this process's READY or times out)")
	}
	d.log.WithFields(logrus.Fields{"adopted_pairs": d.inst.DP.Adoption().Pairs, "from_pid": s.fromPID}).Info("hot upgrade complete")
}

// exitHandedOver ends this process after a successful hand-off: nothing
// is undone (no shutdown flag, no detach, pins and host settings stay);
// only this process's descriptors are released.
func (d *runner) exitHandedOver() error {
	if d.watchCancel != nil {
		d.watchCancel()
	}
	d.stopBGP(true)
	if err := d.inst.Abandon(); err != nil {
		d.log.WithError(err).Warn("release the data path's descriptors")
	}
	d.log.Info("xlb exited after the hand-off: the new process serves every connection")
	return nil
}

// bringUp takes the process from starting to ready to run: the instance up,
// its state published, the maintenance loop started and its first sample
// in. On error (ctx ending included) it undoes what it did.
func (d *runner) bringUp(ctx context.Context, disable []dataplane.Feature) error {
	opts := instance.Options{Log: d.log, Disable: disable}
	if d.succ != nil {
		opts.Successor = d.succ.instanceSuccessor()
	}
	inst, err := instance.Start(ctx, d.cfg, opts)
	if err != nil {
		return err // Start undid what it had done, or left adopted state in place
	}
	d.inst = inst
	d.restoreDrain(d.succ != nil && d.succ.drained)
	d.publishInstance()
	d.publishUpgrades()
	err = d.startMaintenance()
	if err == nil {
		err = d.awaitFirstSample(ctx)
	}
	if err == nil {
		err = d.startBGP(ctx)
	}
	if err != nil {
		d.stopBackground()
		if d.inst.Adopted() {
			// Adopted connections keep flowing through the pinned
			// program; the next start adopts them again.
			if aerr := d.inst.Abandon(); aerr != nil {
				d.log.WithError(aerr).Error("release the adopted data path")
			}
		} else if serr := d.inst.Stop(); serr != nil {
			d.log.WithError(serr).Error("undo the bring-up")
		}
	}
	return err
}
