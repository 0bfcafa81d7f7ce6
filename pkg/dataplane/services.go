package dataplane

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane/pins"
)

// Services (layout 9; DESIGN §9). A service is a listen address, a
// protocol and its port mappings, with its own routable set and
// round-robin position. The data path knows a service by its id
// (0..MaxServices-1): the record in xlb_services (bpf/layout.h struct
// service), its two routable set slots in xlb_backend_sets (id*2 and
// id*2+1), its position in xlb_rr, and flow entries' ServiceId. Configure
// assigns the ids by name; xlb_listen maps each (address, protocol, local
// port) of a serving service to its id, and the listen prefilter of the
// config holds a bit for every serving or draining service's address and
// for every address an earlier Configure gave one (bits are only added:
// a service that moves to another address keeps its pairs to the former).

// ServiceState is a service record's state (bpf/layout.h enum
// xlb_service_state).
type ServiceState uint8

const (
	// ServiceFree: the id is unused.
	ServiceFree = ServiceState(xlbXlbServiceStateXLB_SVC_FREE)
	// ServiceServing: in the listen map; its SYNs create pairs.
	ServiceServing = ServiceState(xlbXlbServiceStateXLB_SVC_SERVING)
	// ServiceDraining: removed from the config; its SYNs pass to the
	// kernel, its pairs flow on until they end (FreeService).
	ServiceDraining = ServiceState(xlbXlbServiceStateXLB_SVC_DRAINING)
)

func (s ServiceState) String() string {
	switch s {
	case ServiceFree:
		return "free"
	case ServiceServing:
		return "serving"
	case ServiceDraining:
		return "draining"
	}
	return fmt.Sprintf("ServiceState(%d)", uint8(s))
}

// Protocols and schedulers Configure takes (DESIGN §9; the others come with
// issues 30 and 31).
const (
	ProtoTCP              = "tcp"
	ProtoUDP              = "udp"
	SchedulerRoundRobin   = "round_robin"
	SchedulerWeightedRR   = "weighted_round_robin"
	SchedulerMaglev       = "maglev"
	MaglevHashFiveTuple   = "five_tuple"
	MaglevHashClientIP    = "client_ip"
	ipprotoTCP            = 6
	ipprotoUDP            = 17
	afInet                = 2
	serviceMigratedFlag   = uint16(xlbXlbServiceFlagsXLB_SVC_MIGRATED)
	serviceClientIPFlag   = uint16(xlbXlbServiceFlagsXLB_SVC_HASH_CLIENT_IP)
	schedulerRoundRobinID = uint8(xlbXlbSchedulerXLB_SCHED_ROUND_ROBIN)
	schedulerWeightedRRID = uint8(xlbXlbSchedulerXLB_SCHED_WEIGHTED_RR)
	schedulerMaglevID     = uint8(xlbXlbSchedulerXLB_SCHED_MAGLEV)
)

// ServiceSettings is one service as Configure takes it.
type ServiceSettings struct {
	// Name is the key Configure matches the data path's services by:
	// its first ServiceNameLen bytes (the record holds them; DESIGN §9
	// names have at most that many, a top-level form's one service may
	// have more) are unique among the settings' services.
	Name string
	// Listen is the service's address: IPv4 (IPv6 comes with issue 32).
	Listen netip.Addr
	// Proto is ProtoTCP ("" means it) or ProtoUDP.
	Proto string
	// Ports are 1..MaxPorts mappings, local ports non-zero.
	Ports []PortMap
	// Scheduler is SchedulerRoundRobin ("" means it), SchedulerWeightedRR
	// or SchedulerMaglev.
	Scheduler string
	// MaglevHash is MaglevHashFiveTuple ("" means it) or
	// MaglevHashClientIP; only for SchedulerMaglev.
	MaglevHash string
	// UDPUnrepliedMax is a UDP service's cap on its pairs without a reply
	// (struct service udp_unreplied_max), >= 1; 0 for TCP.
	UDPUnrepliedMax uint32
	// TableSize is the Maglev table's size (entries; pkg/sched
	// ValidMaglevSize), resolved by the config; 0 for the other
	// schedulers.
	TableSize uint32
}

// ServiceRef is a service the data path holds (a record of xlb_services).
type ServiceRef struct {
	ID     uint16
	Name   string // empty on a Migrated record no Configure has named yet
	State  ServiceState
	Listen netip.Addr
	Proto  string
	Ports  []PortMap
	// Migrated: layout 8's one service, as the migration to layout 9 made
	// it; its pairs' member ids are their backend ids.
	Migrated bool
}

