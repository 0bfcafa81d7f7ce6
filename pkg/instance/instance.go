// Package instance brings one XLB instance up on the host and takes it
// down: it resolves the config against the host, takes the network
// namespace's instance lock, journals and applies the host settings
// (pkg/hostnet), loads, configures and attaches the data path
// (pkg/dataplane), and starts backend discovery (pkg/backend). Stop undoes
// all of it in reverse order.
//
// It is the only wiring of an instance: the daemon (pkg/daemon), the
// in-process end-to-end tests and the packet fixtures (dataplane/dptest) all
// call Start, so the tests exercise the bring-up operators run.
package instance

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// Options shape Start. The zero value is what the daemon runs.
type Options struct {
	// Log receives the bring-up's log lines; nil: logrus's standard logger.
	Log logrus.FieldLogger
	// JournalDir holds the instance lock and the host settings journal of
	// the caller's network namespace; "": hostnet.DefaultJournalDir.
	JournalDir string
	// Disable turns optional kernel features off as if the host refused
	// them (the daemon reads XLB_DISABLE_FEATURES into it).
	Disable []dataplane.Feature
	// FixedSNATCursors starts every backend id's SNAT port cursor at the
	// low end of the range instead of a random point
	// (dataplane.Options.RandomSNATCursors), so that packet fixtures can
	// predict the port a new pair takes.
	FixedSNATCursors bool
}

// Instance is a started XLB instance.
type Instance struct {
	Config   *config.Config
	Resolved Resolved             // what the host turned the config's auto values into
	DP       *dataplane.Dataplane // the loaded and attached data path
	Backends *backend.Manager     // discovery and the routable set

	resolver *hostnet.Resolver
	opts     Options
	log      logrus.FieldLogger
	cancel   context.CancelFunc // stops discovery
	wg       sync.WaitGroup
	undo     []func() error // run in reverse order by Stop
	stopOnce sync.Once
	stopErr  error
}

// Start brings an instance up to "attached and discovering" in the
// caller's network namespace: host values resolved, SNAT ports reserved,
// FIB lookups enabled, program loaded and attached to every interface,
// backend provider started and its first set published. It returns when
// the provider has synced, or with ctx's error when ctx ends first. On
// error, everything already done is undone.
//
// Start and Stop touch the calling thread's network namespace (sysctls
// under /proc/sys, the instance lock); the goroutines Start leaves running
// reach the host through netlink sockets opened in that namespace.
func Start(ctx context.Context, c *config.Config, o Options) (*Instance, error) {
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.JournalDir == "" {
		o.JournalDir = hostnet.DefaultJournalDir
	}
	in := &Instance{Config: c, opts: o, log: o.Log}
	if err := in.start(ctx); err != nil {
		if serr := in.Stop(); serr != nil {
			in.log.WithError(serr).Error("cleanup after failed start")
		}
		return nil, err
	}
	return in, nil
}

