package dataplane

import (
	"fmt"
	"net/netip"
)

// BackendRef names a routable backend for the data path: a stable id
// (0..MaxBackends-1, never reused while flows reference it) and its IPv4
// address.
type BackendRef struct {
	ID uint32
	IP netip.Addr
}

// SetRoutable publishes the routable set used for new connections. The set
// is double buffered: the inactive slot is written first, then the config's
// active slot is flipped, so a packet never sees a half-written set.
// Existing pairs are not affected (seed "Backend changes").
func (d *Dataplane) SetRoutable(refs []BackendRef) error {
	if len(refs) > int(MaxBackends) {
		return fmt.Errorf("dataplane: %d routable backends exceed the limit of %d", len(refs), MaxBackends)
	}
	var set xlbBackendSet
	set.Count = uint32(len(refs))
	for i, r := range refs {
		if r.ID >= MaxBackends {
			return fmt.Errorf("dataplane: backend id %d out of range", r.ID)
		}
		if !r.IP.Is4() {
			return fmt.Errorf("dataplane: backend %s is not IPv4", r.IP)
		}
		set.Entries[i] = xlbBackendRef{IpBe: be32(r.IP), Id: r.ID}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return err
	}
	next := d.cfg.ActiveSet ^ 1
	if err := d.objs.XlbBackendSets.Update(next, &set, 0); err != nil {
		return fmt.Errorf("dataplane: write backend set: %w", err)
	}
	c := d.cfg
	c.ActiveSet = next
	return d.writeConfigLocked(c)
}
