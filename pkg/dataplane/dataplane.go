// Package dataplane loads the XLB XDP program (bpf/xlb.c, compiled by bpf2go),
// attaches it to interfaces and gives typed access to its maps. It is the
// only package that touches BPF objects; only pkg/maintenance removes flow
// entries, through the reaper (Reap).
//
// Pinned state (DESIGN §6, hot upgrade and crash survival): with
// Options.StateDir, Load takes over what a predecessor pinned there --
// adopting its maps when their layout version (bpf/layout.h
// XLB_LAYOUT_VERSION) and max_connections match, copying them entry by
// entry into new maps when the layout is older or max_connections differs
// (pkg/dataplane/pins), refusing pins it cannot read (pins.Read) -- and Attach
// replaces the predecessor's program on each interface in place
// (link.Update on the pinned bpf_link, or a netlink replace), never
// detaching it. Pin writes the pins once everything is attached. A process
// ends in one of three ways: Close (SIGTERM: detach, unpin, remove
// state_dir), Release (a hand-off or a failed successor: close the file
// descriptors only, everything stays attached and pinned) or a crash (the
// same as Release, by the kernel). Reclaim takes the interfaces back after
// a successor failed.
package dataplane

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// Options shape the loaded objects.
type Options struct {
	// MaxConnections is the number of connection pairs the flow map holds
	// (flow_table.max_connections); the map gets EntriesPerPair entries
	// per pair.
	MaxConnections uint32
	// SNAT sizes the SNAT port bitmaps (snat.ip and snat.port_range);
	// Configure takes only Settings of this shape.
	SNAT SNATSpace
	// RandomSNATCursors starts every backend's SNAT port cursor at a
	// random point of the range instead of its start. pkg/instance sets
	// it: a restarted instance would otherwise hand out the ports its
	// predecessor just used toward each backend, whose 4-tuples the
	// backends may still hold (TIME_WAIT, or connections moved away by a
	// drain), and each such SYN meets a challenge ACK and a retransmit.
	// Packet fixtures leave it off for deterministic ports
	// (instance.Options.FixedSNATCursors).
	RandomSNATCursors bool
	// Disable turns optional kernel features off as if the host refused
	// them (XLB_DISABLE_FEATURES): the data path takes their fallback.
	Disable []Feature
	// StaleXDP names XDP programs a predecessor attached through netlink
	// (interface name → program id, from the host settings journal):
	// Attach replaces such a program in place instead of refusing the
	// interface as taken.
	StaleXDP map[string]uint32
	// StateDir is the directory (config state_dir, on a BPF filesystem
	// that Load mounts when missing: EnsureBPFFS) where the data path is
	// pinned and where a predecessor's pins are taken over (DESIGN §6).
	// "": pin nothing and adopt nothing (packet fixtures, in-process
	// tests); so does a host that refuses pinning (FeaturePinning).
	StateDir string
	// NetnsCookie is the caller's network namespace cookie
	// (SO_NETNS_COOKIE; hostnet.NetnsCookie), required with StateDir: it
	// is recorded in the pins, and pins of another namespace are refused.
	NetnsCookie uint64
}

// Dataplane owns the loaded program and maps. Methods are safe for
// concurrent use.
type Dataplane struct {
	objs xlbObjects

	mu  sync.Mutex
	cfg xlbXlbConfig
	// svcs are the service records as this process last wrote them
	// (Configure, SetRoutable, FreeService); nil before its first write.
	// Reclaim writes them back with cfg.
	svcs *[MaxServices]xlbService
	// scheds is each service's scheduler as this process knows it
	// (schedule.go); guarded by mu.
	scheds   map[uint16]*schedState
	clockMu  sync.Mutex
	attached map[string]*Attachment
	features Features          // guarded by mu
	staleXDP map[string]uint32 // Options.StaleXDP

	closeRing     bool // close events go through the ring buffer (else the per-CPU queues)
	randomCursors bool // Options.RandomSNATCursors: a cursor starts (and restarts, ResetBackend) at a random port
	reapMu        sync.Mutex
	reapBuf       xlbReapBatch    // guarded by reapMu
	nexthopBuf    xlbNexthopBatch // guarded by mu (nexthops.go nextHopCtlLocked)
	// beforeNextHopFree, when set (tests only: FixtureBeforeNextHopFree),
	// runs between FreeNextHops' decision and the frees.
	beforeNextHopFree func()

	// Pinned state (pins.go); guarded by mu.
	maxConnections uint32
	snatSpace      SNATSpace // Options.SNAT
	netnsCookie    uint64
	stateDir       string               // "": nothing is pinned
	spec           *ebpf.CollectionSpec // as loaded, for the program of the other attach type
	altProg        *ebpf.Program        // the XDP program loaded with the other attach type (link_update.go)
	adoption       Adoption             // how Load took the maps
	fromPins       bool                 // the maps came from pins: Attach takes pinned links over
	cfgPending     bool                 // re-read the pinned config before the first write
	retiredEpoch   uint64               // Configure calls and retired SNAT shrinks so far (RetiredSNATUse)
	migration      *migration           // a migration until Pin has copied the second time
	onSNATWalk     func()               // tests: runs between the SNAT bitmap rebuild's walk of the flow map and its changes
	pinned         bool                 // Pin succeeded once (Reclaim re-pins)
	lastPin        PinMeta              // what Pin recorded last (Reclaim pins it again)
	prevCounts     [2]uint64            // hand-off counts (ok, failed) of the record Load found
	done           bool                 // Close or Release ran: pins are no longer this process's to touch
}

