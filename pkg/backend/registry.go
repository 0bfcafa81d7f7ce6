package backend

import (
	"fmt"
	"net/netip"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// registry hands out data-path backend ids (0..dataplane.MaxBackends-1). An
// id stays with its address while pairs may reference it, so pairs of a
// backend that left discovery keep their counters (DESIGN §3 "draining").
// Fresh ids are handed out first; once every id was handed out, the id of
// a departed backend that inUse says owns nothing any more is reused
// (issue 14: before, ids were never reused and the 1,025th distinct
// address was skipped).
type registry struct {
	byIP  map[netip.Addr]uint32
	byID  map[uint32]netip.Addr
	next  uint32
	inUse func(id uint32) bool
}

func newRegistry(inUse func(id uint32) bool) *registry {
	if inUse == nil {
		inUse = func(uint32) bool { return true }
	}
	return &registry{byIP: map[netip.Addr]uint32{}, byID: map[uint32]netip.Addr{}, inUse: inUse}
}

// id returns the id of ip, allocating one if needed. current holds the
// addresses discovered right now, whose ids are never reused. reused
// reports that the id belonged to old before: the caller resets the id's
// data-path state and forgets old.
func (r *registry) id(ip netip.Addr, current map[netip.Addr]bool) (id uint32, old netip.Addr, reused bool, err error) {
	if id, ok := r.byIP[ip]; ok {
		return id, netip.Addr{}, false, nil
	}
	if r.next < dataplane.MaxBackends {
		id := r.next
		r.next++
		r.byIP[ip], r.byID[id] = id, ip
		return id, netip.Addr{}, false, nil
	}
	for id := uint32(0); id < dataplane.MaxBackends; id++ {
		old, owned := r.byID[id]
		if owned && (current[old] || r.inUse(id)) {
			continue
		}
		if owned {
			delete(r.byIP, old)
		}
		r.byIP[ip], r.byID[id] = id, ip
		return id, old, owned, nil
	}
	return 0, netip.Addr{}, false, fmt.Errorf("all %d backend ids are in use", dataplane.MaxBackends)
}

// undoReuse gives ip's reused id back to old (the reset before the reuse
// failed).
func (r *registry) undoReuse(ip, old netip.Addr) {
	if id, ok := r.byIP[ip]; ok {
		delete(r.byIP, ip)
		r.byIP[old], r.byID[id] = id, old
	}
}

// adopt records the id a predecessor gave ip (Options.Known); fresh ids
// are then handed out above every adopted one.
func (r *registry) adopt(id uint32, ip netip.Addr) error {
	if id >= dataplane.MaxBackends {
		return fmt.Errorf("backend id %d out of range", id)
	}
	if have, ok := r.byIP[ip]; ok && have != id {
		return fmt.Errorf("address already has id %d", have)
	}
	if have, ok := r.byID[id]; ok && have != ip {
		return fmt.Errorf("id %d already belongs to %s", id, have)
	}
	r.byIP[ip], r.byID[id] = id, ip
	r.next = max(r.next, id+1)
	return nil
}
