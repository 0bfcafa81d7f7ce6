// Package floor loads the benchmark floors; only benchmarks and their
// harnesses import it. The floor program (bpf/floor.c, this file) is the
// least work any stateful NAT does per packet: parse, one hash lookup on
// the 5-tuple, rewrite addresses, ports and MACs with incremental
// checksums, XDP_TX; pkg/dataplane's benchmarks report XLB's cost as a
// ratio to it. The floor balancer (bpf/floor_lb.c, balancer.go) is a
// stateless XDP full NAT for the lab's balancer namespace: what XLB would
// cost if its state were free, run as a peer of XLB in the lab.
package floor

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// Floor is the loaded floor program and its flow map (1,024 entries).
type Floor struct {
	objs floorObjects
}

// Load loads the floor program and its flow map.
func Load() (*Floor, error) {
	f := &Floor{}
	if err := loadFloorObjects(&f.objs, nil); err != nil {
		return nil, fmt.Errorf("floor: load: %w", err)
	}
	return f, nil
}

// Program returns the floor XDP program.
func (f *Floor) Program() *ebpf.Program { return f.objs.FloorXdp }

// Put installs for key k the recipe of XLB's entry v and the MACs of its
// next hop, as a floor recipe: XLB's rewrite with the MACs in the entry
// itself (bpf/floor.c struct floor_recipe). The floor ignores the
// direction, so the key is stored with Dir 0.
func (f *Floor) Put(k dataplane.FlowKey, v dataplane.FlowValue, smac, dmac [6]byte) error {
	k.Dir = 0
	r := floorFloorRecipe{
		SaddrBe: v.SaddrBe, DaddrBe: v.DaddrBe, SportBe: v.SportBe, DportBe: v.DportBe,
		CsumIp: v.CsumIp, CsumL4: v.CsumL4, Smac: smac, Dmac: dmac,
	}
	if err := f.objs.FloorFlows.Update(&k, &r, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("floor: insert %s: %w", k, err)
	}
	return nil
}

// Close releases the program and its map.
func (f *Floor) Close() error { return f.objs.Close() }
