package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
)

// Next hops (bpf/layout.h struct nexthop, the xlb_nexthops map; issue 13
// "Next hops that follow the network"): a flow entry names a slot, and
// the slot holds the egress interface and the MACs its packets leave
// with. The data path claims slots when it creates pairs; userspace keeps
// their MACs current (UpdateNeighbour, UpdateInterfaceMAC, from the
// netlink watcher of pkg/hostnet) and frees the slots no entry names
// (FreeNextHops, from the maintenance walk).
//
// Userspace writes a slot's MACs whole (a map update), while the data path
// claims free slots with compare-and-swap and stamps used. Every such
// write re-reads the slot under d.mu just before and changes only a slot
// that still holds what the decision was made on; what remains is a
// window of one syscall in which a data path used stamp on the same slot
// can be lost, which at most lets the walk free the slot a pass early.
// Freeing a slot and marking it stale change which next hop a slot is,
// so those go through xlb_nexthop_ctl (bpf/nexthop.h), which re-checks
// each request in the kernel with compare-and-swap on the slot's ifindex:
// a SYN naming a slot between FreeNextHops' decision and the free keeps
// it (issue 27). A packet that finds its slot freed or stale looks its
// next hop up again (XLB_C_NEXTHOP_REFRESH).
//
// A stale slot (MarkNextHopsStale, MarkNeighbourStale; pkg/hostnet's
// watcher on route changes and failed neighbours) makes the established
// pairs naming it look their next hop up again, so they follow the route
// (issue 27 finding 1).
//
// A SYN does not ask the FIB each time (issue 17: a new pair cost two
// bpf_fib_lookup calls and two slot probes): each CPU remembers, per
// backend id and per client address, the slot its last lookup named
// (bpf/nexthop.h memo_next_hop) for FIBMemoTicks, while that slot still
// holds the same next hop. A route or neighbour change therefore reaches
// new pairs within those ticks, and a MAC change at once, since it is
// written into the slot (UpdateNeighbour, UpdateInterfaceMAC); a freed or
// stale slot ends the memo at once.

// FIBMemoTicks is how long a CPU's remembered FIB answer serves new pairs
// (bpf/layout.h XLB_FIB_MEMO_TICKS): 64 jiffies, 64 ms at HZ=1000, 256 ms
// at HZ=250, 640 ms at HZ=100; the next-hop watcher's own aim for a MAC
// change is 1 s.
const FIBMemoTicks = Jiffies(xlbXlbLimitsXLB_FIB_MEMO_TICKS)

// nextHopStale is the bit a stale slot's ifindex carries (bpf/layout.h
// XLB_NEXTHOP_STALE): a next hop whose route changed or whose neighbour
// failed, which no new pair takes and whose pairs look their next hop up
// again at their next packet (MarkNextHopsStale).
const nextHopStale = uint32(1) << 31

// NextHop is one slot of xlb_nexthops.
type NextHop struct {
	// Ifindex is the egress interface; 0: the slot is free.
	Ifindex int
	// Stale reports a slot marked stale (MarkNextHopsStale): the pairs
	// naming it look their next hop up again at their next packet, and
	// the maintenance walk frees it once none names it.
	Stale bool
	// IP is the neighbour bpf_fib_lookup returned (the backend or client
	// itself on link, else the gateway). Invalid (the zero netip.Addr)
	// for an L2-sender slot: a client the FIB could not resolve, answered
	// with the MACs of its SYN's frame.
	IP netip.Addr
	// SrcMAC and DstMAC are written into the Ethernet header.
	SrcMAC, DstMAC net.HardwareAddr
	// Used is the data path's clock (jiffies, low 32 bits) at the last
	// pair creation that named the slot.
	Used uint32
}

// Free reports whether the slot is free.
func (h NextHop) Free() bool { return h.Ifindex == 0 }

func (h NextHop) String() string {
	if h.Free() {
		return "free"
	}
	ip := "l2-sender"
	if h.IP.IsValid() {
		ip = h.IP.String()
	}
	stale := ""
	if h.Stale {
		stale = " (stale)"
	}
	return fmt.Sprintf("ifindex %d via %s %s->%s%s", h.Ifindex, ip, h.SrcMAC, h.DstMAC, stale)
}

