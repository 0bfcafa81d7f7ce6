package dataplane

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// PortMap maps a listen port to the port backends are reached on. Remote
// 0: each backend's own port (BackendRef.Port; config remote_port left to
// a discovery provider). Local is never 0.
type PortMap struct {
	Local  uint16
	Remote uint16
}

// Settings is the data path's view of the config (DESIGN §1, §9): the
// services clients connect to, and the source addresses and port range
// that face the backends.
type Settings struct {
	SNAT       []netip.Addr // backend-facing source addresses, IPv4, 1..MaxSNATAddrs, distinct
	SNATPortLo uint16       // inclusive
	SNATPortHi uint16       // inclusive
	// Services are 1..MaxServices services; names are unique, and so is
	// (Listen, Proto, local port) across them.
	Services []ServiceSettings
}

// SNATSpace is the shape of the SNAT port bitmaps (bpf/layout.h struct
// xlb_config): how many SNAT addresses and which port range. The bitmaps
// take MaxBackends x Addrs x ceil(ports in range / 64) x 8 bytes: 2.5 MB
// for one address and the default 20,000 ports.
type SNATSpace struct {
	Addrs  int    // 1..MaxSNATAddrs
	PortLo uint16 // inclusive, >= 1
	PortHi uint16 // inclusive
	// UDP: some serving service is UDP, so the SNAT bitmaps hold a UDP
	// half beside the TCP one (XLB_SNAT_PROTOS; issue 31).
	UDP bool
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

// bitmapWords is the length of xlb_snat_ports: the TCP half, and with UDP
// the UDP half after it (bpf/snat.h snat_half).
func (s SNATSpace) bitmapWords() uint32 {
	if s.UDP {
		return 2 * s.halfWords()
	}
	return s.halfWords()
}

// halfWords is the length of one protocol's half of xlb_snat_ports, and of
// xlb_snat_tsreuse (timestamps are TCP's).
func (s SNATSpace) halfWords() uint32 { return MaxBackends * uint32(s.Addrs) * s.words() }

// Space is the SNAT space the settings need.
func (s Settings) Space() SNATSpace {
	sp := SNATSpace{Addrs: len(s.SNAT), PortLo: s.SNATPortLo, PortHi: s.SNATPortHi}
	for _, svc := range s.Services {
		sp.UDP = sp.UDP || proto(svc.Proto) == ProtoUDP
	}
	return sp
}

func (s Settings) validate(space SNATSpace) error {
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
	if err := validateServices(s.Services); err != nil {
		return err
	}
	// A listen address that is also a SNAT address has no local port in
	// the SNAT range: the data path tells a backend's packet by its port
	// there (bpf/xlb.c; pkg/config refuses the same).
	for _, svc := range s.Services {
		if !slices.Contains(s.SNAT, svc.Listen) {
			continue
		}
		for _, p := range svc.Ports {
			if p.Local >= s.SNATPortLo && p.Local <= s.SNATPortHi {
				return fmt.Errorf("dataplane: service %q: local port %d of %s, a SNAT address, is inside the SNAT port range %d-%d", svc.Name, p.Local, svc.Listen, s.SNATPortLo, s.SNATPortHi)
			}
		}
	}
	if err := s.Space().validate(); err != nil {
		return err
	}
	// A UDP half the settings do not need is kept (draining UDP pairs'
	// ports lose nothing); one they need and the bitmaps lack takes a
	// reload (a new process sizes them).
	if need := s.Space(); need != space && (need.UDP || need != (SNATSpace{Addrs: space.Addrs, PortLo: space.PortLo, PortHi: space.PortHi})) {
		return fmt.Errorf("dataplane: the settings need SNAT space %+v, the loaded bitmaps were sized for %+v", need, space)
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

// Configure writes the settings into the config map and the services'
// maps (services.go), with the SNAT reuse guard in ticks of the kernel's
// HZ (measured on the first call unless adopted, AdoptHZ). The shutdown
// flag and each service's active backend set are kept; on maps taken from
// pins, the pinned services are kept and the shutdown flag a predecessor
// left is cleared (Adoption.ShutdownFlag). SNAT addresses and ports the
// previous config (the pinned one, on maps taken from pins) handed out
// and these settings do not are retired (RetiredSNAT): the data path
// still forwards the backends' packets of the pairs that hold them.
//
// A service that turns round robin loses its tables; one whose scheduler
// or Maglev table size changed gets a new table of the set this process
// last published, if it published one (schedule.go).
//
// Services get their ids by name (assignServices): a service the data
// path holds keeps its id, a new one takes the lowest free id, and one it
// holds that the settings lack turns ServiceDraining: its SYNs pass to the
// kernel, its pairs flow on, until FreeService. It returns the settings'
// services in their order, then the draining ones by id.
//
// Errors: invalid settings, no free service id, more retired SNAT
// addresses than MaxRetiredSNAT, a map write.
func (d *Dataplane) Configure(s Settings) ([]ServiceRef, error) {
	if err := s.validate(d.snatSpace); err != nil {
		return nil, err
	}
	guard, err := d.Ticks(SNATReuseGuard)
	if err != nil {
		return nil, fmt.Errorf("dataplane: the SNAT reuse guard: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncPinnedConfigLocked(); err != nil {
		return nil, err
	}
	old, err := d.readServicesLocked()
	if err != nil {
		return nil, err
	}
	ids, err := assignServices(&old, s.Services)
	if err != nil {
		return nil, err
	}
	recs := old
	for i, svc := range s.Services {
		recs[ids[i]] = serviceRecord(svc, old[ids[i]])
	}
	for id := range recs {
		if recs[id].State == uint8(ServiceServing) && !slices.Contains(ids, uint16(id)) {
			recs[id].State = uint8(ServiceDraining)
		}
	}
	prev := d.cfg
	c := d.cfg
	c.SnatIpsBe = [MaxSNATAddrs]uint32{}
	for i, a := range s.SNAT {
		c.SnatIpsBe[i] = be32(a)
	}
	c.Nsnat = uint32(len(s.SNAT))
	c.SnatWords = s.Space().words()
	c.SnatPortLo = s.SNATPortLo
	c.SnatPortHi = s.SNATPortHi
	c.SnatReuseTicks = uint32(guard)
	c.ListenFilter = listenFilter(prev.ListenFilter, &recs)
	// SNAT addresses and ports the previous config handed out stay
	// recognised while live pairs may hold them (snatretired.go)
	retired, err := retire(&prev, &c)
	if err != nil {
		return nil, err
	}
	setRetired(&c, retired)
	// Services first (a new one SERVING, a removed one DRAINING), then
	// the prefilter, then the listen keys: a SYN finds a listen key only
	// for a serving service whose address passes the filter.
	if err := d.writeServicesLocked(&old, &recs); err != nil {
		return nil, err
	}
	if err := d.writeConfigLocked(c); err != nil {
		return nil, err
	}
	if err := d.writeListenLocked(&recs); err != nil {
		return nil, err
	}
	if err := d.configureSchedulesLocked(ids, s.Services); err != nil {
		return nil, err
	}
	d.retiredEpoch++ // a walk pass begun before this write decides nothing
	// other SNAT addresses or another range lay the bitmap out otherwise
	if err := d.syncSNATPortsLocked(prev); err != nil {
		return nil, err
	}
	refs := make([]ServiceRef, 0, len(s.Services))
	for i, id := range ids {
		ref := serviceRef(id, &recs[id])
		ref.Name = s.Services[i].Name // the record holds its first ServiceNameLen bytes
		refs = append(refs, ref)
	}
	for id := range recs {
		if recs[id].State == uint8(ServiceDraining) {
			refs = append(refs, serviceRef(uint16(id), &recs[id]))
		}
	}
	return refs, nil
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
