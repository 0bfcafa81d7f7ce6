// Package lifecycle runs one XLB instance: it resolves the config against
// the host, loads and attaches the data path, starts backend discovery, and
// undoes all of it on the way out.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// DisableFeaturesEnv names the environment variable that turns optional
// kernel features off, comma-separated (dataplane.AllFeatures), as if the
// host refused them: for hosts where a feature misbehaves, and for tests of
// the fallbacks.
const DisableFeaturesEnv = "XLB_DISABLE_FEATURES"

// Instance is a started XLB instance.
type Instance struct {
	Config   *config.Config
	Resolved Resolved
	DP       *dataplane.Dataplane
	Backends *backend.Manager
	Resolver *backend.Resolver

	log      logrus.FieldLogger
	cancel   context.CancelFunc // stops discovery
	wg       sync.WaitGroup
	undo     []func() error // run in reverse order by Stop
	stopOnce sync.Once
	stopErr  error
}

// Start brings an instance up to "attached and discovering": host values
// resolved, SNAT ports reserved, FIB lookups enabled, program loaded and
// attached to every interface, backend provider started. On error,
// everything already done is undone.
func Start(ctx context.Context, c *config.Config, log logrus.FieldLogger) (*Instance, error) {
	in := &Instance{Config: c, log: log}
	if err := in.start(ctx); err != nil {
		if serr := in.Stop(); serr != nil {
			log.WithError(serr).Error("cleanup after failed start")
		}
		return nil, err
	}
	return in, nil
}

func (in *Instance) start(ctx context.Context) error {
	c := in.Config
	if c.Provider.Kubernetes != nil {
		return errors.New("provider.kubernetes: the Kubernetes EndpointSlice provider is not part of this build; use provider.static")
	}
	r, err := Resolve(c)
	if err != nil {
		return err
	}
	in.Resolved = r
	in.log.WithFields(logrus.Fields{"listen": r.Listen, "snat": r.SNAT, "interfaces": r.Interfaces}).Info("resolved host settings")

	lock, err := hostnet.LockNetns(hostnet.DefaultJournalDir)
	if err != nil {
		return err
	}
	in.undo = append(in.undo, lock.Release)
	j, err := hostnet.OpenJournal(hostnet.DefaultJournalDir)
	if err != nil {
		return err
	}
	if rec := j.Recovered(); len(rec) > 0 {
		in.log.WithFields(logrus.Fields{"changed": rec, "journal": j.Path()}).Warn("the previous xlb in this network namespace did not undo its host settings (it crashed); keeping the original values it recorded, and removing its neighbour entries on stop")
	}

	// The data path first: its required features are checked (and the
	// optional ones probed) before anything on the host changes.
	disable, err := dataplane.ParseFeatures(os.Getenv(DisableFeaturesEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", DisableFeaturesEnv, err)
	}
	dp, err := dataplane.Load(dataplane.Options{
		MaxConnections: c.FlowTable.MaxConnections, RandomSNATCursors: true,
		Disable: disable, StaleXDP: j.XDPPrograms(),
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
	if err := j.Set(dataplane.FIBLookupSysctl, "1"); err != nil {
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

	in.Resolver = backend.NewResolver(nil, r.SNAT, attached)
	in.Resolver.OnManaged = j.AddNeighbour
	for _, n := range j.Neighbours() {
		in.Resolver.Adopt(n.Interface, n.IP)
	}
	in.undo = append(in.undo, in.Resolver.Cleanup)
	var prov backend.Provider = backend.NewStatic(c.Provider.Static.Backends)
	in.Backends = backend.NewManager(prov, in.Resolver, dp, backend.Options{Log: in.log.WithField("component", "backends")})

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

// AttachedModes lists interface → attach mode, sorted by interface.
func (in *Instance) AttachedModes() []dataplane.Attachment {
	as := in.DP.Attachments()
	slices.SortFunc(as, func(a, b dataplane.Attachment) int {
		if a.Interface < b.Interface {
			return -1
		}
		if a.Interface > b.Interface {
			return 1
		}
		return 0
	})
	return as
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