// NextHopSlots is the slots the data path probes for the next hop
// (ifindex, ip), in probe order: the Go twin of bpf/nexthop.h's hash.
// ip must be an IPv4 address other than 0.0.0.0 (L2-sender slots hash
// their MAC instead).
func NextHopSlots(ifindex int, ip netip.Addr) [NextHopProbes]uint32 {
	return nextHopSlots(uint32(ifindex), be32(ip), [6]byte{})
}

// nextHopSlots hashes a slot's identity as plan13/bpf/nexthop.h define it:
//
//	k = ip_be read as a little-endian u32 (the address bytes in wire order)
//	k = (w0 | w1 << 16) ^ w2 for ip 0, w0..w2 = dmac[0:2], [2:4], [4:6] as little-endian u16
//	h = ifindex * 0x9E3779B1 ^ k * 0x85EBCA6B (u32, wrapping); h ^= h >> 15
//	slot i = (h + i) & (XLB_MAX_NEXTHOPS - 1)
//
// ipBe is the in-memory form of the __be32 field (be32).
func nextHopSlots(ifindex, ipBe uint32, dmac [6]byte) [NextHopProbes]uint32 {
	var ipb [4]byte
	binary.NativeEndian.PutUint32(ipb[:], ipBe)
	k := binary.LittleEndian.Uint32(ipb[:])
	if ipBe == 0 {
		w0 := uint32(binary.LittleEndian.Uint16(dmac[0:2]))
		w1 := uint32(binary.LittleEndian.Uint16(dmac[2:4]))
		w2 := uint32(binary.LittleEndian.Uint16(dmac[4:6]))
		k = (w0 | w1<<16) ^ w2
	}
	h := (ifindex * 0x9E3779B1) ^ (k * 0x85EBCA6B)
	h ^= h >> 15
	var out [NextHopProbes]uint32
	for i := range out {
		out[i] = (h + uint32(i)) & uint32(MaxNextHops-1)
	}
	return out
}

// sameNextHop reports whether slot s holds the next hop want identifies:
// (ifindex, ip), and the destination MAC too for an L2-sender slot.
func sameNextHop(s, want *xlbNexthop) bool {
	return s.Ifindex == want.Ifindex && s.IpBe == want.IpBe && (want.IpBe != 0 || s.Dmac == want.Dmac)
}

// NextHop reads slot id (0..MaxNextHops-1).
func (d *Dataplane) NextHop(id uint32) (NextHop, error) {
	if id >= uint32(MaxNextHops) {
		return NextHop{}, fmt.Errorf("dataplane: next hop %d: slots are 0..%d", id, MaxNextHops-1)
	}
	var s xlbNexthop
	if err := d.objs.XlbNexthops.Lookup(id, &s); err != nil {
		return NextHop{}, fmt.Errorf("dataplane: read next hop %d: %w", id, err)
	}
	return decodeNextHop(&s), nil
}

func decodeNextHop(s *xlbNexthop) NextHop {
	if s.Ifindex == 0 {
		return NextHop{}
	}
	h := NextHop{Ifindex: int(s.Ifindex &^ nextHopStale), Stale: s.Ifindex&nextHopStale != 0,
		SrcMAC: bytes.Clone(s.Smac[:]), DstMAC: bytes.Clone(s.Dmac[:]), Used: s.Used}
	if s.IpBe != 0 {
		h.IP = addrFromBE32(s.IpBe)
	}
	return h
}

// mac6 checks that mac is an Ethernet address.
func mac6(mac net.HardwareAddr) ([6]byte, error) {
	if len(mac) != 6 {
		return [6]byte{}, fmt.Errorf("dataplane: %q is not a 6-byte Ethernet address", mac)
	}
	return [6]byte(mac), nil
}

