package dataplane

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"

	"github.com/cilium/ebpf"
)

// SNAT port bitmaps (bpf/layout.h struct xlb_config comment, DESIGN §6b):
// xlb_snat_ports holds one bit per (backend id, SNAT address, port), set
// while the port is taken toward that backend. The data path keeps it,
// but it is derived state: a reverse (DirBackend) entry whose key's
// destination is SNAT address a and port p within the range, whose
// backend is b and which lacks FlagPortFreed holds bit (b, a, p). So
// whenever the bitmap cannot be taken over as it is -- after a migration
// (its flow map is new), when the pinned bitmap's size is not the one
// Options.SNAT asks for, or when the config's SNAT addresses or range
// change -- it is rebuilt from the flow map.

// snatGeometry is how a config lays the bitmap out: backend id b's words
// of protocol half h (0 TCP, 1 UDP: bpf/snat.h snat_half) start at
// (h * MaxBackends + b) * len(addrs) * words, SNAT address a's at a *
// words within them, and bit i of that run is port lo + i.
type snatGeometry struct {
	addrs  []uint32 // snat_ips_be[:nsnat]
	lo, hi uint16
	words  uint32 // per (backend id, address)
}

func geometryOf(c *xlbXlbConfig) snatGeometry {
	n := min(int(c.Nsnat), len(c.SnatIpsBe))
	return snatGeometry{addrs: slices.Clone(c.SnatIpsBe[:n]), lo: c.SnatPortLo, hi: c.SnatPortHi, words: c.SnatWords}
}

func (g snatGeometry) equal(o snatGeometry) bool {
	return slices.Equal(g.addrs, o.addrs) && g.lo == o.lo && g.hi == o.hi && g.words == o.words
}

// half is the bitmap half of IP protocol proto (a flow key's).
func half(proto uint8) uint32 {
	if proto == IPProtoUDP {
		return 1
	}
	return 0
}

// bit locates the bit of (backend, protocol, SNAT address, port): the
// word's index in the map and the mask within it. ok is false when the
// address is not one of the config's or the port lies outside the range.
func (g snatGeometry) bit(backend uint16, proto uint8, addrBe uint32, port uint16) (word uint32, mask uint64, ok bool) {
	a := slices.Index(g.addrs, addrBe)
	if a < 0 || port < g.lo || port > g.hi || uint32(backend) >= MaxBackends {
		return 0, 0, false
	}
	i := uint32(port - g.lo)
	if i/64 >= g.words {
		return 0, 0, false
	}
	row := half(proto)*MaxBackends + uint32(backend)
	return (row*uint32(len(g.addrs))+uint32(a))*g.words + i/64, 1 << (i % 64), true
}

// RebuildSNATPorts derives xlb_snat_ports from the flow map under the
// config the map holds (its SNAT addresses, range and words). It never
// writes a word: it sets the bits of the reverse entries that hold their
// port and the map lacks, and clears the bits no entry holds, through
// the kernel (bpf/snatsync.h xlb_snat_sync), which checks each against
// the live entries just before its atomic OR or AND. So a program running
// on the map meanwhile loses nothing: a port it frees after the walk read
// its entry is not set again (the bitmap leaked such ports when whole
// words were written back), and a port it takes keeps its bit unless the
// pair's backend address and port are not among the candidates the walk
// found for the backend id, which costs the allocator one failed insert
// (bpf/snat.h). Bits the config places beyond the map's end are left out
// (the map is sized by Options.SNAT; a config that does not fit it is
// refused by Configure), and set bits the config gives no port (past the
// range in a word's tail) are left as they are: no allocation reads them.
func (d *Dataplane) RebuildSNATPorts() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rebuildSNATPortsLocked()
}

// snatHolder is a reverse entry's key and where its port's bit lies.
type snatHolder struct {
	key  FlowKey
	word uint32
	mask uint64
}

// snatPeer is a backend address, port and protocol a reverse entry
// names: with a SNAT address and port, the key of a candidate holder.
type snatPeer struct {
	saddrBe uint32
	sportBe uint16
	proto   uint8
}

func (d *Dataplane) rebuildSNATPortsLocked() error {
	var c xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: read the config: %w", err)
	}
	g, m, batch := geometryOf(&c), d.objs.XlbSnatPorts, d.featureOnLocked(FeatureBatchOps)
	want := map[uint32]uint64{}
	var holders []snatHolder
	peers := map[uint16][]snatPeer{} // by backend id: every backend address and port a reverse entry names
	w := newFlowWalk(d.objs.XlbFlows, batch, rawChunk)
	for end := false; !end; {
		n, e, err := w.Next()
		if err != nil {
			return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: %w", err)
		}
		end = e
		for i := range n {
			k, v := &w.Keys[i], &w.Values[i]
			if k.Direction() != DirBackend {
				continue
			}
			p := snatPeer{saddrBe: k.SaddrBe, sportBe: k.SportBe, proto: k.Proto}
			if !slices.Contains(peers[v.BackendId], p) {
				peers[v.BackendId] = append(peers[v.BackendId], p)
			}
			if v.Flags&FlagPortFreed != 0 {
				continue
			}
			if word, mask, ok := g.bit(v.BackendId, k.Proto, k.DaddrBe, portFromBE16(k.DportBe)); ok && word < m.MaxEntries() {
				want[word] |= mask
				holders = append(holders, snatHolder{key: *k, word: word, mask: mask})
			}
		}
	}
	if d.onSNATWalk != nil {
		d.onSNATWalk()
	}
	cur := map[uint32]uint64{}
	err := scanArray(m, batch, func(k uint32, v *uint64) {
		if *v != 0 {
			cur[k] = *v
		}
	})
	if err != nil {
		return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: read it: %w", err)
	}
	s := d.newSNATSync()
	for _, h := range holders {
		if cur[h.word]&h.mask == 0 {
			if err := s.add(xlbSnatSyncReq{Key: h.key, Op: snatSyncSet}); err != nil {
				return err
			}
		}
	}
	for _, word := range slices.Sorted(maps.Keys(cur)) {
		for stale := cur[word] &^ want[word]; stale != 0; stale &= stale - 1 {
			backend, proto, addrBe, port, ok := g.port(word, uint(bits.TrailingZeros64(stale)))
			if !ok {
				continue
			}
			var cands []snatPeer
			for _, p := range peers[backend] {
				if p.proto == proto {
					cands = append(cands, p)
				}
			}
			if len(cands) == 0 {
				cands = []snatPeer{{proto: proto}} // no candidate: a key no entry has
			}
			if err := s.clear(backend, addrBe, port, cands); err != nil {
				return err
			}
		}
	}
	return s.flush()
}

