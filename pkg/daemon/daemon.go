package daemon

import (
	"context"
	"fmt"
	"os"
	"sync"
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
	// the shutdown window), SIGUSR2 and SIGHUP (logged and ignored); nil:
	// the process's own signals.
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

func (d *runner) run(ctx context.Context) error {
	sigs, unsubscribe := subscribe(d.o)
	defer unsubscribe()
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
	defer func() {
		if err := lis.stop(); err != nil {
			d.log.WithError(err).Warn("stopping listeners")
		}
	}()

	again := make(chan os.Signal, 4)
	startCtx, stop := context.WithCancel(ctx)
	defer stop()
	sigCtx, endSignals := context.WithCancel(context.Background())
	defer endSignals()
	go d.interpretSignals(sigCtx, sigs, stop, again)

	if err := d.bringUp(startCtx, disable); err != nil {
		if startCtx.Err() != nil {
			// a stop signal during startup: bringUp undid what it had done
			d.log.Info("stopped during startup")
			return nil
		}
		return err
	}
	d.publishLifecycle(api.Running)
	d.startConfigWatch()
	d.notify.Ready(d.runningStatus())
	d.log.WithField("status", d.runningStatus()).Info("xlb running")
	wdCtx, stopWatchdog := context.WithCancel(context.Background())
	defer stopWatchdog()
	go d.watchdog(wdCtx)

	<-startCtx.Done() // first stop signal
	return d.shutdown(again)
}

// bringUp takes the process from starting to ready to run: the instance up,
// its state published, the maintenance loop started and its first sample
// in. On error (ctx ending included) it undoes what it did.
func (d *runner) bringUp(ctx context.Context, disable []dataplane.Feature) error {
	inst, err := instance.Start(ctx, d.cfg, instance.Options{Log: d.log, Disable: disable})
	if err != nil {
		return err // Start undid what it had done
	}
	d.inst = inst
	d.publishInstance()
	err = d.startMaintenance()
	if err == nil {
		err = d.awaitFirstSample(ctx)
	}
	if err != nil {
		d.stopBackground()
		if serr := d.inst.Stop(); serr != nil {
			d.log.WithError(serr).Error("undo the bring-up")
		}
	}
	return err
}