// Load loads the XDP program and its maps, or takes over the maps a
// predecessor pinned under Options.StateDir (Adoption says which). It does
// not attach. Errors carry the verifier log when the kernel rejects the
// program, and name state_dir when its pins cannot be taken over (they
// are left as they are then).
func Load(opts Options) (*Dataplane, error) {
	if opts.MaxConnections == 0 {
		return nil, errors.New("dataplane: MaxConnections must be at least 1")
	}
	if err := opts.SNAT.validate(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("dataplane: remove memlock limit: %w", err)
	}
	d := &Dataplane{attached: map[string]*Attachment{}, staleXDP: opts.StaleXDP,
		maxConnections: opts.MaxConnections, netnsCookie: opts.NetnsCookie, snatSpace: opts.SNAT,
		randomCursors: opts.RandomSNATCursors}
	d.probeFeatures(opts)
	if d.featureOn(FeaturePinning) {
		d.stateDir = opts.StateDir
		if opts.NetnsCookie == 0 {
			return nil, errors.New("dataplane: Options.NetnsCookie is required with a StateDir")
		}
	}
	spec, err := loadXlb()
	if err != nil {
		return nil, err
	}
	spec.Maps[xlbMapXlbFlows].MaxEntries = EntriesPerPair * opts.MaxConnections
	spec.Maps[xlbMapXlbSnatPorts].MaxEntries = opts.SNAT.bitmapWords()
	spec.Maps[xlbMapXlbSnatTsreuse].MaxEntries = opts.SNAT.halfWords() // the TCP half's geometry (bpf/maps.h)
	var pins *pinnedState
	if d.stateDir != "" {
		if pins, err = readPins(d.stateDir, opts.NetnsCookie); err != nil {
			return nil, err
		}
	}
	if err := d.load(spec, pins); err != nil {
		if pins != nil {
			pins.Close()
		}
		return nil, err
	}
	if pins != nil {
		pins.Close()
	}
	// BPF_PROG_TEST_RUN is how the daemon reads the data path's clock.
	if _, _, err := d.clockSample(); err != nil {
		d.closeObjects()
		return nil, fmt.Errorf("dataplane: required kernel feature BPF_PROG_TEST_RUN of an XDP program (the data path's clock) was refused: %w%s", err, policyHint(err))
	}
	if opts.RandomSNATCursors && d.adoption.Start == api.StartFresh {
		if err := d.seedSNATCursors(); err != nil {
			d.closeObjects()
			return nil, err
		}
	}
	return d, nil
}

// load loads the object against what planLoad chose to adopt and copies
// what it chose to migrate.
func (d *Dataplane) load(spec *ebpf.CollectionSpec, pins *pinnedState) error {
	plan, err := d.planLoad(spec, pins)
	if err == nil && pins != nil {
		err = adoptPinnedMeta(&plan, pins.Dir)
	}
	if err != nil {
		plan.close()
		return err
	}
	err = spec.LoadAndAssign(&d.objs, &ebpf.CollectionOptions{MapReplacements: plan.replacements})
	for _, m := range plan.replacements {
		m.Close() // the loader holds clones
	}
	if err != nil {
		for _, m := range plan.sources {
			m.Close()
		}
		if pins != nil {
			return fmt.Errorf("dataplane: state_dir %s: load the program against the pinned maps: %w", pins.Dir, requiredError(err))
		}
		return requiredError(err)
	}
	d.spec = spec
	if err := d.takeOver(plan, pins); err != nil {
		d.closeObjects()
		return err
	}
	return nil
}

