package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ErrNotFound is returned when a flow key has no entry.
var ErrNotFound = errors.New("flow entry not found")

// LookupFlow reads one flow entry; ErrNotFound when k has none.
func (d *Dataplane) LookupFlow(k FlowKey) (FlowValue, error) {
	var v FlowValue
	err := d.objs.XlbFlows.Lookup(&k, &v)
	return v, flowError(err, "lookup", k)
}

// PutFlow inserts an entry that must not exist yet (BPF_NOEXIST). Used by
// tests and benchmarks to fill the map directly.
func (d *Dataplane) PutFlow(k FlowKey, v FlowValue) error {
	if err := d.objs.XlbFlows.Update(&k, &v, ebpf.UpdateNoExist); err != nil {
		return fmt.Errorf("dataplane: insert %s: %w", k, err)
	}
	return nil
}

// TakeFlow atomically removes an entry and returns what it held
// (BPF_MAP_LOOKUP_AND_DELETE_ELEM). Tests use it to build broken states;
// XLB itself removes entries only through the reaper (Reap).
func (d *Dataplane) TakeFlow(k FlowKey) (FlowValue, error) {
	var v FlowValue
	err := d.objs.XlbFlows.LookupAndDelete(&k, &v)
	return v, flowError(err, "take", k)
}

// flowError is ErrNotFound for a missing key, and err wrapped with the
// operation and the key otherwise (nil stays nil).
func flowError(err error, op string, k FlowKey) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ebpf.ErrKeyNotExist):
		return ErrNotFound
	}
	return fmt.Errorf("dataplane: %s %s: %w", op, k, err)
}

// FlowWalk reads the flow map a slice at a time and resumes where it
// stopped: with BPF_MAP_LOOKUP_BATCH, whose cursor is a bucket position, or
// key by key (BPF_MAP_GET_NEXT_KEY and a lookup each) where batch
// operations are unavailable (Features, FeatureBatchOps). A pass ends when
// the end of the map is reached; the next read starts a new pass. A walk
// is not a snapshot: entries created or deleted during a pass may or may
// not be seen. Keys and Values are reused between calls.
type FlowWalk struct {
	m      *ebpf.Map
	batch  bool
	cursor ebpf.MapBatchCursor
	next   *FlowKey // per-key path: the first key of the next read; nil at a pass start
	Keys   []FlowKey
	Values []FlowValue
}

// NewFlowWalk starts a walk that reads at most chunk entries per Next.
func (d *Dataplane) NewFlowWalk(chunk int) *FlowWalk {
	return newFlowWalk(d.objs.XlbFlows, d.featureOn(FeatureBatchOps), chunk)
}

// newFlowWalk is a walk of m, with batch reads when batch is set.
func newFlowWalk(m *ebpf.Map, batch bool, chunk int) *FlowWalk {
	return &FlowWalk{m: m, batch: batch, Keys: make([]FlowKey, chunk), Values: make([]FlowValue, chunk)}
}

// Next reads the next entries of the pass into Keys and Values and returns
// how many are valid. end reports that the pass reached the end of the map
// with this read; the next call starts a new pass.
//
// On the per-key path a read resumes from a key it has not returned yet;
// when that key was removed meanwhile, the kernel starts again from the
// first key and the pass takes longer.
func (w *FlowWalk) Next() (n int, end bool, err error) {
	if w.batch {
		n, err := w.m.BatchLookup(&w.cursor, w.Keys, w.Values, nil)
		for errors.Is(err, unix.ENOSPC) && n == 0 {
			// A hash bucket holds more entries than the chunk: the
			// kernel returns whole buckets, so grow and read again.
			w.Keys = make([]FlowKey, 2*len(w.Keys))
			w.Values = make([]FlowValue, 2*len(w.Values))
			n, err = w.m.BatchLookup(&w.cursor, w.Keys, w.Values, nil)
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			w.cursor = ebpf.MapBatchCursor{}
			return n, true, nil
		}
		if err != nil {
			w.cursor = ebpf.MapBatchCursor{}
			return 0, false, fmt.Errorf("dataplane: batch read flows: %w", err)
		}
		return n, false, nil
	}
	for n < len(w.Keys) {
		if w.next == nil { // a pass starts
			first := new(FlowKey)
			if err := w.m.NextKey(nil, first); errors.Is(err, ebpf.ErrKeyNotExist) {
				return n, true, nil
			} else if err != nil {
				return n, false, fmt.Errorf("dataplane: read flows key by key: %w", err)
			}
			w.next = first
		}
		k := *w.next
		err := w.m.Lookup(&k, &w.Values[n])
		if err == nil {
			w.Keys[n] = k
			n++
		} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, false, fmt.Errorf("dataplane: read flows key by key: %w", err)
		}
		if err := w.m.NextKey(&k, w.next); errors.Is(err, ebpf.ErrKeyNotExist) {
			w.next = nil
			return n, true, nil
		} else if err != nil {
			w.next = nil
			return n, false, fmt.Errorf("dataplane: read flows key by key: %w", err)
		}
	}
	return n, false, nil
}

// SNATCursorMap returns the per-backend SNAT port cursors (tests).
func (d *Dataplane) SNATCursorMap() *ebpf.Map { return d.objs.XlbSnatCursors }
