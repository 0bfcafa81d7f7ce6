package dataplane

import "fmt"

// Test access for the packet fixtures of package dataplane_test.

// FixtureWscaleUnknown is flow_value.wscale of a pair migrated from layout
// 2, whose SYNs XLB never saw (bpf/layout.h XLB_WSCALE_UNKNOWN).
const FixtureWscaleUnknown = uint8(xlbXlbLimitsXLB_WSCALE_UNKNOWN)

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
	return d.Configure(s)
}
