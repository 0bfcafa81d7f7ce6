package dataplane

import (
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// Test access for the packet fixtures of package dataplane_test.

// FixtureWscaleUnknown is flow_value.wscale of a pair migrated from layout
// 2, whose SYNs XLB never saw (bpf/layout.h XLB_WSCALE_UNKNOWN).
const FixtureWscaleUnknown = uint8(xlbXlbLimitsXLB_WSCALE_UNKNOWN)

// FixtureSNATReuseTicks is the SNAT reuse guard the config map holds
// (bpf/layout.h struct xlb_config snat_reuse_ticks), in jiffies.
func (d *Dataplane) FixtureSNATReuseTicks() (Jiffies, error) {
	var cfg xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &cfg); err != nil {
		return 0, fmt.Errorf("read the config: %w", err)
	}
	return Jiffies(cfg.SnatReuseTicks), nil
}

// FixtureTakenSNATPorts lists, in order, the ports whose bit is set in the
// SNAT port bitmap (bpf/maps.h xlb_snat_ports) toward backend id for SNAT
// address number addr (its index in Settings.SNAT): the ports the data
// path holds taken toward that backend. It reads the geometry the data
// path uses from the config map (bpf/layout.h struct xlb_config: nsnat,
// snat_words, the port range) and fails on a set bit beyond the range.
func (d *Dataplane) FixtureTakenSNATPorts(backend uint32, addr int) ([]uint16, error) {
	var cfg xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &cfg); err != nil {
		return nil, fmt.Errorf("read the config: %w", err)
	}
	if addr < 0 || uint32(addr) >= cfg.Nsnat {
		return nil, fmt.Errorf("SNAT address %d of %d", addr, cfg.Nsnat)
	}
	ports := uint32(cfg.SnatPortHi) - uint32(cfg.SnatPortLo) + 1
	base := backend*cfg.Nsnat*cfg.SnatWords + uint32(addr)*cfg.SnatWords
	var out []uint16
	for w := range cfg.SnatWords {
		var word uint64
		if err := d.objs.XlbSnatPorts.Lookup(base+w, &word); err != nil {
			return nil, fmt.Errorf("read bitmap word %d: %w", base+w, err)
		}
		for b := range uint32(64) {
			if word&(1<<b) == 0 {
				continue
			}
			off := w*64 + b
			if off >= ports {
				return nil, fmt.Errorf("bit %d of word %d is set: port offset %d is outside the range of %d ports", b, base+w, off, ports)
			}
			out = append(out, uint16(uint32(cfg.SnatPortLo)+off))
		}
	}
	return out, nil
}

// FixtureAgeFragments makes every datagram the fragment map remembers
// (bpf/frag.h xlb_frags) older than XLB_FRAG_TTL_MS by moving its time
// stamp back, so its later fragments no longer follow it. It returns how
// many entries it aged.
func (d *Dataplane) FixtureAgeFragments() (int, error) {
	var (
		k   xlbFragKey
		v   xlbFragPorts
		n   int
		age = uint64(xlbXlbLimitsXLB_FRAG_TTL_MS+1) * 1_000_000
	)
	var keys []xlbFragKey
	it := d.objs.XlbFrags.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := d.objs.XlbFrags.Lookup(&k, &v); err != nil {
			return n, err
		}
		v.AtNs -= age
		if err := d.objs.XlbFrags.Update(&k, &v, 0); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// FixtureFragments is how many datagrams the fragment map remembers.
func (d *Dataplane) FixtureFragments() (int, error) {
	var (
		k xlbFragKey
		v xlbFragPorts
		n int
	)
	it := d.objs.XlbFrags.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	return n, it.Err()
}

// FixtureOnSNATRebuildWalk makes RebuildSNATPorts run f once it has walked
// the flow map and before it reads and changes the bitmap: what the data
// path does between the two.
func (d *Dataplane) FixtureOnSNATRebuildWalk(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onSNATWalk = f
}

// FixtureMigration copies d's flow map into another data path's as a
// max_connections migration copies its predecessor's (pkg/dataplane/pins): the
// first copy at FixtureMigrate, the second at CatchUp, the other data
// path's SNAT port bitmap rebuilt after each. d's program keeps running
// on its own maps meanwhile: the predecessor's.
type FixtureMigration struct {
	to *Dataplane
	m  *migration
}

// FixtureMigrate starts a migration of d's flow map into to's, which must
// be empty, configured with d's SNAT addresses and range.
func (d *Dataplane) FixtureMigrate(to *Dataplane) (*FixtureMigration, error) {
	src, err := d.objs.XlbFlows.Clone()
	if err != nil {
		return nil, err
	}
	to.mu.Lock()
	defer to.mu.Unlock()
	mig, err := newMigration(currentLayout(), layoutVersion, map[string]*ebpf.Map{xlbMapXlbFlows: src}, to.mapsByName(),
		to.featureOnLocked(FeatureBatchOps), to.migrationHost())
	if err != nil {
		src.Close()
		return nil, err
	}
	mig.Derive = to.rebuildSNATPortsLocked
	if err := mig.CopyAll(); err != nil {
		mig.Close()
		return nil, err
	}
	return &FixtureMigration{to: to, m: mig}, nil
}

// CatchUp runs the migration's second copy.
func (f *FixtureMigration) CatchUp() error {
	f.to.mu.Lock()
	defer f.to.mu.Unlock()
	return f.m.CatchUp()
}

// Close releases the migration's source map.
func (f *FixtureMigration) Close() error { return f.m.Close() }

// FixtureSetSNATPortBit sets (or clears) the bit of port toward backend id
// for SNAT address number addr, as an allocation claims it (snat.h).
func (d *Dataplane) FixtureSetSNATPortBit(backend uint32, addr int, port uint16, set bool) error {
	var cfg xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &cfg); err != nil {
		return fmt.Errorf("read the config: %w", err)
	}
	if addr < 0 || uint32(addr) >= cfg.Nsnat {
		return fmt.Errorf("SNAT address %d of %d", addr, cfg.Nsnat)
	}
	w, mask, ok := geometryOf(&cfg).bit(uint16(backend), 6, cfg.SnatIpsBe[addr], port)
	if !ok {
		return fmt.Errorf("port %d has no bit", port)
	}
	var word uint64
	if err := d.objs.XlbSnatPorts.Lookup(w, &word); err != nil {
		return err
	}
	if set {
		word |= mask
	} else {
		word &^= mask
	}
	return d.objs.XlbSnatPorts.Update(w, word, ebpf.UpdateExist)
}