// validateServices checks Settings.Services: their number, names, each
// one's address, protocol, scheduler and ports, and that no two share an
// (address, protocol, local port).
func validateServices(svcs []ServiceSettings) error {
	if len(svcs) == 0 || len(svcs) > MaxServices {
		return fmt.Errorf("dataplane: %d services, want 1..%d", len(svcs), MaxServices)
	}
	type listen struct {
		addr  netip.Addr
		proto string
		port  uint16
	}
	seen := map[listen]string{}
	names := map[string]bool{}
	for _, s := range svcs {
		if s.Name == "" {
			return errors.New("dataplane: a service without a name")
		}
		if names[nameKey(s.Name)] {
			return fmt.Errorf("dataplane: service %q twice (names are told apart by their first %d bytes)", s.Name, ServiceNameLen)
		}
		names[nameKey(s.Name)] = true
		if !s.Listen.Is4() {
			return fmt.Errorf("dataplane: service %q: the listen address %s is not IPv4", s.Name, s.Listen)
		}
		switch proto(s.Proto) {
		case ProtoTCP:
			if s.UDPUnrepliedMax != 0 {
				return fmt.Errorf("dataplane: service %q: udp_unreplied_max %d on a %s service, want 0", s.Name, s.UDPUnrepliedMax, ProtoTCP)
			}
		case ProtoUDP:
			if s.UDPUnrepliedMax == 0 {
				return fmt.Errorf("dataplane: service %q: udp_unreplied_max 0, want at least 1", s.Name)
			}
		default:
			return fmt.Errorf("dataplane: service %q: protocol %q, want %s or %s", s.Name, s.Proto, ProtoTCP, ProtoUDP)
		}
		if err := validateScheduler(s); err != nil {
			return err
		}
		if len(s.Ports) == 0 || len(s.Ports) > MaxPorts {
			return fmt.Errorf("dataplane: service %q: %d port mappings, want 1..%d", s.Name, len(s.Ports), MaxPorts)
		}
		for _, p := range s.Ports {
			if p.Local == 0 {
				return fmt.Errorf("dataplane: service %q: a port mapping of local port 0", s.Name)
			}
			l := listen{s.Listen, proto(s.Proto), p.Local}
			if other, ok := seen[l]; ok {
				return fmt.Errorf("dataplane: services %q and %q both listen on %s/%s port %d", other, s.Name, s.Listen, l.proto, p.Local)
			}
			seen[l] = s.Name
		}
	}
	return nil
}

func proto(p string) string {
	if p == "" {
		return ProtoTCP
	}
	return p
}

// ipproto is protocol p's IP protocol number (struct service proto, the
// listen and flow keys' proto).
func ipproto(p string) uint8 {
	if proto(p) == ProtoUDP {
		return ipprotoUDP
	}
	return ipprotoTCP
}

// protoName is IP protocol number n as a Proto string.
func protoName(n uint8) string {
	if n == ipprotoUDP {
		return ProtoUDP
	}
	return ProtoTCP
}

// nameKey is what a record holds of name: its first ServiceNameLen bytes.
func nameKey(name string) string { return name[:min(len(name), ServiceNameLen)] }

