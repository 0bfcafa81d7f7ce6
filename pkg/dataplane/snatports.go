package dataplane

import (
	"fmt"
	"slices"
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
// start at b * len(addrs) * words, SNAT address a's at a * words within
// them, and bit i of that run is port lo + i.
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

// bit locates the bit of (backend, SNAT address, port): the word's index
// in the map and the mask within it. ok is false when the address is not
// one of the config's or the port lies outside the range.
func (g snatGeometry) bit(backend uint16, addrBe uint32, port uint16) (word uint32, mask uint64, ok bool) {
	a := slices.Index(g.addrs, addrBe)
	if a < 0 || port < g.lo || port > g.hi || uint32(backend) >= MaxBackends {
		return 0, 0, false
	}
	i := uint32(port - g.lo)
	if i/64 >= g.words {
		return 0, 0, false
	}
	return (uint32(backend)*uint32(len(g.addrs))+uint32(a))*g.words + i/64, 1 << (i % 64), true
}

// RebuildSNATPorts derives xlb_snat_ports from the flow map under the
// config the map holds (its SNAT addresses, range and words), and writes
// the words that differ. Bits the config places beyond the map's end are
// left out (the map is sized by Options.SNAT; a config that does not fit
// it is refused by Configure).
//
// While a program runs on the map, a port the data path takes or frees
// between the read of its entry and the write of its word may be written
// back stale: a bit left clear is caught by the data path (its
// BPF_NOEXIST insert of the reverse entry fails, and it sets the bit
// again), a bit left set keeps one port unused until the next rebuild.
func (d *Dataplane) RebuildSNATPorts() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rebuildSNATPortsLocked()
}

func (d *Dataplane) rebuildSNATPortsLocked() error {
	var c xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: read the config: %w", err)
	}
	g, m, batch := geometryOf(&c), d.objs.XlbSnatPorts, d.featureOnLocked(FeatureBatchOps)
	want := map[uint32]uint64{}
	w := newFlowWalk(d.objs.XlbFlows, batch, rawChunk)
	for end := false; !end; {
		n, e, err := w.Next()
		if err != nil {
			return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: %w", err)
		}
		end = e
		for i := range n {
			k, v := &w.Keys[i], &w.Values[i]
			if k.Direction() != DirBackend || v.Flags&FlagPortFreed != 0 {
				continue
			}
			if word, mask, ok := g.bit(v.BackendId, k.DaddrBe, portFromBE16(k.DportBe)); ok && word < m.MaxEntries() {
				want[word] |= mask
			}
		}
	}
	diff := newRawEntries(4, 8, 1)
	err := scanArray(m, batch, func(k uint32, v *uint64) {
		if *v != want[k] {
			word := want[k]
			diff.add(toBytes(&k), toBytes(&word))
		}
	})
	if err != nil {
		return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: read it: %w", err)
	}
	if err := writeEntries(m, diff, batch); err != nil {
		return fmt.Errorf("dataplane: rebuild the SNAT port bitmap: %w", err)
	}
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
