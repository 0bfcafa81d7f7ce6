// Package dataplane loads the XLB XDP program (bpf/xlb.c, compiled by bpf2go),
// attaches it to interfaces and gives typed access to its maps. It is the
// only package that touches BPF objects; only pkg/flow deletes flow entries.
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
	// (flow_table.max_connections); the map gets two entries per pair.
	MaxConnections uint32
	// RandomSNATCursors starts every backend's SNAT port cursor at a
	// random point of the range instead of its start. The daemon sets it:
	// a restarted instance would otherwise hand out the ports its
	// predecessor just used toward each backend, whose 4-tuples the
	// backends may still hold (TIME_WAIT, or connections moved away by a
	// drain), and each such SYN meets a challenge ACK and a retransmit.
	// Packet fixtures leave it off for deterministic ports.
	RandomSNATCursors bool
}

// Dataplane owns the loaded program and maps. Methods are safe for
// concurrent use.
type Dataplane struct {
	objs xlbObjects

	mu       sync.Mutex
	cfg      xlbXlbConfig
	clockMu  sync.Mutex
	attached map[string]*Attachment
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
	spec, err := loadXlb()
	if err != nil {
		return nil, err
	}
	spec.Maps[xlbMapXlbFlows].MaxEntries = 2 * opts.MaxConnections
	d := &Dataplane{attached: map[string]*Attachment{}}
	if err := spec.LoadAndAssign(&d.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("dataplane: verifier rejected the program: %+v", ve)
		}
		return nil, fmt.Errorf("dataplane: load: %w", err)
	}
	if opts.RandomSNATCursors {
		if err := d.seedSNATCursors(); err != nil {
			d.objs.Close()
			return nil, err
		}
	}
	return d, nil
}

// seedSNATCursors writes a random start into every backend's SNAT cursor.
func (d *Dataplane) seedSNATCursors() error {
	keys := make([]uint32, MaxBackends)
	vals := make([]uint32, MaxBackends)
	for i := range keys {
		keys[i], vals[i] = uint32(i), rand.Uint32()
	}
	if _, err := d.objs.XlbSnatCursors.BatchUpdate(keys, vals, nil); err != nil {
		return fmt.Errorf("dataplane: seed SNAT cursors: %w", err)
	}
	return nil
}

// Program returns the XDP program (for BPF_PROG_TEST_RUN in tests and benchmarks).
func (d *Dataplane) Program() *ebpf.Program { return d.objs.XlbXdp }

// FlowMap returns the raw flow map. Only pkg/flow and tests use it.
func (d *Dataplane) FlowMap() *ebpf.Map { return d.objs.XlbFlows }

// FlowCapacity is the flow map's max_entries (two per connection pair).
func (d *Dataplane) FlowCapacity() uint32 { return d.objs.XlbFlows.MaxEntries() }

// Close detaches every interface and releases the program and maps.
func (d *Dataplane) Close() error {
	errs := []error{d.DetachAll()}
	errs = append(errs, d.objs.Close())
	return errors.Join(errs...)
}
