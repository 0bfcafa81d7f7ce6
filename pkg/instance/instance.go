// Package instance brings one XLB instance up on the host and takes it
// down: it resolves the config against the host, takes the network
// namespace's instance lock, journals and applies the host settings
// (pkg/hostnet), loads, configures and attaches the data path
// (pkg/dataplane) with every service, and starts each service's backend
// discovery (pkg/backend). Stop undoes all of it in reverse order.
//
// It is the only wiring of an instance: the daemon (pkg/daemon), the
// in-process end-to-end tests and the packet fixtures (dataplane/dptest) all
// call Start, so the tests exercise the bring-up operators run.
package instance

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/pkg/backend"
	k8sprovider "github.com/xlbproject/xlb/pkg/backend/kubernetes"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/status/api"
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
	// Unpinned pins nothing and adopts nothing (config state_dir is
	// ignored): packet fixtures and in-process tests, which run instances
	// side by side.
	Unpinned bool
	// Successor is set when this process takes the instance over from a
	// running predecessor (hot upgrade, DESIGN §6); nil otherwise.
	Successor *Successor
}

// Successor is what a hot-upgrade successor's Start gets from its
// running predecessor.
type Successor struct {
	// Lock is the predecessor's instance lock file, inherited as a file
	// descriptor (hostnet.AdoptLock).
	Lock *os.File
	// Quiesce asks the predecessor to stop its backend discovery and
	// maintenance loop, and returns what it hands over. Start calls it
	// once the data path is loaded against the pinned maps, before
	// writing anything the predecessor's program reads: from then on this
	// process is the only writer.
	Quiesce func() (Handed, error)
}

// Handed is what a running predecessor hands its successor besides the
// pinned state.
type Handed struct {
	// Backends are every backend of every service it knew (service,
	// member and backend ids, address, name).
	Backends []backend.Known
	// HZ is the kernel tick rate it measured (0: none), which the
	// successor then need not measure again (dataplane.AdoptHZ).
	HZ int
}

// Instance is a started XLB instance.
type Instance struct {
	Config   *config.Config
	Resolved Resolved             // what the host turned the config's auto values into
	DP       *dataplane.Dataplane // the loaded and attached data path
	// Backends is the first service's manager: the only one of a
	// top-level file.
	Backends *backend.Manager
	// Pool hands out every service's backend and member ids.
	Pool *backend.Pool

	// services are every service in the data path: the config's, in its
	// order, then the draining ones a reload removed (DESIGN §9);
	// FreeService removes one. svcMu guards the slice.
	svcMu    sync.Mutex
	services []*Service

	resolver *hostnet.Resolver
	guard    *hostnet.SysctlGuard
	journal  *hostnet.Journal
	ifindex  []int // attached interfaces, for the next-hop watcher
	lock     *hostnet.NetnsLock
	opts     Options
	log      logrus.FieldLogger
	cancel   context.CancelFunc // stops discovery, the next-hop watcher and the host settings guard
	wg       sync.WaitGroup
	undo     []func() error // run in reverse order by Stop
	stopOnce sync.Once
	stopErr  error
	// adopted: the data path came from a predecessor's pins (crash,
	// restart or hand-off). A failed start then leaves everything in
	// place for the next one (Abandon) instead of undoing it: the pinned
	// program keeps forwarding the adopted connections.
	adopted bool
}

// Start brings an instance up to "attached and discovering" in the
// caller's network namespace: host values resolved, SNAT ports reserved,
// FIB lookups enabled and guarded (hostnet.SysctlGuard), program loaded
// and attached to every interface, next hops followed
// (hostnet.WatchNextHops), backend provider started and its first set
// published. It returns when the provider has synced, or with ctx's error
// when ctx ends first. On error, everything already done is undone.
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
	in := &Instance{Config: c, opts: o, log: o.Log, Pool: backend.NewPool(nil)}
	if err := in.start(ctx); err != nil {
		if in.adopted || o.Successor != nil {
			in.log.Warn("start failed after adopting pinned state: leaving the data path attached and the host settings as they are for the next start")
			if aerr := in.Abandon(); aerr != nil {
				in.log.WithError(aerr).Error("release after failed start")
			}
		} else if serr := in.Stop(); serr != nil {
			in.log.WithError(serr).Error("cleanup after failed start")
		}
		return nil, err
	}
	return in, nil
}

