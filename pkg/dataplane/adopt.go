package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// Adoption is how Load took the data path (DESIGN §6): with new, empty
// maps, or with the maps a predecessor pinned under state_dir.
type Adoption struct {
	// Start is api.StartFresh (nothing pinned, or pinning unavailable),
	// api.StartAdopted (pins of this layout and max_connections, taken
	// as they are) or api.StartMigrated (pins of an older layout or
	// another max_connections, copied entry by entry into new maps).
	Start api.Start
	// FromLayout and FromMaxConnections are the pins' layout version and
	// flow_table.max_connections; 0 when fresh.
	FromLayout         uint32
	FromMaxConnections uint32
	// OwnerPID is the process that pinned them last.
	OwnerPID uint32
	// ShutdownFlag: the pinned config had the shutdown flag set (a
	// predecessor died in its shutdown window). The next Configure
	// clears it.
	ShutdownFlag bool
	// Pairs is the connection pairs (forward entries) in the adopted or
	// migrated flow map.
	Pairs int
	// Backends maps every backend id that an adopted pair or a pinned
	// routable set references to its IPv4 address (a pair's from its
	// recipe; the routable set's where both name one). nil when fresh.
	Backends map[uint32]netip.Addr
	// Members maps every member id that an adopted pair or a pinned
	// routable set references to its service, backend id and address
	// (as Backends). nil when fresh.
	Members map[uint32]Member
	// Services are the pinned services, serving and draining, by id
	// (Services). nil when fresh.
	Services []ServiceRef
}

// Member is a (service, backend address) as the data path knows it: the
// owner of a member id's counter cells.
type Member struct {
	Service uint16     // service id
	Backend uint32     // backend id
	IP      netip.Addr // the backend's address
}

// Adoption reports how Load took the data path.
func (d *Dataplane) Adoption() Adoption {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.adoption
	a.Backends = maps.Clone(a.Backends)
	a.Members = maps.Clone(a.Members)
	a.Services = slices.Clone(a.Services)
	return a
}

// loadPlan is what Load does with the pins it found: the maps it takes as
// they are (CollectionOptions.MapReplacements) and the ones it copies from.
type loadPlan struct {
	start        api.Start
	replacements map[string]*ebpf.Map
	sources      map[string]*ebpf.Map
	// newSNATPorts: the pinned SNAT port bitmap is not of the size
	// Options.SNAT asks for, so Load makes a new one and rebuilds it from
	// the flow map (snatports.go).
	newSNATPorts bool
}

// close releases the maps of a plan that was not carried out.
func (p *loadPlan) close() {
	for _, m := range p.replacements {
		m.Close()
	}
	for _, m := range p.sources {
		m.Close()
	}
}

// unpinnedMaps are the maps of the object that are never pinned: the
// scratch space, the reaper's, the SNAT bitmap sync's and
// xlb_nexthop_ctl's and the schedule reader's slots (rewritten before
// every use), the interfaces'
// MACs (written at every attach: ifmacs.go), the fragmented datagrams in
// flight (short-lived: a successor that lost one passes the rest of that
// datagram to the kernel; bpf/frag.h), the timestamp reuse hints (a
// successor starts without: the ports held at the hand-over keep their
// hold; bpf/snat.h) and the metadata record (pinned as meta, not under
// maps/).
var unpinnedMaps = []string{xlbMapXlbScratch, xlbMapXlbReapBatch, xlbMapXlbSnatSyncBatch, xlbMapXlbNexthopBatch, xlbMapXlbIfMacs, xlbMapXlbIfMacSlots, xlbMapXlbFrags, xlbMapXlbSnatTsreuse, xlbMapXlbSnatTsreuseN, xlbMapXlbMeta, xlbMapXlbSchedInfo}