// UpdateNeighbour writes mac as the destination MAC of every slot of the
// next hop (ifindex, ip) that holds another one: the kernel's neighbour
// entry of ip on that interface changed (pkg/hostnet WatchNextHops). Only
// the NextHopProbes slots the hash names are read. It returns how many
// slots it changed.
func (d *Dataplane) UpdateNeighbour(ifindex int, ip netip.Addr, mac net.HardwareAddr) (int, error) {
	m, err := mac6(mac)
	if err != nil {
		return 0, err
	}
	if !ip.Is4() || ip.IsUnspecified() || ifindex <= 0 {
		return 0, fmt.Errorf("dataplane: update neighbour %s on ifindex %d: want an IPv4 neighbour on an interface", ip, ifindex)
	}
	want := xlbNexthop{Ifindex: uint32(ifindex), IpBe: be32(ip)}
	slots := NextHopSlots(ifindex, ip)
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rewriteNextHopsLocked(slots[:], func(s *xlbNexthop) bool {
		if !sameNextHop(s, &want) || s.Dmac == m {
			return false
		}
		s.Dmac = m
		return true
	})
}

// UpdateInterfaceMAC writes mac as the source MAC of every slot on
// ifindex that holds another one, and as the address the data path takes
// as the interface's own (frames to any other pass to the kernel;
// ifmacs.go) when the interface is attached: the interface's address
// changed. It reads every slot, and returns how many it changed.
func (d *Dataplane) UpdateInterfaceMAC(ifindex int, mac net.HardwareAddr) (int, error) {
	m, err := mac6(mac)
	if err != nil {
		return 0, err
	}
	if ifindex <= 0 {
		return 0, fmt.Errorf("dataplane: update the MAC of ifindex %d: not an interface", ifindex)
	}
	change := func(s *xlbNexthop) bool {
		if s.Ifindex != uint32(ifindex) || s.Smac == m {
			return false
		}
		s.Smac = m
		return true
	}
	ids, err := d.scanNextHops(func(_ uint32, s *xlbNexthop) bool { c := *s; return change(&c) })
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.attachedIfindexLocked(ifindex) {
		if err := d.writeIfMACLocked(ifindex, mac); err != nil {
			return 0, err
		}
	}
	return d.rewriteNextHopsLocked(ids, change)
}

// NextHopWords is the length of the bitset FreeNextHops takes: one bit per
// slot id.
const NextHopWords = int(MaxNextHops+63) / 64