// chooseCloseEvents points the data path at the ring buffer when the host
// allows it, else at the per-CPU queues: close_ring_on is a constant, so
// the verifier never visits the other branch, and a refused ring buffer
// map is replaced by a one-slot array that nothing uses. When the maps
// are adopted (pinned is the pinned ring), the pins decide: a pinned
// array means the per-CPU queues.
func (d *Dataplane) chooseCloseEvents(spec *ebpf.CollectionSpec, pinned *ebpf.Map) error {
	d.closeRing = d.featureOn(FeatureRingBuf)
	if pinned != nil && d.closeRing != (pinned.Type() == ebpf.RingBuf) {
		d.closeRing = pinned.Type() == ebpf.RingBuf
		d.mu.Lock()
		d.setPathLocked(FeatureRingBuf, closePath(d.closeRing))
		d.mu.Unlock()
	}
	on := uint32(0)
	if d.closeRing {
		on = 1
	}
	if err := spec.Variables[xlbVarCloseRingOn].Set(on); err != nil {
		return fmt.Errorf("dataplane: choose the close event path: %w", err)
	}
	if !d.closeRing {
		ring := spec.Maps[xlbMapXlbCloseRing]
		ring.Type, ring.KeySize, ring.ValueSize, ring.MaxEntries = ebpf.Array, 4, 4, 1
	}
	return nil
}

// seedSNATCursors writes a random start into every backend's SNAT cursor.
func (d *Dataplane) seedSNATCursors() error {
	keys := make([]uint32, 2*MaxBackends) // both protocols' cursors (XLB_SNAT_CURSORS)
	vals := make([]uint32, 2*MaxBackends)
	for i := range keys {
		keys[i], vals[i] = uint32(i), rand.Uint32()
	}
	if _, err := updateAll(d, d.objs.XlbSnatCursors, keys, vals); err != nil {
		return fmt.Errorf("dataplane: seed SNAT cursors: %w", err)
	}
	return nil
}

// updateAll writes keys[i] = vals[i] with one BPF_MAP_UPDATE_BATCH, or one
// update per key where batch operations are unavailable. It returns after
// the first failure.
func updateAll[K, V any](d *Dataplane, m *ebpf.Map, keys []K, vals []V) (int, error) {
	if d.featureOn(FeatureBatchOps) {
		return m.BatchUpdate(keys, vals, nil)
	}
	for i := range keys {
		if err := m.Update(&keys[i], &vals[i], ebpf.UpdateAny); err != nil {
			return i, err
		}
	}
	return len(keys), nil
}

// Program returns the XDP program (for BPF_PROG_TEST_RUN in tests and benchmarks).
func (d *Dataplane) Program() *ebpf.Program { return d.objs.XlbXdp }

// FlowMap returns the raw flow map (tests and benchmarks).
func (d *Dataplane) FlowMap() *ebpf.Map { return d.objs.XlbFlows }

// FlowCapacity is the flow map's max_entries (two per connection pair).
func (d *Dataplane) FlowCapacity() uint32 { return d.objs.XlbFlows.MaxEntries() }

// Close ends the data path for good (SIGTERM's end, DESIGN §6): it
// detaches every interface (a pinned link is unpinned, then detached),
// detaches the links still pinned for interfaces this process did not
// attach, removes every pin and state_dir itself, and releases the
// program and maps. A process that hands over, or a successor or adopting
// start that failed, calls Release instead.
func (d *Dataplane) Close() error {
	if d.finish() {
		return nil
	}
	errs := []error{d.DetachAll()}
	d.mu.Lock()
	errs = append(errs, d.unpinAllLocked())
	d.mu.Unlock()
	errs = append(errs, d.closeObjects())
	return errors.Join(errs...)
}

// finish marks the end of the data path and reports whether Close or
// Release had run already (then they do nothing).
func (d *Dataplane) finish() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	was := d.done
	d.done = true
	return was
}

// Release closes every file descriptor without detaching or unpinning
// anything: the interfaces keep their program, and what is pinned stays
// pinned for the next process (a hand-off, a failed successor). A link
// this process attached but never pinned goes with its descriptor. Close
// or Release after either does nothing.
func (d *Dataplane) Release() error {
	if d.finish() {
		return nil
	}
	d.mu.Lock()
	var errs []error
	for name, a := range d.attached {
		if a.link != nil {
			errs = append(errs, a.link.Close())
		}
		delete(d.attached, name)
	}
	d.mu.Unlock()
	errs = append(errs, d.closeObjects())
	return errors.Join(errs...)
}

// closeObjects releases the program, the maps and a migration's sources.
func (d *Dataplane) closeObjects() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	if d.migration != nil {
		errs = append(errs, d.migration.Close())
		d.migration = nil
	}
	if d.altProg != nil {
		errs = append(errs, d.altProg.Close())
		d.altProg = nil
	}
	errs = append(errs, d.objs.Close())
	return errors.Join(errs...)
}