func (in *Instance) start(ctx context.Context) error {
	c := in.Config
	svcs := c.ServiceList()
	hub := k8sprovider.NewHub()
	provs := map[string]backend.Provider{}
	for _, s := range svcs {
		p, err := newProvider(s, hub, in.log.WithField("service", s.Name))
		if err != nil {
			return err
		}
		provs[s.Name] = p
	}
	r, err := Resolve(c)
	if err != nil {
		return err
	}
	in.Resolved = r
	in.log.WithFields(logrus.Fields{"listen": r.Listen, "snat": r.SNAT, "interfaces": r.Interfaces}).Info("resolved host settings")
	for _, s := range r.Services {
		log := in.log.WithFields(logrus.Fields{"service": s.Name, "listen": s.Listen})
		if s.Routed() {
			log.Infof("listen address is not on an ingress interface (%s): the network must route it to this host", s.Where())
		}
	}
	in.warnUDPSockets(svcs, r)

	var lock *hostnet.NetnsLock
	if in.opts.Successor != nil {
		lock, err = hostnet.AdoptLock(in.opts.JournalDir, in.opts.Successor.Lock)
	} else {
		lock, err = hostnet.LockNetns(in.opts.JournalDir)
	}
	if err != nil {
		return err
	}
	in.lock = lock
	in.undo = append(in.undo, lock.Release)
	j, err := hostnet.OpenJournal(in.opts.JournalDir)
	if err != nil {
		return err
	}
	if rec := j.Recovered(); len(rec) > 0 && in.opts.Successor != nil {
		in.log.WithField("journal", j.Path()).Info("hand-off: keeping the host settings journal of the running xlb")
	} else if len(rec) > 0 {
		in.log.WithFields(logrus.Fields{"changed": rec, "journal": j.Path()}).Warn("the previous xlb in this network namespace did not undo its host settings (it crashed); keeping the original values it recorded, and removing its neighbour entries on stop")
	}

	// The data path first: its required features are checked (and the
	// optional ones probed) before anything on the host changes.
	dpOpts := dataplane.Options{
		MaxConnections: c.FlowTable.MaxConnections, RandomSNATCursors: !in.opts.FixedSNATCursors,
		Disable: in.opts.Disable, StaleXDP: j.XDPPrograms(),
		SNAT: dataplane.SNATSpace{Addrs: len(r.SNAT), PortLo: c.SNAT.PortLo, PortHi: c.SNAT.PortHi, UDP: hasUDP(svcs)},
	}
	if !in.opts.Unpinned {
		// The data path's pinning probe mounts it too; here it is said.
		if mounted, err := dataplane.EnsureBPFFS(c.StateDir); err == nil && mounted {
			in.log.WithField("path", filepath.Dir(c.StateDir)).Info("mounted a BPF filesystem for state_dir (none was mounted)")
		}
		dpOpts.StateDir = c.StateDir
		if dpOpts.NetnsCookie, err = hostnet.NetnsCookie(); err != nil {
			return err
		}
	}
	dp, err := dataplane.Load(dpOpts)
	if err != nil {
		return err
	}
	in.DP = dp
	ad := dp.Adoption()
	in.adopted = ad.Start != api.StartFresh
	// From here on the host changes; a stop undoes it all. (A failed load
	// leaves the journal as it was, for the next start.)
	in.undo = append(in.undo, j.Restore, dp.Close)
	var handed Handed
	if in.adopted {
		in.log.WithFields(logrus.Fields{"state_dir": c.StateDir, "start": ad.Start, "from_layout": ad.FromLayout,
			"from_max_connections": ad.FromMaxConnections, "previous_owner": ad.OwnerPID}).
			Infof("adopted %d connection pairs", ad.Pairs)
		if ad.ShutdownFlag && in.opts.Successor == nil {
			in.log.Warn("the previous xlb died in its shutdown window: clearing the shutdown flag it left set")
		}
	}
	if in.opts.Successor != nil {
		// The predecessor stops writing before this process does.
		if handed, err = in.opts.Successor.Quiesce(); err != nil {
			return fmt.Errorf("hand-off: the running xlb did not stop its discovery and maintenance: %w", err)
		}
		if handed.HZ > 0 {
			if err := dp.AdoptHZ(handed.HZ); err != nil {
				in.log.WithError(err).Warn("hand-off: measuring HZ instead")
			}
		}
	}

	if err := hostnet.ReservePorts(j, c.SNAT.PortLo, c.SNAT.PortHi); err != nil {
		return err
	}
	if err := j.Set(hostnet.FIBLookupSysctl, "1"); err != nil {
		return err
	}
	// Opened here, in this thread's namespace; checks run with discovery.
	if in.guard, err = hostnet.GuardSysctls(hostnet.GuardOptions{
		SNATPortLo: c.SNAT.PortLo, SNATPortHi: c.SNAT.PortHi, Log: in.log.WithField("component", "hostsettings"),
		RetiredSNAT: in.retiredPorts,
	}); err != nil {
		return err
	}
	in.undo = append(in.undo, in.guard.Close)
	placed, err := in.configure(svcs)
	if err != nil {
		return err
	}
	// Ports of a retired SNAT range stay reserved until no pair holds
	// them (ReleaseRetiredSNAT); the predecessor had reserved them.
	in.journal = j
	for _, r := range dp.RetiredSNAT() {
		if err := hostnet.ReservePorts(j, r.PortLo, r.PortHi); err != nil {
			return err
		}
	}
	if err := dp.SetShutdown(false); err != nil {
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
		in.log.WithFields(logrus.Fields{"interface": ifname, "mode": a.Mode, "via": a.Via, "replaced_in_place": a.Adopted}).Info("XDP program attached")
		attached[a.Ifindex] = ifname
		in.ifindex = append(in.ifindex, a.Ifindex)
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
	in.resolver = hostnet.NewResolver(nl, r.SNAT[0], attached)
	in.resolver.OnManaged = j.AddNeighbour
	for _, n := range j.Neighbours() {
		in.resolver.Adopt(n.Interface, n.IP)
	}
	in.undo = append(in.undo, in.resolver.Cleanup)
	// Every service gets its manager: the configured ones their
	// provider, a draining one an empty one (its members depart and show
	// draining while their pairs live).
	known := known(placed, ad, handed.Backends)
	reserved := slices.Clone(r.SNAT)
	for _, rs := range r.Services {
		reserved = append(reserved, rs.Listen)
	}
	for _, ps := range placed {
		svc := &Service{ID: ps.ID, Name: ps.Name, Draining: ps.Draining, Listen: ps.Listen, Proto: ps.Proto, Ports: ps.Ports}
		prov := backend.Provider(backend.NewStatic(nil))
		o := backend.Options{Service: ps.Name, ServiceID: ps.ID, Pool: in.Pool,
			Log:   in.log.WithFields(logrus.Fields{"component": "backends", "service": ps.Name}),
			Known: known[ps.Name], HealthSource: r.SNAT[0], Reserved: reserved}
		if cs := ps.config; cs != nil {
			svc.Config, svc.Maglev = cs, maglevSettings(*cs)
			svc.UDPUnrepliedMax = c.UDPUnrepliedMax(cs)
			if svc.Maglev != nil {
				o.MaglevTableSize = svc.Maglev.TableSize
			}
			prov = provs[cs.Name]
			o.HealthCheck, o.HealthPort = cs.HealthCheck, cs.Ports[0].RemotePort
		}
		// The predecessor's routable set (read after Quiesce and
		// Configure: its last publication) serves until the provider's
		// first set.
		if in.adopted && !ps.Draining {
			if o.Inherited, err = in.routable(ps.ID); err != nil {
				return err
			}
		}
		svc.Backends = backend.NewManager(prov, in.resolver, dp, o)
		in.services = append(in.services, svc)
	}
	in.Backends = in.services[0].Backends

	if err := in.startDiscovery(ctx); err != nil {
		return err
	}
	if err := in.awaitFirstSync(ctx); err != nil {
		return err
	}
	// Pins last: only a complete load, attach and first publication is
	// ever pinned (DESIGN §6).
	digest, err := configDigest(c)
	if err != nil {
		return err
	}
	return dp.Pin(dataplane.PinMeta{OwnerPID: uint32(os.Getpid()), ConfigDigest: digest})
}

// startDiscovery runs, until StopDiscovery, everything that writes the
// data path or the host while the instance serves: the backend manager,
// the next-hop watcher (it writes the next-hop map, so a hand-off's
// predecessor stops it before its successor starts its own) and the host
// settings guard. The watcher opens its sockets in the calling thread's
// network namespace.
func (in *Instance) startDiscovery(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := hostnet.WatchNextHops(runCtx, in.ifindex, in.DP, in.resolver.KeepResolved, in.log.WithField("component", "nexthops"))
	if err != nil {
		cancel()
		return err
	}
	in.cancel = cancel
	svcs := in.Services()
	in.wg.Add(2 + len(svcs))
	for _, s := range svcs {
		svcCtx, stop := context.WithCancel(runCtx)
		s.stop = stop
		go func() {
			defer in.wg.Done()
			if err := s.Backends.Run(svcCtx); err != nil {
				in.log.WithField("service", s.Name).WithError(err).Error("backend provider stopped")
			}
		}()
	}
	go func() {
		defer in.wg.Done()
		<-w.Done()
	}()
	go func() {
		defer in.wg.Done()
		in.guard.Run(runCtx)
	}()
	return nil
}

// known is each service's backend.Options.Known: every backend a running
// predecessor handed over (service, ids and names), and every other
// member the adopted pairs and routable sets reference (after a crash:
// no names). A predecessor of layout 8 names no service: its backends are
// the migrated service's, their member ids their backend ids.
func known(placed []placedService, ad dataplane.Adoption, handed []backend.Known) map[string][]backend.Known {
	out := map[string][]backend.Known{}
	migrated := migratedService(placed)
	for _, k := range handed {
		if k.Service == "" {
			k.Service, k.Backend = migrated, k.ID
		}
		out[k.Service] = append(out[k.Service], k)
	}
	for _, k := range adoptedMembers(ad, placed) {
		if !slices.ContainsFunc(out[k.Service], func(o backend.Known) bool { return o.ID == k.ID || o.IP == k.IP }) {
			out[k.Service] = append(out[k.Service], k)
		}
	}
	for _, ks := range out {
		slices.SortFunc(ks, func(a, b backend.Known) int { return cmp.Compare(a.ID, b.ID) })
	}
	return out
}

// configDigest is the SHA-256 of the effective config, recorded in the
// pins' metadata.
func configDigest(c *config.Config) ([32]byte, error) {
	b, err := c.Marshal()
	if err != nil {
		return [32]byte{}, fmt.Errorf("config digest: %w", err)
	}
	return sha256.Sum256(b), nil
}

// Services returns every service in the data path: the config's, in its
// order, then the draining ones (DESIGN §9).
func (in *Instance) Services() []*Service {
	in.svcMu.Lock()
	defer in.svcMu.Unlock()
	return slices.Clone(in.services)
}

// FreeService frees a draining service's id in the data path once no
// pair of it lives (the caller's judgement: backend.Pool.Quiet), stops
// its backend manager and forgets it.
func (in *Instance) FreeService(s *Service) error {
	if !s.Draining {
		return fmt.Errorf("service %s is not draining", s.Name)
	}
	if err := in.DP.FreeService(s.ID); err != nil {
		return err
	}
	if s.stop != nil {
		s.stop()
	}
	in.svcMu.Lock()
	in.services = slices.DeleteFunc(in.services, func(o *Service) bool { return o == s })
	in.svcMu.Unlock()
	in.log.WithFields(logrus.Fields{"service": s.Name, "id": s.ID}).Info("removed service drained: its id is free")
	return nil
}

// Adopted reports whether the data path came from a predecessor's pins.
func (in *Instance) Adopted() bool { return in.adopted }

// LockFile is the instance lock's open file, handed to a hot-upgrade
// successor.
func (in *Instance) LockFile() *os.File { return in.lock.File() }

// Reclaim takes the data path back after a failed hand-off: the
// successor may have replaced the program and rewritten the config map
// before it failed. It points every interface back at this process's
// program, rewrites its config and every service's routable set, and
// restarts discovery. The caller restarts its maintenance loop.
func (in *Instance) Reclaim(ctx context.Context) error {
	if err := in.DP.Reclaim(); err != nil {
		return err
	}
	for _, s := range in.Services() {
		s.Backends.Republish()
	}
	return in.startDiscovery(ctx)
}

// Abandon releases this process's hold on the instance without undoing
// anything: the program stays attached, the maps and links pinned, the
// host settings and the journal as they are, the lock file in place. A
// process that handed over to its successor ends with it, and so does a
// successor or an adopting start that failed.
func (in *Instance) Abandon() error {
	var errs []error
	in.stopOnce.Do(func() {
		in.StopDiscovery()
		if in.DP != nil {
			errs = append(errs, in.DP.Release())
		}
		if in.guard != nil {
			errs = append(errs, in.guard.Close())
		}
		if in.lock != nil {
			errs = append(errs, in.lock.Abandon())
		}
	})
	return errors.Join(errs...)
}

// NextHopGC frees the data path's next-hop slots that no flow entry
// references and no packet used since passStart (the maintenance loop's
// Options.NextHopGC: referenced is its bitset over slot ids, collected over
// whole walk passes; dataplane.FreeNextHops).
func (in *Instance) NextHopGC(referenced []uint64, passStart uint32) error {
	freed, err := in.DP.FreeNextHops(referenced, passStart)
	if freed > 0 {
		in.log.WithField("freed", freed).Debug("freed unused next-hop slots")
	}
	return err
}

// ReleaseRetiredSNAT is the maintenance loop's RetiredSNATReleased: the
// ports of retired SNAT spaces (dataplane.RetiredSNAT) that no connection
// pair holds any more leave net.ipv4.ip_local_reserved_ports, except the
// config's SNAT range, the ranges still retired and what the host had
// reserved itself (hostnet.ReleasePorts).
func (in *Instance) ReleaseRetiredSNAT(released []dataplane.RetiredSNAT) error {
	if in.journal == nil {
		return nil
	}
	keep := append([]hostnet.PortRange{{Lo: in.Config.SNAT.PortLo, Hi: in.Config.SNAT.PortHi}}, in.retiredPorts()...)
	var rel []hostnet.PortRange
	for _, r := range released {
		rel = append(rel, hostnet.PortRange{Lo: r.PortLo, Hi: r.PortHi})
	}
	return hostnet.ReleasePorts(in.journal, rel, keep)
}

// retiredPorts are the port ranges of the retired SNAT spaces.
func (in *Instance) retiredPorts() []hostnet.PortRange {
	var out []hostnet.PortRange
	for _, r := range in.DP.RetiredSNAT() {
		out = append(out, hostnet.PortRange{Lo: r.PortLo, Hi: r.PortHi})
	}
	return out
}

// HostSettings returns the host settings the instance guards and how often
// each was put back since it started (hostnet.SysctlGuard); nil before the
// guard starts.
func (in *Instance) HostSettings() []hostnet.SettingRepairs {
	if in.guard == nil {
		return nil
	}
	return in.guard.Repairs()
}

// Members lists the member and backend ids of every backend of every
// service the instance knows (routable, draining or unreachable), for
// the maintenance loop's per-backend figures (maintenance.Options.Members).
func (in *Instance) Members() []maintenance.Member {
	var out []maintenance.Member
	for _, s := range in.Services() {
		for _, b := range s.Backends.Snapshot() {
			out = append(out, maintenance.Member{ID: b.ID, Backend: b.Backend})
		}
	}
	return out
}

// StopDiscovery stops the backend provider and resolution loop, the
// next-hop watcher and the host settings guard, and waits for them; the
// routable set and the next hops in the data path stay as they were.
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
