package dataplane

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// BackendRef names a routable backend of a service for the data path: its
// backend id (0..MaxBackends-1, one per backend address, never reused
// while flows reference it: the SNAT port space, cursor and timestamp
// state), its member id (0..MaxMembers-1, one per (service, backend
// address): the per-backend counter cells), its IPv4 address and its own
// port. Port is what mappings without a remote port (PortMap.Remote 0:
// remote_port left to discovery, e.g. the EndpointSlice's port) connect
// to; mappings with one ignore it. 0: the backend has none.
type BackendRef struct {
	ID     uint32
	Member uint32
	IP     netip.Addr
	Port   uint16
	// Name and Weight are what the table schedulers build from
	// (pkg/sched Member): Maglev orders and permutes by Name, so every
	// host builds the same table; Weight is 1..256. Only userspace keeps
	// them (round robin ignores both).
	Name   string
	Weight uint16
}

// SetRoutable publishes the routable set service svc uses for new
// connections. The set is double buffered: the service's inactive slot
// is written first, then its record's active slot is flipped, so a packet
// never sees a half-written set. Existing pairs are not affected (seed
// "Backend changes"). It refuses a service that is not configured, and a
// set with a backend of Port 0 while the service has a mapping without a
// remote port (Configure): new connections of that mapping would have no
// port to go to. A weighted round robin or Maglev service's table is
// built from the refs' names and weights (pkg/sched Build, refs in set
// order) into a new schedule, put beside the set before the flip
// (schedule.go): a weight outside 1..256 or two refs of one name and
// address are refused.
func (d *Dataplane) SetRoutable(svc uint16, refs []BackendRef) error {
	if len(refs) > int(MaxBackends) {
		return fmt.Errorf("dataplane: %d routable backends exceed the limit of %d", len(refs), MaxBackends)
	}
	for _, r := range refs {
		if r.ID >= MaxBackends {
			return fmt.Errorf("dataplane: backend id %d out of range", r.ID)
		}
		if r.Member >= uint32(MaxMembers) {
			return fmt.Errorf("dataplane: member id %d of backend id %d out of range", r.Member, r.ID)
		}
		if !r.IP.Is4() {
			return fmt.Errorf("dataplane: backend %s is not IPv4", r.IP)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return err
	}
	rec, err := d.serviceLocked(svc)
	if err != nil {
		return err
	}
	if local, ok := portlessMapping(&rec); ok {
		for _, r := range refs {
			if r.Port == 0 {
				return fmt.Errorf("dataplane: backend id %d (%s) has no port, and listen port %d of service %d has no remote port to use instead", r.ID, r.IP, local, svc)
			}
		}
	}
	return d.publishLocked(svc, rec, refs)
}

// publishLocked writes refs (checked) as service svc's inactive routable
// set, with the table of its scheduler beside it (schedule.go), and flips
// the service's record rec to that set. Callers hold d.mu.
func (d *Dataplane) publishLocked(svc uint16, rec xlbService, refs []BackendRef) error {
	var set xlbBackendSet
	set.Count = uint32(len(refs))
	for i, r := range refs {
		set.Entries[i] = xlbBackendRef{IpBe: be32(r.IP), Id: uint16(r.ID), PortBe: be16(r.Port), Member: uint16(r.Member)}
	}
	tbl, s, err := d.buildScheduleLocked(svc, rec, refs)
	if err != nil {
		return err
	}
	if tbl != nil {
		defer tbl.Close() // xlb_sched holds it once put
	}
	next := rec.ActiveSet&1 ^ 1
	slot := uint32(svc)*2 + uint32(next)
	if err := d.objs.XlbBackendSets.Update(slot, &set, 0); err != nil {
		return fmt.Errorf("dataplane: write the routable set of service %d: %w", svc, err)
	}
	if tbl != nil {
		if err := d.objs.XlbSched.Put(slot, tbl); err != nil {
			return fmt.Errorf("dataplane: write the schedule of service %d: %w", svc, err)
		}
	} else if err := d.objs.XlbSched.Delete(slot); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("dataplane: drop the schedule of routable set %d of service %d: %w", slot, svc, err)
	}
	rec.ActiveSet = next
	if err := d.objs.XlbServices.Update(uint32(svc), &rec, 0); err != nil {
		return fmt.Errorf("dataplane: flip the routable set of service %d: %w", svc, err)
	}
	if d.svcs != nil {
		d.svcs[svc] = rec
	}
	st := d.schedStateLocked(svc)
	st.refs, st.cur, st.read = schedRefs(refs), s, true
	return nil
}

// Routable returns the routable set the data path holds now for service
// svc, ordered as written: after a Load that adopted pins (a hand-off or
// a restart after a crash), the predecessor's last one until this process
// publishes its own (issue 28: it keeps serving while the provider cannot
// sync). Empty when fresh.
func (d *Dataplane) Routable(svc uint16) ([]BackendRef, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return nil, err
	}
	rec, err := d.serviceLocked(svc)
	if err != nil {
		return nil, err
	}
	var set xlbBackendSet
	if err := d.objs.XlbBackendSets.Lookup(uint32(svc)*2+uint32(rec.ActiveSet&1), &set); err != nil {
		return nil, fmt.Errorf("dataplane: read the routable set of service %d: %w", svc, err)
	}
	return setRefs(&set), nil
}

// setRefs is the backends of set.
func setRefs(set *xlbBackendSet) []BackendRef {
	refs := make([]BackendRef, 0, min(set.Count, MaxBackends))
	for _, e := range set.Entries[:min(set.Count, MaxBackends)] {
		refs = append(refs, BackendRef{ID: uint32(e.Id), Member: uint32(e.Member), IP: addrFromBE32(e.IpBe), Port: portFromBE16(e.PortBe)})
	}
	return refs
}

// portlessMapping returns the local port of the service's first mapping
// without a remote port.
func portlessMapping(r *xlbService) (uint16, bool) {
	for _, p := range r.Ports[:min(int(r.Nports), MaxPorts)] {
		if p.RemotePortBe == 0 {
			return portFromBE16(p.LocalPortBe), true
		}
	}
	return 0, false
}
