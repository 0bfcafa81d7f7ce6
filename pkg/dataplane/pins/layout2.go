package pins

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"unsafe"

	"github.com/xlbproject/xlb/pkg/limits"
)

// The step from layout 2 (the first layout ever pinned: release commit
// 84dceb3) to layout 3 (issue 13: SNAT port bitmaps, next hops that follow
// the network, TCP tracking for RST validation). It produces layout 3's
// entries (a flow value is layout 4's without syn_us; struct xlb_config
// and the next hops are the same in layout 4), which layout3Step takes
// on. Map by map:
//
//   - xlb_flows: struct flow_value gave its MACs and ifindex up for a slot
//     of the new xlb_nexthops and gained the tracking fields (48 bytes to
//     44). Each entry's next hop gets the slot of (ifindex, the neighbour
//     whose address the kernel's neighbour table gives that MAC on that
//     interface), with the entry's MACs, or an L2-sender slot (address 0)
//     when the table names no single neighbour; a slot the new program
//     claimed for that neighbour already is shared as it is. A forward
//     entry becomes established (XLB_F_SYNACK | XLB_F_ESTABLISHED: the
//     pair passed its handshake, or an embryonic one gets the orphan TTL
//     it had); both entries get XLB_WSCALE_UNKNOWN and no XLB_F_ACK_SEEN,
//     so any RST ends the pair until its receiver's next ACK (layout.h
//     struct flow_value). Layout 2 set no flags on reverse entries, so
//     no SNAT port counts as freed: the bitmap keeps every migrated pair's
//     port until the pair is removed.
//   - xlb_cfg: snat_ip_be becomes snat_ips_be[0] with nsnat 1, and
//     snat_words follows from the port range.
//   - xlb_snat_ports and xlb_nexthops are new: the flow conversion fills
//     the next hops, and the bitmap is rebuilt from the flow map after
//     each pass (migration.derive, snatports.go).
//   - xlb_counters: enum xlb_counter only grew at its end (from
//     XLB_C_RST_OUT_OF_WINDOW on), so every layout 2 index keeps its
//     meaning (migrate_layout2_test.go holds layout 2's list).
//     XLB_C_TTL_EXCEEDED counted passes then and drops now: the same
//     packets.
//   - xlb_reaped and xlb_pair_events: the same cells; XLB_REAPED_EMBRYONIC
//     takes the reason slot layout 2 left empty.
//   - xlb_close_ring grew; a ring is never copied.
//   - everything else is unchanged.
var layout2Step = Step{From: 2, Maps: map[string]Converter{
	xlbMapXlbFlows: {Prepare: prepareFlowsFrom2},
	xlbMapXlbCfg:   {Value: configFrom2},
}}

// FlowValue2 is layout 2's struct flow_value (48 bytes).
type FlowValue2 struct {
	SaddrBe, DaddrBe uint32
	SportBe, DportBe uint16
	Smac, Dmac       [6]byte
	Ifindex          uint32
	CsumIp, CsumL4   uint16
	Generation       uint32
	Flags            uint32
	LastSeen         uint32
	BackendId, Pad   uint16
}

// Config2 is layout 2's struct xlb_config (56 bytes).
type Config2 struct {
	ListenIpBe, SnatIpBe   uint32
	SnatPortLo, SnatPortHi uint16
	Nports                 uint32
	Ports                  [limits.MaxPorts]struct{ LocalPortBe, RemotePortBe uint16 }
	Flags, ActiveSet       uint32
}

func configFrom2(_, old []byte) ([]byte, error) {
	c, err := FromBytes[Config2](old)
	if err != nil {
		return nil, fmt.Errorf("layout 2 config: %w", err)
	}
	n := Config8{ListenIpBe: c.ListenIpBe, SnatPortLo: c.SnatPortLo, SnatPortHi: c.SnatPortHi,
		Nports: c.Nports, Flags: c.Flags, ActiveSet: c.ActiveSet}
	if c.SnatPortLo != 0 && c.SnatPortHi >= c.SnatPortLo {
		n.SnatWords = (uint32(c.SnatPortHi) - uint32(c.SnatPortLo) + 64) / 64 // the bitmap words of one (backend, SNAT address)
	}
	for i, p := range c.Ports {
		n.Ports[i] = xlbPortMap{LocalPortBe: p.LocalPortBe, RemotePortBe: p.RemotePortBe}
	}
	if c.SnatIpBe != 0 {
		n.Nsnat, n.SnatIpsBe[0] = 1, c.SnatIpBe
	}
	return ToBytes(&n)[:Config5Size], nil // layout 3's config: layout 8's without its tail
}

