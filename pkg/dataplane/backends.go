package dataplane

import (
	"fmt"
	"net/netip"
)

// BackendRef names a routable backend for the data path: a stable id
// (0..MaxBackends-1, never reused while flows reference it), its IPv4
// address and its own port. Port is what mappings without a remote port
// (PortMap.Remote 0: remote_port left to discovery, e.g. the
// EndpointSlice's port) connect to; mappings with one ignore it. 0: the
// backend has none.
type BackendRef struct {
	ID   uint32
	IP   netip.Addr
	Port uint16
}

// SetRoutable publishes the routable set used for new connections. The set
// is double buffered: the inactive slot is written first, then the config's
// active slot is flipped, so a packet never sees a half-written set.
// Existing pairs are not affected (seed "Backend changes"). It refuses a
// set with a backend of Port 0 while the config has a mapping without a
// remote port (Configure): new connections of that mapping would have no
// port to go to.
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
		set.Entries[i] = xlbBackendRef{IpBe: be32(r.IP), Id: uint16(r.ID), PortBe: be16(r.Port)}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return err
	}
	if local, ok := d.portlessMappingLocked(); ok {
		for _, r := range refs {
			if r.Port == 0 {
				return fmt.Errorf("dataplane: backend id %d (%s) has no port, and listen port %d has no remote port to use instead", r.ID, r.IP, local)
			}
		}
	}
	next := d.cfg.ActiveSet ^ 1
	if err := d.objs.XlbBackendSets.Update(next, &set, 0); err != nil {
		return fmt.Errorf("dataplane: write backend set: %w", err)
	}
	c := d.cfg
	c.ActiveSet = next
	return d.writeConfigLocked(c)
}

// Routable returns the routable set the data path holds now, ordered as
// written: after a Load that adopted pins (a hand-off or a restart after a
// crash), the predecessor's last one until this process publishes its own
// (issue 28: it keeps serving while the provider cannot sync). Empty when
// fresh.
func (d *Dataplane) Routable() ([]BackendRef, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return nil, err
	}
	var set xlbBackendSet
	if err := d.objs.XlbBackendSets.Lookup(d.cfg.ActiveSet, &set); err != nil {
		return nil, fmt.Errorf("dataplane: read the routable set: %w", err)
	}
	refs := make([]BackendRef, 0, min(set.Count, MaxBackends))
	for _, e := range set.Entries[:min(set.Count, MaxBackends)] {
		refs = append(refs, BackendRef{ID: uint32(e.Id), IP: addrFromBE32(e.IpBe), Port: portFromBE16(e.PortBe)})
	}
	return refs, nil
}

// portlessMappingLocked returns the local port of the config's first
// mapping without a remote port. Callers hold d.mu.
func (d *Dataplane) portlessMappingLocked() (uint16, bool) {
	for _, p := range d.cfg.Ports[:min(int(d.cfg.Nports), MaxPorts)] {
		if p.RemotePortBe == 0 {
			return portFromBE16(p.LocalPortBe), true
		}
	}
	return 0, false
}
