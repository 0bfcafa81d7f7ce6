package dataplane

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Retired SNAT spaces (bpf/layout.h struct snat_retired; issue 27 finding
// 3): a reload that changes snat.ip or snat.port_range leaves live pairs
// on SNAT addresses and ports the new config no longer hands out. The data
// path keeps recognising the backends' packets to them for as long as
// reverse entries hold them: Configure retires the previous config's space
// (and keeps what it had retired) less the new space, and the maintenance
// loop shrinks the set after each complete walk pass to the ports reverse
// entries still hold (RetiredSNATUse, ShrinkRetiredSNAT), dropping a space
// none holds.
//
// Why a pass that starts after the config write is enough: from that write
// on, the allocator hands out ports of the new space only (bpf/snat.h), so
// no reverse entry on a retired port appears any more; the ones that exist
// only go. Every entry present for the whole pass is read by it.
//
// The previous config is the one in the config map: a successor's
// (systemctl reload) and a restart's after a crash (the pins adopted, the
// file changed meanwhile) alike, since Configure reads the pinned config
// before it writes its own.

// RetiredSNAT is a retired SNAT space: a SNAT address and the range of its
// ports that live pairs of an earlier config may still hold, which the
// data path still recognises as backends' destinations but never hands
// out again. Ports in host order, inclusive.
type RetiredSNAT struct {
	Addr   netip.Addr
	PortLo uint16
	PortHi uint16
}

// portSpan is an inclusive range of ports; lo > hi is empty.
type portSpan struct{ lo, hi uint16 }

func (s portSpan) empty() bool { return s.lo > s.hi }

// join is the smallest span covering both.
func (s portSpan) join(o portSpan) portSpan {
	if s.empty() {
		return o
	}
	if o.empty() {
		return s
	}
	return portSpan{min(s.lo, o.lo), max(s.hi, o.hi)}
}

// less is s without the ports of o: none, one or two spans.
func (s portSpan) less(o portSpan) []portSpan {
	if s.empty() {
		return nil
	}
	if o.empty() || o.hi < s.lo || o.lo > s.hi {
		return []portSpan{s}
	}
	var out []portSpan
	if o.lo > s.lo {
		out = append(out, portSpan{s.lo, o.lo - 1})
	}
	if o.hi < s.hi {
		out = append(out, portSpan{o.hi + 1, s.hi})
	}
	return out
}

// retiredOf lists the config's retired SNAT spaces.
func retiredOf(c *xlbXlbConfig) []RetiredSNAT {
	n := min(int(c.Nretired), len(c.Retired))
	out := make([]RetiredSNAT, 0, n)
	for _, r := range c.Retired[:n] {
		out = append(out, RetiredSNAT{Addr: addrFromBE32(r.IpBe), PortLo: r.PortLo, PortHi: r.PortHi})
	}
	return out
}

// setRetired writes spaces into c, in the order given.
func setRetired(c *xlbXlbConfig, spaces []RetiredSNAT) {
	c.Retired = [len(c.Retired)]xlbSnatRetired{}
	for i, r := range spaces {
		c.Retired[i] = xlbSnatRetired{IpBe: be32(r.Addr), PortLo: r.PortLo, PortHi: r.PortHi}
	}
	c.Nretired = uint32(len(spaces))
}

// retire is the retired set of config c written over prev: prev's range at
// each of prev's SNAT addresses and prev's retired spaces, each less c's
// range where c uses the address (a span around c's range leaves two),
// spans of one address that overlap or touch merged; sorted by address
// and port. Where that makes more than MaxRetiredSNAT spaces, the closest
// spans of one address are joined (the ports between them are recognised
// too). prev of a fresh start (no SNAT address) retires nothing. Errors:
// more addresses to keep than MaxRetiredSNAT.
func retire(prev, c *xlbXlbConfig) ([]RetiredSNAT, error) {
	type space struct {
		addr uint32
		portSpan
	}
	var spaces []space
	cur := geometryOf(c)
	add := func(a uint32, s portSpan) {
		rest := []portSpan{s}
		if slices.Contains(cur.addrs, a) {
			rest = s.less(portSpan{c.SnatPortLo, c.SnatPortHi})
		}
		for _, r := range rest {
			spaces = append(spaces, space{a, r})
		}
	}
	if prev.SnatPortLo != 0 && prev.SnatPortHi >= prev.SnatPortLo {
		for _, a := range geometryOf(prev).addrs {
			add(a, portSpan{prev.SnatPortLo, prev.SnatPortHi})
		}
	}
	for _, r := range prev.Retired[:min(int(prev.Nretired), len(prev.Retired))] {
		if r.PortLo != 0 && r.PortHi >= r.PortLo {
			add(r.IpBe, portSpan{r.PortLo, r.PortHi})
		}
	}
	slices.SortFunc(spaces, func(x, y space) int {
		return cmp.Or(addrFromBE32(x.addr).Compare(addrFromBE32(y.addr)), cmp.Compare(x.lo, y.lo))
	})
	var merged []space
	for _, s := range spaces {
		if n := len(merged); n > 0 && merged[n-1].addr == s.addr && uint32(s.lo) <= uint32(merged[n-1].hi)+1 {
			merged[n-1].portSpan = merged[n-1].join(s.portSpan)
			continue
		}
		merged = append(merged, s)
	}
	for len(merged) > MaxRetiredSNAT {
		best := -1
		for i := 1; i < len(merged); i++ {
			if merged[i].addr == merged[i-1].addr && (best < 0 || merged[i].lo-merged[i-1].hi < merged[best].lo-merged[best-1].hi) {
				best = i
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("dataplane: %d SNAT addresses that earlier configs used may still be held by live pairs, at most %d can be kept: apply this SNAT change once their connections have ended (status snat.retired)", len(merged), MaxRetiredSNAT)
		}
		merged[best-1].portSpan = merged[best-1].join(merged[best].portSpan)
		merged = slices.Delete(merged, best, best+1)
	}
	out := make([]RetiredSNAT, 0, len(merged))
	for _, s := range merged {
		out = append(out, RetiredSNAT{Addr: addrFromBE32(s.addr), PortLo: s.lo, PortHi: s.hi})
	}
	return out, nil
}

// RetiredSNAT returns the retired SNAT spaces of the config this process
// wrote last, sorted by address and port; empty when none.
func (d *Dataplane) RetiredSNAT() []RetiredSNAT {
	d.mu.Lock()
	defer d.mu.Unlock()
	return retiredOf(&d.cfg)
}

// RetiredSNATUse collects, over one walk pass of the flow map, the ports of
// the retired SNAT spaces that reverse entries hold. Begin it before the
// pass's first entry (BeginRetiredSNATUse), show it every entry of the
// pass (Visit) and hand it to ShrinkRetiredSNAT when the pass ends.
type RetiredSNATUse struct {
	epoch  uint64
	spaces []RetiredSNAT
	addrs  []uint32   // the spaces' addresses, big-endian as in keys
	held   []portSpan // per space: the span of the ports held (empty: none)
	cur    snatGeometry
}

// BeginRetiredSNATUse starts collecting for a walk pass that starts now;
// nil when nothing is retired, or when this process has not written its
// config yet (an adoption's pinned config is its predecessor's).
func (d *Dataplane) BeginRetiredSNATUse() *RetiredSNATUse {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfgPending || d.cfg.Nretired == 0 {
		return nil
	}
	u := &RetiredSNATUse{epoch: d.retiredEpoch, spaces: retiredOf(&d.cfg), cur: geometryOf(&d.cfg)}
	for _, r := range u.spaces {
		u.addrs = append(u.addrs, be32(r.Addr))
		u.held = append(u.held, portSpan{1, 0})
	}
	return u
}

// Visit records entry (k, v): a reverse entry whose destination lies in a
// retired space and not in the current one holds that port. Any reverse
// entry counts, a terminal or XLB_F_HOLD one too: the backend may still
// send on it.
func (u *RetiredSNATUse) Visit(k *FlowKey, v *FlowValue) {
	if u == nil || k.Direction() != DirBackend {
		return
	}
	port := portFromBE16(k.DportBe)
	if _, _, ok := u.cur.bit(0, protoTCP, k.DaddrBe, port); ok {
		return
	}
	for i, a := range u.addrs {
		if a == k.DaddrBe && port >= u.spaces[i].PortLo && port <= u.spaces[i].PortHi {
			u.held[i] = u.held[i].join(portSpan{port, port})
		}
	}
}

// ShrinkRetiredSNAT writes the retired set that u's complete pass found
// held: each space narrowed to the ports held, a space none holds dropped.
// It returns the spaces dropped or narrowed, as they were (their ports no
// longer held need not stay reserved on the host), and nothing when the
// set is unchanged or when a config was written since u began (its pass
// did not see the whole life of the new set: the next pass decides).
func (d *Dataplane) ShrinkRetiredSNAT(u *RetiredSNATUse) ([]RetiredSNAT, error) {
	if u == nil {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfgPending || u.epoch != d.retiredEpoch {
		return nil, nil
	}
	var keep, released []RetiredSNAT
	for i, r := range u.spaces {
		h := u.held[i]
		if h.empty() {
			released = append(released, r)
			continue
		}
		keep = append(keep, RetiredSNAT{Addr: r.Addr, PortLo: h.lo, PortHi: h.hi})
		if h.lo != r.PortLo || h.hi != r.PortHi {
			released = append(released, r)
		}
	}
	if len(released) == 0 {
		return nil, nil
	}
	c := d.cfg
	setRetired(&c, keep)
	if err := d.writeConfigLocked(c); err != nil {
		return nil, fmt.Errorf("dataplane: shrink the retired SNAT spaces: %w", err)
	}
	d.retiredEpoch++
	return released, nil
}