// FreeNextHops frees every claimed slot (live or stale) that no flow
// entry names and that no pair creation stamped since notUsedSince (the
// data path's clock, low 32 bits, at the start of the maintenance walk's
// pass that collected referenced). referenced is a bitset over slot ids
// (bit id%64 of word id/64), NextHopWords words long: the slots the flow
// entries the pass read name. A slot stamped during the pass may be named
// by an entry the pass did not see, so it is kept. It returns how many
// slots it freed.
//
// The decision is re-checked in the kernel (xlb_nexthop_ctl, bpf/nexthop.h):
// the slot is marked stale with compare-and-swap, then its used stamp is
// read again, so a SYN that names the slot between this scan and the free
// keeps it (issue 27: the lookup-then-zero raced a SYN claiming the slot).
func (d *Dataplane) FreeNextHops(referenced []uint64, notUsedSince uint32) (int, error) {
	if len(referenced) != NextHopWords {
		return 0, fmt.Errorf("dataplane: free next hops: a bitset of %d words, want %d (one bit per slot)", len(referenced), NextHopWords)
	}
	var reqs []xlbNexthopReq
	_, err := d.scanNextHops(func(id uint32, s *xlbNexthop) bool {
		if s.Ifindex != 0 && referenced[id/64]&(1<<(id%64)) == 0 && int32(s.Used-notUsedSince) < 0 {
			reqs = append(reqs, xlbNexthopReq{Id: id, Ifindex: s.Ifindex, IpBe: s.IpBe, UsedBefore: notUsedSince, Op: xlbXlbNexthopOpXLB_NH_FREE})
		}
		return false
	})
	if err != nil {
		return 0, err
	}
	if d.beforeNextHopFree != nil {
		d.beforeNextHopFree()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := d.nextHopCtlLocked(reqs)
	if err != nil {
		return n, fmt.Errorf("dataplane: free next hops: %w", err)
	}
	return n, nil
}

// MarkNextHopsStale marks stale every live slot with a neighbour address
// (never an L2-sender slot: the FIB has no answer for those) for which
// match(ifindex, ip) is true: the network changed under that next hop (a
// route that named it changed, its neighbour failed). No new pair takes a
// stale slot, and every pair naming one looks its next hop up again at its
// next packet (bpf/xlb.c rewrite_and_send, counted as NextHopRefreshes);
// the maintenance walk frees it once no entry names it (FreeNextHops).
// Each slot is marked with compare-and-swap in the kernel, only if it
// still holds the next hop it was read with. It reads every slot, and
// returns how many it marked.
func (d *Dataplane) MarkNextHopsStale(match func(ifindex int, ip netip.Addr) bool) (int, error) {
	var reqs []xlbNexthopReq
	_, err := d.scanNextHops(func(id uint32, s *xlbNexthop) bool {
		if s.Ifindex != 0 && s.Ifindex&nextHopStale == 0 && s.IpBe != 0 && match(int(s.Ifindex), addrFromBE32(s.IpBe)) {
			reqs = append(reqs, xlbNexthopReq{Id: id, Ifindex: s.Ifindex, IpBe: s.IpBe, Op: xlbXlbNexthopOpXLB_NH_STALE})
		}
		return false
	})
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := d.nextHopCtlLocked(reqs)
	if err != nil {
		return n, fmt.Errorf("dataplane: mark next hops stale: %w", err)
	}
	return n, nil
}

// MarkNeighbourStale marks stale the slots of the next hop (ifindex, ip)
// (MarkNextHopsStale), reading only the NextHopProbes slots its hash
// names: the kernel's neighbour entry of ip turned FAILED or was deleted.
// It returns how many slots it marked.
func (d *Dataplane) MarkNeighbourStale(ifindex int, ip netip.Addr) (int, error) {
	if !ip.Is4() || ip.IsUnspecified() || ifindex <= 0 {
		return 0, fmt.Errorf("dataplane: mark neighbour %s on ifindex %d stale: want an IPv4 neighbour on an interface", ip, ifindex)
	}
	want := xlbNexthop{Ifindex: uint32(ifindex), IpBe: be32(ip)}
	d.mu.Lock()
	defer d.mu.Unlock()
	var reqs []xlbNexthopReq
	for _, id := range NextHopSlots(ifindex, ip) {
		var s xlbNexthop
		if err := d.objs.XlbNexthops.Lookup(id, &s); err != nil {
			return 0, fmt.Errorf("dataplane: read next hop %d: %w", id, err)
		}
		if sameNextHop(&s, &want) {
			reqs = append(reqs, xlbNexthopReq{Id: id, Ifindex: s.Ifindex, IpBe: s.IpBe, Op: xlbXlbNexthopOpXLB_NH_STALE})
		}
	}
	n, err := d.nextHopCtlLocked(reqs)
	if err != nil {
		return n, fmt.Errorf("dataplane: mark neighbour %s on ifindex %d stale: %w", ip, ifindex, err)
	}
	return n, nil
}

// nextHopCtlLocked runs xlb_nexthop_ctl (bpf/nexthop.h) over reqs,
// nextHopBatch at a time, and returns how many it carried out
// (XLB_NH_DONE). Callers hold d.mu, which also guards d.nexthopBuf.
func (d *Dataplane) nextHopCtlLocked(reqs []xlbNexthopReq) (int, error) {
	b := &d.nexthopBuf
	var n int
	for len(reqs) > 0 {
		c := min(len(reqs), nextHopBatch)
		b.Count = uint32(c)
		copy(b.Reqs[:c], reqs[:c])
		if err := d.objs.XlbNexthopBatch.Update(uint32(0), b, ebpf.UpdateAny); err != nil {
			return n, fmt.Errorf("write requests: %w", err)
		}
		ret, err := runOnce(d.objs.XlbNexthopCtl)
		if err != nil {
			return n, fmt.Errorf("run xlb_nexthop_ctl: %w", err)
		}
		if ret != xdpPass {
			return n, fmt.Errorf("xlb_nexthop_ctl returned %d", ret)
		}
		if err := d.objs.XlbNexthopBatch.Lookup(uint32(0), b); err != nil {
			return n, fmt.Errorf("read results: %w", err)
		}
		for _, q := range b.Reqs[:c] {
			if q.Result == xlbXlbNexthopResultXLB_NH_DONE {
				n++
			}
		}
		reqs = reqs[c:]
	}
	return n, nil
}

// nextHopBatch is how many requests one run of xlb_nexthop_ctl takes.
const nextHopBatch = int(xlbXlbLimitsXLB_NEXTHOP_BATCH)

// claimNextHop returns the slot of m (an xlb_nexthops map) that holds the
// next hop want identifies (sameNextHop), as it is, or else claims the
// first free slot of its probe sequence and writes want into it. The
// migration from layout 2 uses it for the next hops its flow entries
// carried; callers hold d.mu or run before any program uses m. A claim by
// the data path of the same free slot within the same syscall would be
// overwritten (userspace has no compare-and-swap on a map value); the
// second copy of a migration, the only call while a program runs, claims
// only the next hops of pairs created since the first. It fails when
// every probed slot holds another next hop.
func claimNextHop(m *ebpf.Map, want xlbNexthop) (uint32, error) {
	free, found := uint32(0), false
	for _, id := range nextHopSlots(want.Ifindex, want.IpBe, want.Dmac) {
		var s xlbNexthop
		if err := m.Lookup(id, &s); err != nil {
			return 0, fmt.Errorf("read next hop %d: %w", id, err)
		}
		if s.Ifindex != 0 && sameNextHop(&s, &want) {
			return id, nil
		}
		if s.Ifindex == 0 && !found {
			free, found = id, true
		}
	}
	if !found {
		return 0, fmt.Errorf("the %d next-hop slots of %s are all taken by other next hops", NextHopProbes, decodeNextHop(&want))
	}
	if err := m.Update(free, &want, ebpf.UpdateExist); err != nil {
		return 0, fmt.Errorf("claim next hop %d: %w", free, err)
	}
	return free, nil
}

// rewriteNextHopsLocked re-reads each slot of ids, lets change edit it, and
// writes back the slots change reports as changed. Callers hold d.mu.
func (d *Dataplane) rewriteNextHopsLocked(ids []uint32, change func(*xlbNexthop) bool) (int, error) {
	var n int
	for _, id := range ids {
		var s xlbNexthop
		if err := d.objs.XlbNexthops.Lookup(id, &s); err != nil {
			return n, fmt.Errorf("dataplane: read next hop %d: %w", id, err)
		}
		if !change(&s) {
			continue
		}
		if err := d.objs.XlbNexthops.Update(id, &s, ebpf.UpdateExist); err != nil {
			return n, fmt.Errorf("dataplane: write next hop %d: %w", id, err)
		}
		n++
	}
	return n, nil
}

// scanNextHops reads every slot (BPF_MAP_LOOKUP_BATCH where the host
// allows it) and returns the ids match selects.
func (d *Dataplane) scanNextHops(match func(id uint32, s *xlbNexthop) bool) ([]uint32, error) {
	var out []uint32
	err := scanArray(d.objs.XlbNexthops, d.featureOn(FeatureBatchOps), func(id uint32, s *xlbNexthop) {
		if match(id, s) {
			out = append(out, id)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("dataplane: read the next hops: %w", err)
	}
	return out, nil
}

// scanArray calls fn with every entry of the array map m, rawChunk entries
// per BPF_MAP_LOOKUP_BATCH when batch is set and the kernel has it, else
// one lookup per key.
func scanArray[V any](m *ebpf.Map, batch bool, fn func(k uint32, v *V)) error {
	n := m.MaxEntries()
	if batch {
		keys, vals := make([]uint32, rawChunk), make([]V, rawChunk)
		var cursor ebpf.MapBatchCursor
		for seen := uint32(0); ; {
			c, err := m.BatchLookup(&cursor, keys, vals, nil)
			for i := range c {
				fn(keys[i], &vals[i])
			}
			seen += uint32(c)
			if errors.Is(err, ebpf.ErrKeyNotExist) || (err == nil && seen >= n) {
				return nil
			}
			if errors.Is(err, ebpf.ErrNotSupported) && seen == 0 {
				break
			}
			if err != nil {
				return err
			}
		}
	}
	var v V
	for k := range n {
		if err := m.Lookup(k, &v); err != nil {
			return err
		}
		fn(k, &v)
	}
	return nil
}