func (in *Instance) start(ctx context.Context) error {
	c := in.Config
	if c.Provider.Kubernetes != nil {
		return fmt.Errorf("provider.kubernetes: %w", config.ErrKubernetesNotBuilt)
	}
	r, err := Resolve(c)
	if err != nil {
		return err
	}
	in.Resolved = r
	in.log.WithFields(logrus.Fields{"listen": r.Listen, "snat": r.SNAT, "interfaces": r.Interfaces}).Info("resolved host settings")

	lock, err := hostnet.LockNetns(in.opts.JournalDir)
	if err != nil {
		return err
	}
	in.undo = append(in.undo, lock.Release)
	j, err := hostnet.OpenJournal(in.opts.JournalDir)
	if err != nil {
		return err
	}
	if rec := j.Recovered(); len(rec) > 0 {
		in.log.WithFields(logrus.Fields{"changed": rec, "journal": j.Path()}).Warn("the previous xlb in this network namespace did not undo its host settings (it crashed); keeping the original values it recorded, and removing its neighbour entries on stop")
	}

	// The data path first: its required features are checked (and the
	// optional ones probed) before anything on the host changes.
	dp, err := dataplane.Load(dataplane.Options{
		MaxConnections: c.FlowTable.MaxConnections, RandomSNATCursors: !in.opts.FixedSNATCursors,
		Disable: in.opts.Disable, StaleXDP: j.XDPPrograms(),
	})
	if err != nil {
		return err
	}
	in.DP = dp
	// From here on the host changes; a stop undoes it all. (A failed load
	// leaves the journal as it was, for the next start.)
	in.undo = append(in.undo, j.Restore, dp.Close)

	if err := hostnet.ReservePorts(j, c.SNAT.PortLo, c.SNAT.PortHi); err != nil {
		return err
	}
	if err := j.Set(hostnet.FIBLookupSysctl, "1"); err != nil {
		return err
	}
	settings := dataplane.Settings{Listen: r.Listen, SNAT: r.SNAT, SNATPortLo: c.SNAT.PortLo, SNATPortHi: c.SNAT.PortHi}
	for _, p := range c.Ports {
		settings.Ports = append(settings.Ports, dataplane.PortMap{Local: p.LocalPort, Remote: p.RemotePort})
	}
	if err := dp.Configure(settings); err != nil {
		return err
	}

	attached := map[int]string{}
	for _, ifname := range r.Interfaces {
		a, err := dp.Attach(ifname, dataplane.Mode(c.XDPMode))
		if err != nil {
			return err
		}
		if a.Fallback != nil {
			in.log.WithField("interface", ifname).WithError(a.Fallback).Warn("native XDP attach failed; running in generic mode, which is slower (set xdp_mode: native to make this an error)")
		}
		in.log.WithFields(logrus.Fields{"interface": ifname, "mode": a.Mode, "via": a.Via}).Info("XDP program attached")
		attached[a.Ifindex] = ifname
		// A program attached through netlink outlives a crash: record it
		// so the next start can replace it (Options.StaleXDP).
		netlinkID := uint32(0)
		if a.Via == dataplane.PathNetlink {
			netlinkID = a.ProgID
		}
		if err := j.SetXDPProgram(ifname, netlinkID); err != nil {
			return err
		}
	}
	in.log.WithField("features", dp.Features().Summary()).Info("kernel features probed")

	// A handle opened here stays in this network namespace whichever
	// thread the backend manager later runs on.
	nl, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	in.undo = append(in.undo, func() error { nl.Close(); return nil })
	in.resolver = hostnet.NewResolver(nl, r.SNAT, attached)
	in.resolver.OnManaged = j.AddNeighbour
	for _, n := range j.Neighbours() {
		in.resolver.Adopt(n.Interface, n.IP)
	}
	in.undo = append(in.undo, in.resolver.Cleanup)
	var prov backend.Provider = backend.NewStatic(c.Provider.Static.Backends)
	in.Backends = backend.NewManager(prov, in.resolver, dp, backend.Options{Log: in.log.WithField("component", "backends")})

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	in.cancel = cancel
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		if err := in.Backends.Run(runCtx); err != nil {
			in.log.WithError(err).Error("backend provider stopped")
		}
	}()
	select {
	case <-in.Backends.Synced():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// BackendIDs lists the data-path ids of every backend the instance knows
// (routable, draining or unreachable), for the maintenance loop's
// per-backend figures (maintenance.Options.BackendIDs).
func (in *Instance) BackendIDs() []uint32 {
	var ids []uint32
	for _, b := range in.Backends.Snapshot() {
		ids = append(ids, b.ID)
	}
	return ids
}

// StopDiscovery stops the backend provider and resolution loop and waits
// for them; the routable set in the data path stays as it was.
func (in *Instance) StopDiscovery() {
	if in.cancel != nil {
		in.cancel()
	}
	in.wg.Wait()
}

// Stop stops discovery, detaches and releases the data path, removes the
// managed neighbours and restores the sysctls, in reverse order of Start.
// It is safe to call more than once.
func (in *Instance) Stop() error {
	in.stopOnce.Do(func() {
		in.StopDiscovery()
		var errs []error
		for i := len(in.undo) - 1; i >= 0; i-- {
			if err := in.undo[i](); err != nil {
				errs = append(errs, err)
			}
		}
		in.stopErr = errors.Join(errs...)
		if in.stopErr != nil {
			in.stopErr = fmt.Errorf("stop: %w", in.stopErr)
		}
	})
	return in.stopErr
}
