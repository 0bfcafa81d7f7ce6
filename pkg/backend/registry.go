package backend

import (
	"fmt"
)

// registry hands out data-path ids 0..max-1 to keys: backend ids to
// backend addresses, member ids to (service, address) members (Pool). An
// id stays with its key while pairs may reference it, so pairs of a
// backend that left discovery keep their counters (DESIGN §3 "draining").
// Fresh ids are handed out first; once every id was handed out, the id of
// a key that inUse says owns nothing any more is reused (issue 14:
// before, ids were never reused and the 1,025th distinct address was
// skipped).
type registry[K comparable] struct {
	what  string // "backend", "member": the ids' name in errors
	max   uint32
	byKey map[K]uint32
	byID  map[uint32]K
	next  uint32
	inUse func(id uint32) bool
}

func newRegistry[K comparable](what string, max uint32, inUse func(id uint32) bool) *registry[K] {
	if inUse == nil {
		inUse = func(uint32) bool { return true }
	}
	return &registry[K]{what: what, max: max, byKey: map[K]uint32{}, byID: map[uint32]K{}, inUse: inUse}
}

// id returns the id of k, allocating one if needed. current holds the
// keys discovered right now, whose ids are never reused. reused reports
// that the id belonged to old before: the caller resets the id's
// data-path state and forgets old.
func (r *registry[K]) id(k K, current func(K) bool) (id uint32, old K, reused bool, err error) {
	if id, ok := r.byKey[k]; ok {
		return id, old, false, nil
	}
	if r.next < r.max {
		id := r.next
		r.next++
		r.byKey[k], r.byID[id] = id, k
		return id, old, false, nil
	}
	for id := uint32(0); id < r.max; id++ {
		prev, owned := r.byID[id]
		if owned && (current != nil && current(prev) || r.inUse(id)) {
			continue
		}
		if owned {
			delete(r.byKey, prev)
		}
		r.byKey[k], r.byID[id] = id, k
		return id, prev, owned, nil
	}
	return 0, old, false, fmt.Errorf("all %d %s ids are in use", r.max, r.what)
}

// undoReuse gives k's reused id back to old (the reset before the reuse
// failed).
func (r *registry[K]) undoReuse(k, old K) {
	if id, ok := r.byKey[k]; ok {
		delete(r.byKey, k)
		r.byKey[old], r.byID[id] = id, old
	}
}

// adopt records the id a predecessor gave k (Options.Known); fresh ids
// are then handed out above every adopted one.
func (r *registry[K]) adopt(id uint32, k K) error {
	if id >= r.max {
		return fmt.Errorf("%s id %d out of range", r.what, id)
	}
	if have, ok := r.byKey[k]; ok && have != id {
		return fmt.Errorf("%v already has %s id %d", k, r.what, have)
	}
	if have, ok := r.byID[id]; ok && have != k {
		return fmt.Errorf("%s id %d already belongs to %v", r.what, id, have)
	}
	r.byKey[k], r.byID[id] = id, k
	r.next = max(r.next, id+1)
	return nil
}
