package dataplane

import (
	"fmt"
	"math/rand/v2"

	"github.com/cilium/ebpf"
)

// ResetBackend gives backend id a fresh start before another backend
// address reuses it (issue 14: "a reused id starts with fresh statistics
// and a fresh port cursor"): its SNAT port bitmap rows (both protocols'), for every SNAT
// address of the config the map holds (xlb_snat_ports), and its
// timestamp state (xlb_backend_ts: unknown) are zeroed, and its SNAT port
// cursors (TCP and UDP) restart, at a random port with Options.RandomSNATCursors, else
// at the range's start. The counters are a member's since layout 9
// (ResetMember).
//
// The caller guarantees that no pair references id (a maintenance sample
// taken after the backend left showed none) and that no routable set
// holds it. An error names the map that failed; the maps before it are
// reset.
func (d *Dataplane) ResetBackend(id uint32) error {
	if id >= MaxBackends {
		return fmt.Errorf("dataplane: reset backend id %d: out of range (0..%d)", id, MaxBackends-1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var c xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("dataplane: reset backend id %d: read the config: %w", id, err)
	}
	words := c.Nsnat * c.SnatWords // the id's bitmap words per protocol (snatGeometry)
	batch := d.featureOnLocked(FeatureBatchOps)
	if err := zeroCells(d.objs.XlbSnatPorts, id*words, words, batch); err != nil {
		return fmt.Errorf("dataplane: reset backend id %d: %w", id, err)
	}
	// the UDP half, when the bitmap has one (bpf/snat.h snat_half)
	if udp := (MaxBackends + id) * words; udp+words <= d.objs.XlbSnatPorts.MaxEntries() {
		if err := zeroCells(d.objs.XlbSnatPorts, udp, words, batch); err != nil {
			return fmt.Errorf("dataplane: reset backend id %d: its UDP ports: %w", id, err)
		}
	}
	if err := zeroCells(d.objs.XlbBackendTs, id, 1, batch); err != nil {
		return fmt.Errorf("dataplane: reset backend id %d: its timestamp state: %w", id, err)
	}
	cursor := uint32(0)
	if d.randomCursors {
		cursor = rand.Uint32()
	}
	if err := d.objs.XlbSnatCursors.Update(id, cursor, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("dataplane: reset backend id %d: the SNAT port cursor: %w", id, err)
	}
	if d.randomCursors {
		cursor = rand.Uint32()
	}
	if err := d.objs.XlbSnatCursors.Update(MaxBackends+id, cursor, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("dataplane: reset backend id %d: the UDP SNAT port cursor: %w", id, err)
	}
	return nil
}

// ResetMember gives member id m a fresh start before another (service,
// backend address) reuses it: it zeroes the member's cells of every
// per-backend counter map: its traffic and pairs opened
// (xlb_backend_stats), its pair events (xlb_pair_events), the reaper's
// removals (xlb_reaped: the maintenance loop's per-backend gauges are
// differences of these counters, so they are reset together) and its
// handshake histogram (xlb_handshake).
//
// The caller guarantees that no pair references m and that no routable
// set holds it: a packet of a pair that still did would count into the
// fresh cells. An error names the map that failed; the maps before it
// are reset.
func (d *Dataplane) ResetMember(m uint32) error {
	if m >= uint32(MaxMembers) {
		return fmt.Errorf("dataplane: reset member id %d: out of range (0..%d)", m, MaxMembers-1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	batch := d.featureOnLocked(FeatureBatchOps)
	for _, r := range []struct {
		m     *ebpf.Map
		cells uint32
	}{
		{d.objs.XlbBackendStats, uint32(xlbXlbLimitsXLB_DIRS)},
		{d.objs.XlbPairEvents, uint32(xlbXlbLimitsXLB_PAIR_EVENTS)},
		{d.objs.XlbReaped, uint32(xlbXlbLimitsXLB_REAPED_REASONS)},
		{d.objs.XlbHandshake, uint32(xlbXlbLimitsXLB_HS_CELLS)},
	} {
		if err := zeroCells(r.m, m*r.cells, r.cells, batch); err != nil {
			return fmt.Errorf("dataplane: reset member id %d: %w", m, err)
		}
	}
	return nil
}

// zeroCells writes zero (every CPU's, in a per-CPU map) into keys first..
// first+n-1 of the array m, those below its max_entries.
func zeroCells(m *ebpf.Map, first, n uint32, batch bool) error {
	ncpu, err := mapCPUs(m)
	if err != nil {
		return err
	}
	r := newRawEntries(4, int(m.ValueSize()), ncpu)
	zero := make([]byte, int(m.ValueSize())*ncpu)
	for k := first; k < first+n && k < m.MaxEntries(); k++ {
		r.Add(toBytes(&k), zero)
	}
	return writeEntries(m, r, batch)
}