// prepareFlowsFrom2 makes one pass's flow converter: it reads each
// interface's neighbours once and claims each next hop once.
func prepareFlowsFrom2(c *PassContext) (Converter, error) {
	m := c.Dst[xlbMapXlbNexthops]
	if m == nil || m.ValueSize() != uint32(unsafe.Sizeof(xlbNexthop{})) {
		return Converter{}, errors.New("the new maps have no xlb_nexthops of struct nexthop for the entries' next hops")
	}
	now, err := c.Host.Now()
	if err != nil {
		return Converter{}, err
	}
	if c.Host.ClaimNextHop == nil {
		return Converter{}, errors.New("the host claims no next-hop slots")
	}
	h := &hopsFrom2{claim: func(want xlbNexthop) (uint32, error) { return c.Host.ClaimNextHop(m, want) }, host: c.Host, now: now,
		neigh: map[uint32]map[[6]byte][]uint32{}, slots: map[xlbNexthop]uint32{}}
	return Converter{Value: h.flow}, nil
}

// hopsFrom2 gives layout 2 flow entries their next-hop slots.
type hopsFrom2 struct {
	claim func(xlbNexthop) (uint32, error)
	host  Host
	now   uint32
	neigh map[uint32]map[[6]byte][]uint32 // ifindex → MAC → the addresses (in-memory __be32) that have it
	slots map[xlbNexthop]uint32           // the next hops claimed in this pass (used zeroed)
}

func (h *hopsFrom2) flow(key, old []byte) ([]byte, error) {
	k, err := FromBytes[xlbFlowKey](key)
	if err != nil {
		return nil, fmt.Errorf("flow key: %w", err)
	}
	o, err := FromBytes[FlowValue2](old)
	if err != nil {
		return nil, fmt.Errorf("layout 2 flow value: %w", err)
	}
	if o.Ifindex == 0 {
		return nil, errors.New("the entry names no egress interface")
	}
	id, err := h.slot(o)
	if err != nil {
		return nil, err
	}
	v := FlowValue6{SaddrBe: o.SaddrBe, DaddrBe: o.DaddrBe, SportBe: o.SportBe, DportBe: o.DportBe,
		CsumIp: o.CsumIp, CsumL4: o.CsumL4, Nexthop: id, Generation: o.Generation, Flags: o.Flags,
		LastSeen: o.LastSeen, BackendId: o.BackendId, Wscale: limits.WScaleUnknown}
	if k.Dir == uint8(xlbXlbDirXLB_DIR_CLIENT) {
		v.Flags |= uint32(xlbXlbFlowFlagsXLB_F_SYNACK | xlbXlbFlowFlagsXLB_F_ESTABLISHED)
	}
	return ToBytes(&v)[:FlowValue3Size], nil // layout 3's value: layout 4's without syn_us
}

// slot is the next-hop slot of an entry's interface and MACs.
func (h *hopsFrom2) slot(o FlowValue2) (uint32, error) {
	ip, err := h.neighbour(o.Ifindex, o.Dmac, o.DaddrBe)
	if err != nil {
		return 0, err
	}
	want := xlbNexthop{Ifindex: o.Ifindex, IpBe: ip, Smac: o.Smac, Dmac: o.Dmac}
	if id, ok := h.slots[want]; ok {
		return id, nil
	}
	stamped := want
	stamped.Used = h.now
	id, err := h.claim(stamped)
	if err != nil {
		return 0, err
	}
	h.slots[want] = id
	return id, nil
}

// neighbour is the address of the neighbour with MAC mac on ifindex: the
// entry's destination dst when that is one of them (an on-link peer),
// else the only one; 0 (an L2-sender slot) when the table names none or
// several others.
func (h *hopsFrom2) neighbour(ifindex uint32, mac [6]byte, dst uint32) (uint32, error) {
	byMAC, ok := h.neigh[ifindex]
	if !ok {
		ns, err := h.host.Neighbours(int(ifindex))
		if err != nil {
			return 0, fmt.Errorf("neighbours of ifindex %d: %w", ifindex, err)
		}
		byMAC = map[[6]byte][]uint32{}
		for _, n := range ns {
			if n.IP.Is4() && !n.IP.IsUnspecified() {
				byMAC[n.MAC] = append(byMAC[n.MAC], be32(n.IP))
			}
		}
		h.neigh[ifindex] = byMAC
	}
	ips := byMAC[mac]
	for _, ip := range ips {
		if ip == dst {
			return ip, nil
		}
	}
	if len(ips) == 1 {
		return ips[0], nil
	}
	return 0, nil
}

// be32 is an IPv4 address in the in-memory form of a __be32 field.
func be32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}
