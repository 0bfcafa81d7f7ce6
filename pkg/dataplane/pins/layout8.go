package pins

import (
	"encoding/binary"
	"errors"
	"fmt"
	"structs"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/limits"
)

// The step from layout 8 (issue 36: timestamps rewritten toward backends;
// the last build of it: commit d3e22cc) to layout 9 (issue 29: many
// services). Layout 8 balanced one service; the migration makes it
// service 0, marked XLB_SVC_MIGRATED and named by the successor's first
// Configure (the only service of its config, or the one on its address).
// Map by map:
//
//   - xlb_flows: the key is unchanged; pad2 of struct flow_value became
//     member_id and service_id: every entry gets member id = its backend
//     id and service 0 (flowFrom8), so the per-backend counter cells,
//     indexed by member id since layout 9, stay where layout 8 counted
//     them.
//   - xlb_cfg: struct xlb_config lost listen_ip_be, nports, ports and
//     active_set (they are service 0's now) and gained the listen
//     prefilter: the SNAT fields and flags are copied, the prefilter gets
//     the bit of the old listen address (configFrom8). The same pass
//     writes service 0's record into the new xlb_services (SERVING,
//     MIGRATED, the old address, TCP, the ports and the active routable
//     set) and its (address, port) keys into the new xlb_listen, so the
//     new program balances the old service's SYNs before any Configure.
//   - xlb_backend_sets: struct backend_ref gained member (+ pad): every
//     ref gets member = its id; keys 0 and 1 are service 0's two slots
//     (0*2 + set) as they were (backendSetFrom8).
//   - xlb_shared: struct xlb_state lost rr, which is per service in the
//     new xlb_rr: service 0's position continues from the old one
//     (stateFrom8; each pass moves it to the old program's when that is
//     further on).
//   - xlb_services, xlb_listen and xlb_rr are new (above).
//   - the per-backend counter maps keep their cells (member id = backend
//     id); everything else is unchanged.
var layout8Step = Step{From: 8, Maps: map[string]Converter{
	xlbMapXlbFlows:       {Value: flowFrom8},
	xlbMapXlbCfg:         {Prepare: prepareConfigFrom8},
	xlbMapXlbBackendSets: {Value: backendSetFrom8},
	xlbMapXlbShared:      {Prepare: prepareStateFrom8},
}}

// Config8 is layouts 6 to 8's struct xlb_config (228 bytes).
type Config8 struct {
	_              structs.HostLayout
	ListenIpBe     uint32
	SnatPortLo     uint16
	SnatPortHi     uint16
	Nports         uint32
	Ports          [limits.MaxPorts]xlbPortMap
	Flags          uint32
	ActiveSet      uint32
	Nsnat          uint32
	SnatWords      uint32
	SnatIpsBe      [limits.MaxSNATIPs]uint32
	SnatReuseTicks uint32
	Nretired       uint32
	Retired        [limits.MaxSNATRetired]xlbSnatRetired
}

// BackendRef8 is layouts 4 to 8's struct backend_ref.
type BackendRef8 struct {
	_      structs.HostLayout
	IpBe   uint32
	Id     uint16
	PortBe uint16
}

// BackendSet8 is layouts 4 to 8's struct backend_set.
type BackendSet8 struct {
	_       structs.HostLayout
	Count   uint32
	Pad     uint32
	Entries [limits.MaxBackends]BackendRef8
}

// State8 is layouts 2 to 8's struct xlb_state.
type State8 struct {
	_            structs.HostLayout
	Rr           uint64
	Generation   uint64
	ClockJiffies uint64
	ClockNs      uint64
}

// Config8Size is the bytes of Config8.
const Config8Size = int(unsafe.Sizeof(Config8{}))

// flowFrom8 gives a layout 8 flow entry its member id (its backend id)
// and service 0.
func flowFrom8(_, old []byte) ([]byte, error) {
	v, err := FromBytes[FlowValue](old) // layout 8's value has layout 9's size, pad2 zero
	if err != nil {
		return nil, fmt.Errorf("layout 8 flow value: %w", err)
	}
	v.MemberId, v.ServiceId = v.BackendId, 0
	return ToBytes(&v), nil
}

// configFrom8Value is layout 8's config c in layout 9, and service 0's
// record.
func configFrom8Value(c Config8) (xlbXlbConfig, xlbService) {
	n := xlbXlbConfig{SnatPortLo: c.SnatPortLo, SnatPortHi: c.SnatPortHi, Flags: c.Flags, Nsnat: c.Nsnat,
		SnatWords: c.SnatWords, SnatIpsBe: c.SnatIpsBe, SnatReuseTicks: c.SnatReuseTicks, Nretired: c.Nretired,
		Retired: c.Retired}
	var svc xlbService
	if c.ListenIpBe == 0 || c.Nports == 0 {
		return n, svc // never configured: no service
	}
	svc = xlbService{State: uint8(xlbXlbServiceStateXLB_SVC_SERVING), ActiveSet: uint8(c.ActiveSet & 1), Proto: ipprotoTCP, Family: afInet,
		Scheduler: uint8(xlbXlbSchedulerXLB_SCHED_ROUND_ROBIN), Nports: uint8(min(c.Nports, uint32(limits.MaxPorts))), Flags: uint16(xlbXlbServiceFlagsXLB_SVC_MIGRATED),
		Ports: c.Ports}
	binary.NativeEndian.PutUint32(svc.Addr[:4], c.ListenIpBe)
	b := ListenBit(c.ListenIpBe)
	n.ListenFilter[b/64] |= 1 << (b % 64)
	return n, svc
}

