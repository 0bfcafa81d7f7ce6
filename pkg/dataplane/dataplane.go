// Package dataplane loads the XLB XDP program (bpf/xlb.c, compiled by bpf2go),
// attaches it to interfaces and gives typed access to its maps. It is the
// only package that touches BPF objects; only pkg/maintenance removes flow
// entries, through the reaper (Reap).
package dataplane

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
)

// Options shape the loaded objects.
type Options struct {
	// MaxConnections is the number of connection pairs the flow map holds
	// (flow_table.max_connections); the map gets EntriesPerPair entries
	// per pair.
	MaxConnections uint32
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
	// StaleXDP names XDP programs a crashed predecessor attached through
	// netlink (interface name → program id, from the host settings
	// journal): Attach replaces such a program instead of refusing the
	// interface as taken.
	StaleXDP map[string]uint32
}

// Dataplane owns the loaded program and maps. Methods are safe for
// concurrent use.
type Dataplane struct {
	objs xlbObjects

	mu       sync.Mutex
	cfg      xlbXlbConfig
	clockMu  sync.Mutex
	attached map[string]*Attachment
	features Features          // guarded by mu
	staleXDP map[string]uint32 // Options.StaleXDP

	closeRing bool // close events go through the ring buffer (else the per-CPU queues)
	reapMu    sync.Mutex
	reapBuf   xlbReapBatch // guarded by reapMu
}

// Load loads the XDP program and creates its maps. It does not attach.
// Errors carry the verifier log when the kernel rejects the program.
func Load(opts Options) (*Dataplane, error) {
	if opts.MaxConnections == 0 {
		return nil, errors.New("dataplane: MaxConnections must be at least 1")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("dataplane: remove memlock limit: %w", err)
	}
	d := &Dataplane{attached: map[string]*Attachment{}, staleXDP: opts.StaleXDP}
	d.probeFeatures(opts.Disable)
	spec, err := loadXlb()
	if err != nil {
		return nil, err
	}
	spec.Maps[xlbMapXlbFlows].MaxEntries = EntriesPerPair * opts.MaxConnections
	if err := d.chooseCloseEvents(spec); err != nil {
		return nil, err
	}
	if err := spec.LoadAndAssign(&d.objs, nil); err != nil {
		return nil, requiredError(err)
	}
	// BPF_PROG_TEST_RUN is how the daemon reads the data path's clock.
	if _, _, err := d.clockSample(); err != nil {
		d.objs.Close()
		return nil, fmt.Errorf("dataplane: required kernel feature BPF_PROG_TEST_RUN of an XDP program (the data path's clock) was refused: %w%s", err, policyHint(err))
	}
	if opts.RandomSNATCursors {
		if err := d.seedSNATCursors(); err != nil {
			d.objs.Close()
			return nil, err
		}
	}
	return d, nil
}

// chooseCloseEvents points the data path at the ring buffer when the host
// allows it, else at the per-CPU queues: close_ring_on is a constant, so
// the verifier never visits the other branch, and a refused ring buffer
// map is replaced by a one-slot array that nothing uses.
func (d *Dataplane) chooseCloseEvents(spec *ebpf.CollectionSpec) error {
	d.closeRing = d.featureOn(FeatureRingBuf)
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
	keys := make([]uint32, MaxBackends)
	vals := make([]uint32, MaxBackends)
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

// Close detaches every interface and releases the program and maps.
func (d *Dataplane) Close() error {
	errs := []error{d.DetachAll()}
	errs = append(errs, d.objs.Close())
	return errors.Join(errs...)
}