// FixtureReload configures the data path with s as a successor process
// (systemctl reload) loaded with Options.SNAT = s.Space() would over the
// same maps: Configure over the config this process wrote. The SNAT
// bitmap, sized for the space the data path was loaded with, must hold
// s's (a successor whose bitmap differs in size gets a new one, rebuilt
// from the flow map the same way).
func (d *Dataplane) FixtureReload(s Settings) error {
	if s.Space().bitmapWords() > d.objs.XlbSnatPorts.MaxEntries() {
		return fmt.Errorf("SNAT space %+v needs %d bitmap words, the map has %d", s.Space(), s.Space().bitmapWords(), d.objs.XlbSnatPorts.MaxEntries())
	}
	d.mu.Lock()
	d.snatSpace = s.Space()
	d.mu.Unlock()
	_, err := d.Configure(s)
	return err
}

// OneService is the services of settings that balance one service, as
// layouts 2 to 8 did: named DefaultTestService, on listen with ports.
func OneService(listen netip.Addr, ports []PortMap) []ServiceSettings {
	return []ServiceSettings{{Name: DefaultTestService, Listen: listen, Proto: ProtoTCP, Ports: ports}}
}

// DefaultTestService is OneService's name (the config's default name).
const DefaultTestService = "xlb"

// Listen is the listen address of s's first service.
func (s Settings) Listen() netip.Addr { return s.Services[0].Listen }

// Ports are the port mappings of s's first service.
func (s Settings) Ports() []PortMap { return s.Services[0].Ports }

// WithPorts is s with its first service's port mappings replaced (the
// services copied, s's left as they are).
func (s Settings) WithPorts(ports []PortMap) Settings {
	s.Services = append([]ServiceSettings(nil), s.Services...)
	s.Services[0].Ports = ports
	return s
}

// FixtureRoundRobin is service svc's round-robin position (xlb_rr).
func (d *Dataplane) FixtureRoundRobin(svc uint16) (uint64, error) {
	var rr uint64
	err := d.objs.XlbRr.Lookup(uint32(svc), &rr)
	return rr, err
}

// FixtureSNATPortBit reports whether the bit of port toward backend id for
// SNAT address number addr is set in protocol proto's half of the bitmap.
func (d *Dataplane) FixtureSNATPortBit(backend uint32, proto uint8, addr int, port uint16) (bool, error) {
	var cfg xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &cfg); err != nil {
		return false, fmt.Errorf("read the config: %w", err)
	}
	if addr < 0 || uint32(addr) >= cfg.Nsnat {
		return false, fmt.Errorf("SNAT address %d of %d", addr, cfg.Nsnat)
	}
	w, mask, ok := geometryOf(&cfg).bit(uint16(backend), proto, cfg.SnatIpsBe[addr], port)
	if !ok {
		return false, fmt.Errorf("port %d has no bit", port)
	}
	var word uint64
	if err := d.objs.XlbSnatPorts.Lookup(w, &word); err != nil {
		return false, err
	}
	return word&mask != 0, nil
}

// FixtureSNATCursors reads every SNAT port cursor (XLB_SNAT_CURSORS: TCP's
// by backend id, then UDP's).
func (d *Dataplane) FixtureSNATCursors() ([]uint32, error) {
	out := make([]uint32, d.objs.XlbSnatCursors.MaxEntries())
	for i := range out {
		if err := d.objs.XlbSnatCursors.Lookup(uint32(i), &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
