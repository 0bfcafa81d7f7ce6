package dataplane

import (
	"errors"
	"fmt"
)

// PutFlows writes entries with BPF_MAP_UPDATE_BATCH (one update per entry
// where batch operations are unavailable). Only benchmarks use it: the
// maintenance benchmarks (pkg/maintenance bench_test.go) fill the flow map
// with millions of pairs directly. Unlike PutFlow it overwrites an
// existing entry: the kernel accepts no BPF_NOEXIST on batch updates. It
// returns how many entries were written; on error the entries before that
// count are in the map.
func (d *Dataplane) PutFlows(keys []FlowKey, values []FlowValue) (int, error) {
	if len(keys) != len(values) {
		return 0, errors.New("dataplane: PutFlows: keys and values differ in length")
	}
	if len(keys) == 0 {
		return 0, nil
	}
	n, err := updateAll(d, d.objs.XlbFlows, keys, values)
	if err != nil {
		return n, fmt.Errorf("dataplane: batch insert flows: %w", err)
	}
	return n, nil
}

// FlowMapMemlock is the kernel's estimate of the flow map's memory in
// bytes (the memlock field of its fdinfo, as bpftool map show prints it).
// The map is preallocated, so the figure does not depend on how full it is.
// Only benchmarks use it (pkg/maintenance bench_test.go: kernel bytes per
// pair).
func (d *Dataplane) FlowMapMemlock() (uint64, error) {
	info, err := d.objs.XlbFlows.Info()
	if err != nil {
		return 0, fmt.Errorf("dataplane: flow map info: %w", err)
	}
	m, ok := info.Memlock()
	if !ok {
		return 0, errors.New("dataplane: the kernel reports no memlock for the flow map")
	}
	return m, nil
}
