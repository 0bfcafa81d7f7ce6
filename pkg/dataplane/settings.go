package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// PortMap maps a listen port to the port backends are reached on. Remote
// 0: each backend's own port (BackendRef.Port; config remote_port left to
// a discovery provider). Local is never 0.
type PortMap struct {
	Local  uint16
	Remote uint16
}

// Settings is the data path's view of the config (DESIGN §1): where clients
// connect, which source addresses and port range face the backends.
type Settings struct {
	Listen     netip.Addr   // listen (VIP) address, IPv4
	SNAT       []netip.Addr // backend-facing source addresses, IPv4, 1..MaxSNATAddrs, distinct
	SNATPortLo uint16       // inclusive
	SNATPortHi uint16       // inclusive
	Ports      []PortMap    // 1..MaxPorts
}

// SNATSpace is the shape of the SNAT port bitmaps (bpf/layout.h struct
// xlb_config): how many SNAT addresses and which port range. The bitmaps
// take MaxBackends x Addrs x ceil(ports in range / 64) x 8 bytes: 2.5 MB
// for one address and the default 20,000 ports.
type SNATSpace struct {
	Addrs  int    // 1..MaxSNATAddrs
	PortLo uint16 // inclusive, >= 1
	PortHi uint16 // inclusive
}

func (s SNATSpace) validate() error {
	if s.Addrs < 1 || s.Addrs > MaxSNATAddrs {
		return fmt.Errorf("dataplane: %d SNAT addresses, want 1..%d", s.Addrs, MaxSNATAddrs)
	}
	if s.PortLo == 0 || s.PortHi < s.PortLo {
		return fmt.Errorf("dataplane: bad SNAT port range %d-%d", s.PortLo, s.PortHi)
	}
	return nil
}

// words is the bitmap words of one (backend id, SNAT address).
func (s SNATSpace) words() uint32 { return (uint32(s.PortHi) - uint32(s.PortLo) + 64) / 64 }

// bitmapWords is the length of xlb_snat_ports.
func (s SNATSpace) bitmapWords() uint32 { return MaxBackends * uint32(s.Addrs) * s.words() }

// Space is the SNAT space the settings need.
func (s Settings) Space() SNATSpace {
	return SNATSpace{Addrs: len(s.SNAT), PortLo: s.SNATPortLo, PortHi: s.SNATPortHi}
}

func (s Settings) validate(space SNATSpace) error {
	if !s.Listen.Is4() {
		return errors.New("dataplane: the listen address must be IPv4")
	}
	if len(s.SNAT) == 0 || len(s.SNAT) > MaxSNATAddrs {
		return fmt.Errorf("dataplane: %d SNAT addresses, want 1..%d", len(s.SNAT), MaxSNATAddrs)
	}
	for i, a := range s.SNAT {
		if !a.Is4() {
			return fmt.Errorf("dataplane: SNAT address %s is not IPv4", a)
		}
		for _, b := range s.SNAT[:i] {
			if a == b {
				return fmt.Errorf("dataplane: SNAT address %s twice", a)
			}
		}
	}
	if len(s.Ports) == 0 || len(s.Ports) > MaxPorts {
		return fmt.Errorf("dataplane: %d port mappings, want 1..%d", len(s.Ports), MaxPorts)
	}
	for _, p := range s.Ports {
		if p.Local == 0 {
			return errors.New("dataplane: a port mapping of local port 0")
		}
	}
	if err := s.Space().validate(); err != nil {
		return err
	}
	if s.Space() != space {
		return fmt.Errorf("dataplane: the settings need SNAT space %+v, the loaded bitmaps were sized for %+v", s.Space(), space)
	}
	return nil
}

// SNATReuseGuard is how long after the last packet from the backend of a
// pair that left it no TIME_WAIT (the client closed first, or a RST ended
// it; DESIGN §6b) a new pair may take over its SNAT port (bpf/snat.h
// snat_take_port). The old pair's last segments may still be on their
// way: a FIN or RST retransmitted because its ACK was lost comes one
// retransmission timeout later, and TCP's RTO is at least 1 s (RFC 6298
// §2.4; Linux's TCP_RTO_MIN is 200 ms). A guard counted in ticks (the 100
// ticks of layout 5) is 1 s at HZ=100 but 100 ms at HZ=1000, below both,
// so the guard is a time, converted to the kernel's HZ when the config is
// written (Configure: struct xlb_config snat_reuse_ticks, rounded up).
const SNATReuseGuard = time.Second

// Configure writes the settings into the config map, with the SNAT reuse
// guard in ticks of the kernel's HZ (measured on the first call unless
// adopted, AdoptHZ). The shutdown flag and
// the active backend set are kept; on maps taken from pins, the pinned
// active set is kept and the shutdown flag a predecessor left is cleared
// (Adoption.ShutdownFlag). SNAT addresses and ports the previous config
// (the pinned one, on maps taken from pins) handed out and these settings
// do not are retired (RetiredSNAT): the data path still forwards the
// backends' packets of the pairs that hold them. Errors: invalid
// settings, more retired SNAT addresses than MaxRetiredSNAT, a map write.
func (d *Dataplane) Configure(s Settings) error {
	if err := s.validate(d.snatSpace); err != nil {
		return err
	}
	guard, err := d.Ticks(SNATReuseGuard)
	if err != nil {
		return fmt.Errorf("dataplane: the SNAT reuse guard: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return err
	}
	prev := d.cfg
	c := d.cfg
	c.ListenIpBe = be32(s.Listen)
	c.SnatIpsBe = [MaxSNATAddrs]uint32{}
	for i, a := range s.SNAT {
		c.SnatIpsBe[i] = be32(a)
	}
	c.Nsnat = uint32(len(s.SNAT))
	c.SnatWords = s.Space().words()
	c.SnatPortLo = s.SNATPortLo
	c.SnatPortHi = s.SNATPortHi
	c.SnatReuseTicks = uint32(guard)
	c.Nports = uint32(len(s.Ports))
	c.Ports = [MaxPorts]xlbPortMap{}
	for i, p := range s.Ports {
		c.Ports[i] = xlbPortMap{LocalPortBe: be16(p.Local), RemotePortBe: be16(p.Remote)}
	}
	// SNAT addresses and ports the previous config handed out stay
	// recognised while live pairs may hold them (snatretired.go)
	retired, err := retire(&prev, &c)
	if err != nil {
		return err
	}
	setRetired(&c, retired)
	if err := d.writeConfigLocked(c); err != nil {
		return err
	}
	d.retiredEpoch++ // a walk pass begun before this write decides nothing
	// other SNAT addresses or another range lay the bitmap out otherwise
	return d.syncSNATPortsLocked(prev)
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
