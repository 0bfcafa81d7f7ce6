package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
)

// PortMap maps a listen port to the port backends are reached on.
type PortMap struct {
	Local  uint16
	Remote uint16
}

// Settings is the data path's view of the config (DESIGN §1): where clients
// connect, which source address and port range face the backends.
type Settings struct {
	Listen     netip.Addr // listen (VIP) address, IPv4
	SNAT       netip.Addr // backend-facing source address, IPv4
	SNATPortLo uint16     // inclusive
	SNATPortHi uint16     // inclusive
	Ports      []PortMap  // 1..MaxPorts
}

func (s Settings) validate() error {
	if !s.Listen.Is4() || !s.SNAT.Is4() {
		return errors.New("dataplane: listen and SNAT addresses must be IPv4")
	}
	if len(s.Ports) == 0 || len(s.Ports) > MaxPorts {
		return fmt.Errorf("dataplane: %d port mappings, want 1..%d", len(s.Ports), MaxPorts)
	}
	if s.SNATPortLo == 0 || s.SNATPortHi < s.SNATPortLo {
		return fmt.Errorf("dataplane: bad SNAT port range %d-%d", s.SNATPortLo, s.SNATPortHi)
	}
	return nil
}

// Configure writes the settings into the config map. The shutdown flag and
// the active backend set are kept; on maps taken from pins, the pinned
// active set is kept and the shutdown flag a predecessor left is cleared
// (Adoption.ShutdownFlag).
func (d *Dataplane) Configure(s Settings) error {
	if err := s.validate(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return err
	}
	c := d.cfg
	c.ListenIpBe = be32(s.Listen)
	c.SnatIpBe = be32(s.SNAT)
	c.SnatPortLo = s.SNATPortLo
	c.SnatPortHi = s.SNATPortHi
	c.Nports = uint32(len(s.Ports))
	c.Ports = [MaxPorts]xlbPortMap{}
	for i, p := range s.Ports {
		c.Ports[i] = xlbPortMap{LocalPortBe: be16(p.Local), RemotePortBe: be16(p.Remote)}
	}
	return d.writeConfigLocked(c)
}

// SetShutdown sets or clears the shutdown flag: while set, matching non-RST
// packets are answered with a RST (seed "XLB shutdown behavior").
func (d *Dataplane) SetShutdown(on bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return err
	}
	c := d.cfg
	if on {
		c.Flags |= uint32(xlbXlbCfgFlagsXLB_CFG_SHUTDOWN)
	} else {
		c.Flags &^= uint32(xlbXlbCfgFlagsXLB_CFG_SHUTDOWN)
	}
	return d.writeConfigLocked(c)
}

func (d *Dataplane) writeConfigLocked(c xlbXlbConfig) error {
	if err := d.objs.XlbCfg.Update(uint32(0), &c, 0); err != nil {
		return fmt.Errorf("dataplane: write config map: %w", err)
	}
	d.cfg = c
	return nil
}