// prepareConfigFrom8 makes one pass's config converter: it converts the
// config and writes service 0's record and listen keys into the new maps
// (each pass again: the predecessor may have published since).
func prepareConfigFrom8(c *PassContext) (Converter, error) {
	services, listen := c.Dst[xlbMapXlbServices], c.Dst[xlbMapXlbListen]
	if services == nil || listen == nil {
		return Converter{}, errors.New("the new maps have no xlb_services and xlb_listen for layout 8's service")
	}
	return Converter{Value: func(_, old []byte) ([]byte, error) {
		o, err := FromBytes[Config8](old)
		if err != nil {
			return nil, fmt.Errorf("layout 8 config: %w", err)
		}
		n, svc := configFrom8Value(o)
		if svc.State != uint8(xlbXlbServiceStateXLB_SVC_FREE) {
			if err := services.Update(uint32(0), &svc, ebpf.UpdateAny); err != nil {
				return nil, fmt.Errorf("write service 0: %w", err)
			}
			for _, p := range svc.Ports[:svc.Nports] {
				k := xlbListenKey{AddrBe: o.ListenIpBe, PortBe: p.LocalPortBe, Proto: ipprotoTCP}
				v := xlbListenValue{Service: 0, RemotePortBe: p.RemotePortBe}
				if err := listen.Update(&k, &v, ebpf.UpdateAny); err != nil {
					return nil, fmt.Errorf("write listen key of port %d: %w", binary.BigEndian.Uint16(binary.NativeEndian.AppendUint16(nil, p.LocalPortBe)), err)
				}
			}
		}
		return ToBytes(&n), nil
	}}, nil
}

// backendSetFrom8 gives every ref of a layout 8 routable set its member id
// (its backend id).
func backendSetFrom8(_, old []byte) ([]byte, error) {
	o, err := FromBytes[BackendSet8](old)
	if err != nil {
		return nil, fmt.Errorf("layout 8 routable set: %w", err)
	}
	n := xlbBackendSet{Count: o.Count, Pad: o.Pad}
	for i, r := range o.Entries {
		n.Entries[i] = xlbBackendRef{IpBe: r.IpBe, Id: r.Id, PortBe: r.PortBe, Member: r.Id}
	}
	return ToBytes(&n), nil
}

// prepareStateFrom8 makes one pass's converter of xlb_shared: the state
// without rr, whose value moves service 0's position in the new xlb_rr
// on to it when it is further on (the old program's SYNs since the last
// pass; the new program's own are kept).
func prepareStateFrom8(c *PassContext) (Converter, error) {
	rr := c.Dst[xlbMapXlbRr]
	if rr == nil {
		return Converter{}, errors.New("the new maps have no xlb_rr for layout 8's round-robin position")
	}
	return Converter{Value: func(_, old []byte) ([]byte, error) {
		o, err := FromBytes[State8](old)
		if err != nil {
			return nil, fmt.Errorf("layout 8 shared state: %w", err)
		}
		var cur uint64
		if err := rr.Lookup(uint32(0), &cur); err != nil {
			return nil, fmt.Errorf("read service 0's round-robin position: %w", err)
		}
		if int64(o.Rr-cur) > 0 {
			if err := rr.Update(uint32(0), o.Rr, ebpf.UpdateExist); err != nil {
				return nil, fmt.Errorf("write service 0's round-robin position: %w", err)
			}
		}
		n := xlbXlbState{Generation: o.Generation, ClockJiffies: o.ClockJiffies, ClockNs: o.ClockNs}
		return ToBytes(&n), nil
	}}, nil
}

// Fixed values of struct service in layout 9.
const (
	ipprotoTCP = 6 // IPPROTO_TCP
	afInet     = 2 // AF_INET
)

// ListenBit is the listen prefilter's bit of the IPv4 address addrBe, as
// the CPU loads its network-order bytes (bpf/listen.h listen_bit): its
// top XLB_LISTEN_FILTER_SHIFT bits after multiplying by
// XLB_LISTEN_HASH_MUL.
func ListenBit(addrBe uint32) uint32 {
	return addrBe * uint32(xlbXlbLimitsXLB_LISTEN_HASH_MUL) >> (32 - uint32(xlbXlbLimitsXLB_LISTEN_FILTER_SHIFT))
}
