package backend

import (
	"fmt"
	"net/netip"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// registry hands out data-path backend ids (0..dataplane.MaxBackends-1). An
// id stays with its address for the life of the process, so pairs that
// still reference a backend that left discovery keep their counters (DESIGN
// §3 "draining"). When every id is taken, ids of departed backends that own
// no flows are reused.
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
// addresses discovered right now, whose ids must never be reused.
func (r *registry) id(ip netip.Addr, current map[netip.Addr]bool) (uint32, error) {
	if id, ok := r.byIP[ip]; ok {
		return id, nil
	}
	if r.next < dataplane.MaxBackends {
		id := r.next
		r.next++
		r.byIP[ip], r.byID[id] = id, ip
		return id, nil
	}
	for id := uint32(0); id < dataplane.MaxBackends; id++ {
		old := r.byID[id]
		if current[old] || r.inUse(id) {
			continue
		}
		delete(r.byIP, old)
		r.byIP[ip], r.byID[id] = id, ip
		return id, nil
	}
	return 0, fmt.Errorf("all %d backend ids are in use", dataplane.MaxBackends)
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
