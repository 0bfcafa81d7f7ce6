package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

var errKeyNotExist = ebpf.ErrKeyNotExist

// ErrNotFound is returned when a flow key has no entry.
var ErrNotFound = errors.New("flow entry not found")

// LookupFlow reads one flow entry.
func (d *Dataplane) LookupFlow(k FlowKey) (FlowValue, error) {
	var v FlowValue
	err := d.objs.XlbFlows.Lookup(&k, &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return v, ErrNotFound
	}
	if err != nil {
		return v, fmt.Errorf("dataplane: lookup %s: %w", k, err)
	}
	return v, nil
}

// PutFlow inserts an entry that must not exist yet (BPF_NOEXIST). Used by
// tests and benchmarks to fill the map directly, and by pkg/flow to restore
// an entry it took out by mistake.
func (d *Dataplane) PutFlow(k FlowKey, v FlowValue) error {
	if err := d.objs.XlbFlows.Update(&k, &v, ebpf.UpdateNoExist); err != nil {
		return fmt.Errorf("dataplane: insert %s: %w", k, err)
	}
	return nil
}

// TakeFlow atomically removes an entry and returns what it held
// (BPF_MAP_LOOKUP_AND_DELETE_ELEM), so the caller can check the generation
// of what it removed and put back a pair created in the meantime.
func (d *Dataplane) TakeFlow(k FlowKey) (FlowValue, error) {
	var v FlowValue
	err := d.objs.XlbFlows.LookupAndDelete(&k, &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return v, ErrNotFound
	}
	if err != nil {
		return v, fmt.Errorf("dataplane: take %s: %w", k, err)
	}
	return v, nil
}

// FlowBatch reads the flow map in chunks: with BPF_MAP_LOOKUP_BATCH, or
// key by key (BPF_MAP_GET_NEXT_KEY and a lookup each) where batch
// operations are unavailable (Features, FeatureBatchOps). Keys and Values
// are reused between calls to Next.
type FlowBatch struct {
	m      *ebpf.Map
	cursor ebpf.MapBatchCursor
	iter   *ebpf.MapIterator // per-key path; nil with batch lookups
	done   bool
	Keys   []FlowKey
	Values []FlowValue
}

// NewFlowBatch starts a read with chunks of size entries.
func (d *Dataplane) NewFlowBatch(size int) *FlowBatch {
	b := &FlowBatch{m: d.objs.XlbFlows, Keys: make([]FlowKey, size), Values: make([]FlowValue, size)}
	if !d.featureOn(FeatureBatchOps) {
		b.iter = b.m.Iterate()
	}
	return b
}

// Next reads the next chunk and returns how many entries of Keys/Values are
// valid; 0 with a nil error means the map has been read to the end. The read
// is not a snapshot: entries created or deleted meanwhile may or may not appear.
func (b *FlowBatch) Next() (int, error) {
	if b.done {
		return 0, nil
	}
	if b.iter != nil {
		n := 0
		for n < len(b.Keys) && b.iter.Next(&b.Keys[n], &b.Values[n]) {
			n++
		}
		if n < len(b.Keys) {
			b.done = true
			if err := b.iter.Err(); err != nil {
				return 0, fmt.Errorf("dataplane: read flows key by key: %w", err)
			}
		}
		return n, nil
	}
	n, err := b.m.BatchLookup(&b.cursor, b.Keys, b.Values, nil)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		b.done = true
		return n, nil
	}
	if err != nil {
		return 0, fmt.Errorf("dataplane: batch read flows: %w", err)
	}
	return n, nil
}

// SNATCursorMap returns the per-backend SNAT port cursors (tests).
func (d *Dataplane) SNATCursorMap() *ebpf.Map { return d.objs.XlbSnatCursors }