// recordName is a record's name as a string.
func recordName(r *xlbService) string {
	b := make([]byte, 0, len(r.Name))
	for _, c := range r.Name {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// recordAddr is a record's IPv4 address.
func recordAddr(r *xlbService) netip.Addr {
	return netip.AddrFrom4([4]byte(r.Addr[:4]))
}

// assignServices gives each of svcs an id (DESIGN §9: services are
// matched by name): the id of the record of that name; for a record the
// migration from layout 8 made (XLB_SVC_MIGRATED, no name yet), the only
// service of svcs, or else the one on its address; else the lowest free
// id. recs are the records as the data path holds them.
func assignServices(recs *[MaxServices]xlbService, svcs []ServiceSettings) ([]uint16, error) {
	ids := make([]uint16, len(svcs))
	taken := map[uint16]bool{}
	byName := map[string]uint16{}
	var migrated []uint16
	for id := range recs {
		r := &recs[id]
		if ServiceState(r.State) == ServiceFree {
			continue
		}
		if n := recordName(r); n != "" {
			byName[n] = uint16(id)
		} else if r.Flags&serviceMigratedFlag != 0 {
			migrated = append(migrated, uint16(id))
		}
	}
	assigned := make([]bool, len(svcs))
	for i, s := range svcs {
		if id, ok := byName[nameKey(s.Name)]; ok {
			ids[i], assigned[i], taken[id] = id, true, true
		}
	}
	for _, id := range migrated {
		for i, s := range svcs {
			if assigned[i] {
				continue
			}
			if len(svcs) == 1 || recordAddr(&recs[id]) == s.Listen {
				ids[i], assigned[i], taken[id] = id, true, true
				break
			}
		}
	}
	next := 0
	for i, s := range svcs {
		if assigned[i] {
			continue
		}
		for next < MaxServices && (ServiceState(recs[next].State) != ServiceFree || taken[uint16(next)]) {
			next++
		}
		if next == MaxServices {
			return nil, fmt.Errorf("dataplane: no free service id for service %q: the data path holds %d services, serving and draining (a draining one's id is freed once its pairs are gone)", s.Name, MaxServices)
		}
		ids[i], taken[uint16(next)] = uint16(next), true
	}
	return ids, nil
}

// serviceRecord is s's record, serving, keeping old's routable set and
// migrated flag (old: the record of its id, FREE for a new one), with s's
// scheduler and, for Maglev on the client's address, the client_ip flag.
func serviceRecord(s ServiceSettings, old xlbService) xlbService {
	r := xlbService{State: uint8(ServiceServing), ActiveSet: old.ActiveSet & 1, Proto: ipproto(s.Proto), Family: afInet,
		Scheduler: schedulerID(s.Scheduler), Nports: uint8(len(s.Ports)), Flags: old.Flags & serviceMigratedFlag,
		UdpUnrepliedMax: s.UDPUnrepliedMax}
	if ServiceState(old.State) == ServiceFree {
		r.ActiveSet, r.Flags = 0, 0
	}
	if r.Scheduler == schedulerMaglevID && s.MaglevHash == MaglevHashClientIP {
		r.Flags |= serviceClientIPFlag
	}
	a := s.Listen.As4()
	copy(r.Addr[:], a[:])
	for i, p := range s.Ports {
		r.Ports[i] = xlbPortMap{LocalPortBe: be16(p.Local), RemotePortBe: be16(p.Remote)}
	}
	for i := range min(len(s.Name), len(r.Name)) {
		r.Name[i] = int8(s.Name[i])
	}
	return r
}

// serviceRef is record r of id as ServiceRef.
func serviceRef(id uint16, r *xlbService) ServiceRef {
	ref := ServiceRef{ID: id, Name: recordName(r), State: ServiceState(r.State), Listen: recordAddr(r), Proto: protoName(r.Proto),
		Migrated: r.Flags&serviceMigratedFlag != 0}
	for _, p := range r.Ports[:min(int(r.Nports), MaxPorts)] {
		ref.Ports = append(ref.Ports, PortMap{Local: portFromBE16(p.LocalPortBe), Remote: portFromBE16(p.RemotePortBe)})
	}
	return ref
}

// listenBit is the listen prefilter's bit of addr (bpf/listen.h
// listen_bit; pins.ListenBit, which the migration from layout 8 uses too).
func listenBit(addr netip.Addr) uint32 { return pins.ListenBit(be32(addr)) }

// listenFilter is the prefilter of recs added to prev: a bit for the
// address of every service that is not free, and every bit prev has (a
// pair may still be bound for an address a service left).
func listenFilter(prev [xlbXlbLimitsXLB_LISTEN_FILTER_WORDS]uint64, recs *[MaxServices]xlbService) (f [xlbXlbLimitsXLB_LISTEN_FILTER_WORDS]uint64) {
	f = prev
	for id := range recs {
		if ServiceState(recs[id].State) == ServiceFree {
			continue
		}
		b := listenBit(recordAddr(&recs[id]))
		f[b/64] |= 1 << (b % 64)
	}
	return f
}

// readServicesLocked reads every record of xlb_services. Callers hold d.mu.
func (d *Dataplane) readServicesLocked() (recs [MaxServices]xlbService, err error) {
	for id := range recs {
		if err := d.objs.XlbServices.Lookup(uint32(id), &recs[id]); err != nil {
			return recs, fmt.Errorf("dataplane: read service %d: %w", id, err)
		}
	}
	return recs, nil
}

// writeServicesLocked writes the records of recs that differ from old (all
// of them when old is nil), and keeps recs as this process's (d.svcs).
func (d *Dataplane) writeServicesLocked(old, recs *[MaxServices]xlbService) error {
	for id := range recs {
		if old != nil && recs[id] == old[id] {
			continue
		}
		if err := d.objs.XlbServices.Update(uint32(id), &recs[id], ebpf.UpdateExist); err != nil {
			return fmt.Errorf("dataplane: write service %d: %w", id, err)
		}
	}
	kept := *recs
	d.svcs = &kept
	return nil
}

// reclaimServicesLocked writes this process's service records and listen
// keys back (Reclaim), if it wrote any.
func (d *Dataplane) reclaimServicesLocked() error {
	if d.svcs == nil {
		return nil
	}
	recs := *d.svcs
	if err := d.writeServicesLocked(nil, &recs); err != nil {
		return err
	}
	return d.writeListenLocked(&recs)
}

// writeListenLocked makes xlb_listen hold the keys of the serving services
// of recs: those added or changed first, then the stale ones deleted.
func (d *Dataplane) writeListenLocked(recs *[MaxServices]xlbService) error {
	want := map[xlbListenKey]xlbListenValue{}
	for id := range recs {
		r := &recs[id]
		if ServiceState(r.State) != ServiceServing {
			continue
		}
		for _, p := range r.Ports[:min(int(r.Nports), MaxPorts)] {
			k := xlbListenKey{AddrBe: be32(recordAddr(r)), PortBe: p.LocalPortBe, Proto: r.Proto}
			want[k] = xlbListenValue{Service: uint16(id), RemotePortBe: p.RemotePortBe}
		}
	}
	m := d.objs.XlbListen
	var stale []xlbListenKey
	var k xlbListenKey
	var v xlbListenValue
	it := m.Iterate()
	for it.Next(&k, &v) {
		if w, ok := want[k]; !ok {
			stale = append(stale, k)
		} else if w == v {
			delete(want, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("dataplane: read the listen map: %w", err)
	}
	for k, v := range want {
		if err := m.Update(&k, &v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("dataplane: write listen key %s:%d: %w", addrFromBE32(k.AddrBe), portFromBE16(k.PortBe), err)
		}
	}
	for _, k := range stale {
		if err := m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("dataplane: delete listen key %s:%d: %w", addrFromBE32(k.AddrBe), portFromBE16(k.PortBe), err)
		}
	}
	return nil
}

// Services returns the services the data path holds, serving and
// draining, by id: after a Load from pins, the predecessor's until
// Configure.
func (d *Dataplane) Services() ([]ServiceRef, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return nil, err
	}
	recs, err := d.readServicesLocked()
	if err != nil {
		return nil, err
	}
	var out []ServiceRef
	for id := range recs {
		if ServiceState(recs[id].State) != ServiceFree {
			out = append(out, serviceRef(uint16(id), &recs[id]))
		}
	}
	return out, nil
}

// FreeService frees the id of a draining service (DESIGN §9): its record,
// both routable sets and its round-robin position are zeroed, its
// schedules dropped (its
// address keeps its prefilter bit: bits are only added). The caller
// guarantees that no pair of the service lives (a pair's ServiceId then
// names a free id, or the next service given it). Errors: an id out of
// range or of a service that is not draining, a map write.
func (d *Dataplane) FreeService(id uint16) error {
	if int(id) >= MaxServices {
		return fmt.Errorf("dataplane: free service %d: out of range (0..%d)", id, MaxServices-1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return err
	}
	recs, err := d.readServicesLocked()
	if err != nil {
		return err
	}
	if st := ServiceState(recs[id].State); st != ServiceDraining {
		return fmt.Errorf("dataplane: free service %d: it is %s, not draining", id, st)
	}
	old := recs
	recs[id] = xlbService{}
	if err := d.writeServicesLocked(&old, &recs); err != nil {
		return err
	}
	var empty xlbBackendSet
	for _, slot := range []uint32{uint32(id) * 2, uint32(id)*2 + 1} {
		if err := d.objs.XlbBackendSets.Update(slot, &empty, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("dataplane: free service %d: clear routable set %d: %w", id, slot, err)
		}
	}
	if err := d.objs.XlbRr.Update(uint32(id), uint64(0), ebpf.UpdateExist); err != nil {
		return fmt.Errorf("dataplane: free service %d: its round-robin position: %w", id, err)
	}
	// its UDP count and per-service counters: the id's next service starts at 0
	if err := d.objs.XlbUdpUnreplied.Update(uint32(id), uint64(0), ebpf.UpdateExist); err != nil {
		return fmt.Errorf("dataplane: free service %d: its UDP unreplied count: %w", id, err)
	}
	if err := zeroCells(d.objs.XlbSvcCounters, uint32(id)*uint32(xlbXlbLimitsXLB_SVC_COUNTERS), uint32(xlbXlbLimitsXLB_SVC_COUNTERS), d.featureOnLocked(FeatureBatchOps)); err != nil {
		return fmt.Errorf("dataplane: free service %d: its counters: %w", id, err)
	}
	if err := d.dropSchedulesLocked(id); err != nil {
		return fmt.Errorf("dataplane: free service %d: %w", id, err)
	}
	delete(d.scheds, id)
	return nil
}

// serviceLocked reads the record of service id, which must not be free.
func (d *Dataplane) serviceLocked(id uint16) (xlbService, error) {
	var r xlbService
	if int(id) >= MaxServices {
		return r, fmt.Errorf("dataplane: service %d: out of range (0..%d)", id, MaxServices-1)
	}
	if err := d.objs.XlbServices.Lookup(uint32(id), &r); err != nil {
		return r, fmt.Errorf("dataplane: read service %d: %w", id, err)
	}
	if ServiceState(r.State) == ServiceFree {
		return r, fmt.Errorf("dataplane: service %d is not configured", id)
	}
	return r, nil
}
