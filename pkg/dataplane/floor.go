package dataplane

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// Floor is the benchmark floor program (bpf/floor.c): parse, one hash
// lookup on the 5-tuple, rewrite addresses, ports and MACs with incremental
// checksums, XDP_TX. Benchmarks report XLB's cost as a ratio to it.
type Floor struct {
	objs floorObjects
}

// LoadFloor loads the floor program and its flow map (1,024 entries).
func LoadFloor() (*Floor, error) {
	f := &Floor{}
	if err := loadFloorObjects(&f.objs, nil); err != nil {
		return nil, fmt.Errorf("dataplane: load floor: %w", err)
	}
	return f, nil
}

// Program returns the floor XDP program.
func (f *Floor) Program() *ebpf.Program { return f.objs.FloorXdp }

// Put installs a recipe for key (the floor ignores Dir, so key.Dir must be 0).
func (f *Floor) Put(k FlowKey, v FlowValue) error {
	k.Dir = 0
	return f.objs.FloorFlows.Update(&k, &v, ebpf.UpdateAny)
}

// Close releases the floor's objects.
func (f *Floor) Close() error { return f.objs.Close() }