// stateMaps lists the maps of spec that are pinned: all but unpinnedMaps
// and the constants.
func stateMaps(spec *ebpf.CollectionSpec) []string {
	var out []string
	for name := range spec.Maps {
		if strings.HasPrefix(name, ".") || slices.Contains(unpinnedMaps, name) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// planLoad decides between adopting, migrating and starting fresh
// (DESIGN §6), and takes the maps it uses out of pins:
//   - same layout and max_connections: adopt every map;
//   - same layout, other max_connections: adopt every map but the flow
//     map, which is copied into one of the new size;
//   - older layout: copy every map through the converters.
//
// In the first two cases a pinned SNAT port bitmap of another size than
// Options.SNAT's (a reload changed the SNAT addresses or the port range)
// is not adopted either: Load makes one of the new size, and takeOver
// rebuilds it from the flow map, as after a migration.
//
// In the first two cases a pinned map that this build's spec does not
// match is an error (a layout change without a version bump), never a
// silently re-created empty map (Cilium PR #14469); so is a missing one.
func (d *Dataplane) planLoad(spec *ebpf.CollectionSpec, pins *pinnedState) (loadPlan, error) {
	p := loadPlan{start: api.StartFresh, replacements: map[string]*ebpf.Map{}, sources: map[string]*ebpf.Map{}}
	if pins == nil {
		return p, d.chooseCloseEvents(spec, nil)
	}
	if pins.Meta.LayoutVersion < layoutVersion {
		p.start = api.StartMigrated
		for name := range pins.Maps {
			p.sources[name] = pins.Take(name)
		}
		return p, d.chooseCloseEvents(spec, nil)
	}
	p.start = api.StartAdopted
	if pins.Meta.MaxConnections != d.maxConnections {
		p.start = api.StartMigrated
	}
	if err := d.chooseCloseEvents(spec, pins.Maps[xlbMapXlbCloseRing]); err != nil {
		return p, err
	}
	for _, name := range stateMaps(spec) {
		m := pins.Take(name)
		if m == nil {
			p.close()
			return p, fmt.Errorf("dataplane: state_dir %s: map %s is not pinned (%s) although the metadata record is of this layout (%d): the pins are incomplete, or this build added a map without bumping XLB_LAYOUT_VERSION; the pins are left as they are", pins.Dir, name, mapPath(pins.Dir, name), layoutVersion)
		}
		ms := spec.Maps[name]
		if name == xlbMapXlbSnatPorts && m.MaxEntries() != ms.MaxEntries {
			m.Close()
			p.newSNATPorts = true
			continue
		}
		if name == xlbMapXlbFlows && p.start == api.StartMigrated {
			ms = ms.Copy()
			ms.MaxEntries = m.MaxEntries()
			p.sources[name] = m
		} else {
			p.replacements[name] = m
		}
		if err := ms.Compatible(m); err != nil {
			p.close()
			return p, fmt.Errorf("dataplane: state_dir %s: pinned map %s does not match this build's although both are layout %d (%w): a layout change without a bump of XLB_LAYOUT_VERSION; refusing to re-create it empty. The pins are left as they are", pins.Dir, name, layoutVersion, err)
		}
	}
	return p, nil
}

// adoptPinnedMeta also takes the pinned metadata record over when the maps
// are adopted as they are, so that the hand-off counts are shared; after a
// migration the new record replaces it at Pin.
func adoptPinnedMeta(p *loadPlan, dir string) error {
	if p.start != api.StartAdopted {
		return nil
	}
	m, err := ebpf.LoadPinnedMap(metaPath(dir), nil)
	if err != nil {
		return fmt.Errorf("dataplane: state_dir %s: open %s: %w", dir, metaPath(dir), err)
	}
	p.replacements[xlbMapXlbMeta] = m
	return nil
}

// takeOver finishes a Load from pins: the migration's first copy, the
// config as pinned (its shutdown flag cleared at the next Configure), and
// the Adoption report. A migration, and a new SNAT port bitmap, rebuild
// the bitmap from the flow map after each copy (the second one at Attach
// and Pin: catchUp).
func (d *Dataplane) takeOver(p loadPlan, pins *pinnedState) error {
	d.adoption = Adoption{Start: p.start}
	if pins == nil {
		return nil
	}
	from := pins.Meta.LayoutVersion
	if len(p.sources) > 0 || p.newSNATPorts {
		mig, err := newMigration(currentLayout(), from, p.sources, d.mapsByName(), d.featureOn(FeatureBatchOps), d.migrationHost())
		if err == nil {
			mig.Derive = d.rebuildSNATPortsLocked
			if err = mig.CopyAll(); err != nil {
				mig.Close()
			}
		} else {
			for _, m := range p.sources {
				m.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("dataplane: state_dir %s: migrate the pins of layout %d, max_connections %d to layout %d, max_connections %d: %w; the pins are left as they are",
				pins.Dir, from, pins.Meta.MaxConnections, layoutVersion, d.maxConnections, err)
		}
		d.migration = mig
	}
	d.fromPins, d.cfgPending = true, true
	if err := d.objs.XlbCfg.Lookup(uint32(0), &d.cfg); err != nil {
		return fmt.Errorf("dataplane: read the pinned config: %w", err)
	}
	shutdown := uint32(xlbXlbCfgFlagsXLB_CFG_SHUTDOWN)
	d.adoption.FromLayout, d.adoption.FromMaxConnections = from, pins.Meta.MaxConnections
	d.adoption.OwnerPID, d.adoption.ShutdownFlag = pins.Meta.OwnerPid, d.cfg.Flags&shutdown != 0
	d.prevCounts = [2]uint64{pins.Meta.HotUpgradesOk, pins.Meta.HotUpgradesFailed}
	d.cfg.Flags &^= shutdown
	return d.countAdopted()
}

// migrationHost is the host as converters see it: the kernel's neighbour
// table in the caller's network namespace, the data path's clock and its
// next-hop slots.
func (d *Dataplane) migrationHost() migrationHost {
	return migrationHost{Neighbours: kernelNeighbours, Now: func() (uint32, error) {
		j, err := d.KernelNow()
		return j.Low32(), err
	}, ClaimNextHop: claimNextHopOf}
}

// kernelNeighbours lists the IPv4 neighbours of ifindex that hold an
// Ethernet address (any state but failed and incomplete).
func kernelNeighbours(ifindex int) ([]neighbour, error) {
	ns, err := netlink.NeighList(ifindex, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	var out []neighbour
	for _, n := range ns {
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok || len(n.HardwareAddr) != 6 || n.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) != 0 {
			continue
		}
		out = append(out, neighbour{IP: ip.Unmap(), MAC: [6]byte(n.HardwareAddr)})
	}
	return out, nil
}

// countAdopted fills Adoption.Pairs, Backends, Members and Services with
// one pass over the flow map's forward entries, the services and their
// active routable sets.
func (d *Dataplane) countAdopted() error {
	ad := &d.adoption
	ad.Backends = map[uint32]netip.Addr{}
	ad.Members = map[uint32]Member{}
	w := d.NewFlowWalk(rawChunk)
	for end := false; !end; {
		n, e, err := w.Next()
		if err != nil {
			return err
		}
		end = e
		for i := range n {
			if w.Keys[i].Direction() == DirClient {
				v := &w.Values[i]
				ad.Pairs++
				ad.Backends[uint32(v.BackendId)] = v.NewDst().Addr()
				ad.Members[uint32(v.MemberId)] = Member{Service: v.ServiceId, Backend: uint32(v.BackendId), IP: v.NewDst().Addr()}
			}
		}
	}
	recs, err := d.readServicesLocked()
	if err != nil {
		return err
	}
	ad.Services = []ServiceRef{}
	for id := range recs {
		r := &recs[id]
		if ServiceState(r.State) == ServiceFree {
			continue
		}
		ad.Services = append(ad.Services, serviceRef(uint16(id), r))
		var set xlbBackendSet
		if err := d.objs.XlbBackendSets.Lookup(uint32(id)*2+uint32(r.ActiveSet&1), &set); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("dataplane: read the pinned routable set of service %d: %w", id, err)
		}
		for _, b := range setRefs(&set) {
			ad.Backends[b.ID] = b.IP
			ad.Members[b.Member] = Member{Service: uint16(id), Backend: b.ID, IP: b.IP}
		}
	}
	return nil
}

// syncPinnedConfigLocked runs before this process first writes the config
// or a routable set on maps it took from pins: the predecessor may have
// published since Load (a hand-off quiesces it only after Load), so the
// userspace-only maps are copied again after a migration, and the config
// is taken as the map holds it (its active routable slot above all), the
// shutdown flag cleared. Callers hold d.mu.
func (d *Dataplane) syncPinnedConfigLocked() error {
	if !d.cfgPending {
		return nil
	}
	if d.migration != nil {
		if err := d.migration.Refresh(); err != nil {
			return fmt.Errorf("dataplane: copy the config again from the pins: %w", err)
		}
	}
	var pinned xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &pinned); err != nil {
		return fmt.Errorf("dataplane: read the pinned config: %w", err)
	}
	pinned.Flags &^= uint32(xlbXlbCfgFlagsXLB_CFG_SHUTDOWN)
	d.cfg, d.cfgPending = pinned, false
	return nil
}