// port is the (backend id, IP protocol, SNAT address, port) of bit i of
// word, the inverse of bit; ok is false for a bit the config gives no
// port.
func (g snatGeometry) port(word uint32, i uint) (backend uint16, proto uint8, addrBe uint32, port uint16, ok bool) {
	if g.words == 0 || len(g.addrs) == 0 {
		return 0, 0, 0, 0, false
	}
	run := word / g.words
	row, a := run/uint32(len(g.addrs)), run%uint32(len(g.addrs))
	h, b := row/MaxBackends, row%MaxBackends
	off := (word%g.words)*64 + uint32(i)
	if h >= 2 || g.hi < g.lo || off > uint32(g.hi-g.lo) {
		return 0, 0, 0, 0, false
	}
	proto = protoTCP
	if h == 1 {
		proto = IPProtoUDP
	}
	return uint16(b), proto, g.addrs[a], g.lo + uint16(off), true
}

const (
	snatSyncSet   = xlbXlbSnatSyncOpXLB_SNAT_SYNC_SET
	snatSyncCheck = xlbXlbSnatSyncOpXLB_SNAT_SYNC_CHECK
	snatSyncClear = xlbXlbSnatSyncOpXLB_SNAT_SYNC_CLEAR
)

// snatSync batches requests to the SNAT bitmap sync (bpf/snatsync.h) and
// runs it once a batch is full and at flush. Callers hold d.mu.
type snatSync struct {
	d *Dataplane
	b xlbSnatSyncBatch
}

func (d *Dataplane) newSNATSync() *snatSync { return &snatSync{d: d} }

// add queues one request.
func (s *snatSync) add(q xlbSnatSyncReq) error {
	if int(s.b.Count) == len(s.b.Reqs) {
		if err := s.flush(); err != nil {
			return err
		}
	}
	s.b.Reqs[s.b.Count] = q
	s.b.Count++
	return nil
}

// clear queues the clearing of the bit of (backend, SNAT address, port)
// unless one of the reverse entries toward peers holds it: one CHECK per
// candidate and the CLEAR, in one run of the program (a run keeps what
// the CHECKs found).
func (s *snatSync) clear(backend uint16, addrBe uint32, port uint16, peers []snatPeer) error {
	if len(peers) == 0 {
		peers = []snatPeer{{proto: protoTCP}} // no candidate: a key no entry has
	}
	if len(peers) > len(s.b.Reqs) {
		return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: backend id %d has %d backend addresses and ports, more than a batch of %d", backend, len(peers), len(s.b.Reqs))
	}
	if int(s.b.Count)+len(peers) > len(s.b.Reqs) {
		if err := s.flush(); err != nil {
			return err
		}
	}
	for i, p := range peers {
		op := snatSyncCheck
		if i == len(peers)-1 {
			op = snatSyncClear
		}
		k := FlowKey{SaddrBe: p.saddrBe, DaddrBe: addrBe, SportBe: p.sportBe, DportBe: be16(port), Proto: p.proto, Dir: uint8(DirBackend)}
		s.b.Reqs[s.b.Count] = xlbSnatSyncReq{Key: k, BackendId: backend, Op: op}
		s.b.Count++
	}
	return nil
}

// flush runs the program over the queued requests.
func (s *snatSync) flush() error {
	if s.b.Count == 0 {
		return nil
	}
	if err := s.d.objs.XlbSnatSyncBatch.Update(uint32(0), &s.b, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: write requests: %w", err)
	}
	ret, err := runOnce(s.d.objs.XlbSnatSync)
	if err != nil {
		return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: run: %w", err)
	}
	if ret != xdpPass {
		return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: the sync returned %d", ret)
	}
	s.b.Count = 0
	return nil
}

// syncSNATPortsLocked rebuilds the bitmap when the config the map holds
// now lays it out otherwise than prev did (other SNAT addresses, in
// another order, or another range): Configure calls it after writing a
// config. Callers hold d.mu.
func (d *Dataplane) syncSNATPortsLocked(prev xlbXlbConfig) error {
	var c xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("dataplane: read the config: %w", err)
	}
	if geometryOf(&c).equal(geometryOf(&prev)) {
		return nil
	}
	return d.rebuildSNATPortsLocked()
}
