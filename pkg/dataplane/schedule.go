package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/sched"
)

// The schedules of the table schedulers (layout 10; DESIGN §9;
// bpf/layout.h struct sched_head). A weighted round robin or Maglev
// service's routable set slot (service*2 + set, as xlb_backend_sets) may
// hold, in xlb_sched, an inner array: key 0 its struct sched_head, keys
// 1..ceil(len/32) its entries (positions in that slot's set). SetRoutable
// builds one with pkg/sched for every set it publishes, into a new inner
// map (never rewritten in place), puts it at the inactive slot beside the
// set and flips the service's active_set: one pointer swap for both.
// A round robin service has none (Configure drops them when a service
// turns round robin, FreeService when it is freed). The inner maps live as
// long as the pinned outer map holds them, so a successor of the same
// layout adopts them as they are.

// Schedule is the table a weighted round robin or Maglev service's
// routable set was last published with (SetRoutable), as status and
// metrics show it.
type Schedule struct {
	// Scheduler is SchedulerWeightedRR or SchedulerMaglev.
	Scheduler string
	// Hash is the Maglev hash (MaglevHashFiveTuple, MaglevHashClientIP);
	// empty for weighted round robin.
	Hash string
	// Len is the table's entries: the Maglev table size, or the weighted
	// round robin cycle's length. 0: no table yet.
	Len uint32
	// Slots are each member's entries in the table, by member id.
	Slots map[uint32]uint32
	// Rebuilds counts the tables built for the service since it took its
	// id (sched_head.rebuilds: it continues across hot upgrades).
	Rebuilds uint64
	// BuiltAt is when the table was built.
	BuiltAt time.Time
}

// schedState is what this process knows of one service's scheduler.
type schedState struct {
	kind sched.Kind
	hash string
	size uint32 // the Maglev table's size (Configure)
	// refs is the set this process last published (SetRoutable), with
	// the names and weights a table is built from; nil before its first
	// one (an inherited set is never built from: its names are lost).
	refs []BackendRef
	// cur is the live set's table: built by this process, or read from
	// the pins once after an adoption (read).
	cur  *Schedule
	read bool
}

// innerFlag is BPF_F_INNER_MAP: every schedule's array has it, as the
// outer map's template does, so their lengths may differ.
const innerFlag = unix.BPF_F_INNER_MAP

// schedChunk is XLB_SCHED_CHUNK: entries per struct sched_chunk.
const schedChunk = uint32(xlbXlbLimitsXLB_SCHED_CHUNK)

// schedulerID is a scheduler's id in struct service (enum xlb_scheduler).
func schedulerID(name string) uint8 {
	switch name {
	case SchedulerWeightedRR:
		return schedulerWeightedRRID
	case SchedulerMaglev:
		return schedulerMaglevID
	}
	return schedulerRoundRobinID
}

// schedKind is the pkg/sched kind of a record's scheduler id.
func schedKind(id uint8) sched.Kind {
	switch id {
	case schedulerWeightedRRID:
		return sched.WeightedRoundRobin
	case schedulerMaglevID:
		return sched.Maglev
	}
	return sched.RoundRobin
}

// validateScheduler checks a service's scheduler, Maglev hash and table
// size: the table size only matters for Maglev, where it must pass
// sched.ValidMaglevSize.
func validateScheduler(s ServiceSettings) error {
	switch s.Scheduler {
	case "", SchedulerRoundRobin, SchedulerWeightedRR:
	case SchedulerMaglev:
		if s.MaglevHash != "" && s.MaglevHash != MaglevHashFiveTuple && s.MaglevHash != MaglevHashClientIP {
			return fmt.Errorf("dataplane: service %q: Maglev hash %q, want %s or %s", s.Name, s.MaglevHash, MaglevHashFiveTuple, MaglevHashClientIP)
		}
		if err := sched.ValidMaglevSize(s.TableSize); err != nil {
			return fmt.Errorf("dataplane: service %q: %w", s.Name, err)
		}
	default:
		return fmt.Errorf("dataplane: service %q: scheduler %q, want %s, %s or %s", s.Name, s.Scheduler, SchedulerRoundRobin, SchedulerWeightedRR, SchedulerMaglev)
	}
	return nil
}

// schedStateLocked is service svc's scheduler state, made on first use.
// Callers hold d.mu.
func (d *Dataplane) schedStateLocked(svc uint16) *schedState {
	if d.scheds == nil {
		d.scheds = map[uint16]*schedState{}
	}
	st := d.scheds[svc]
	if st == nil {
		st = &schedState{}
		d.scheds[svc] = st
	}
	return st
}

// configureSchedulesLocked applies the settings' schedulers after
// Configure wrote the records: a round robin service's schedules are
// dropped; a table scheduler's service whose scheduler or Maglev table
// size changed gets a table of the set this process last published (one
// it inherited waits for the first SetRoutable: its SYNs use round robin
// until then, counted as SchedFallbacks). Callers hold d.mu.
func (d *Dataplane) configureSchedulesLocked(ids []uint16, svcs []ServiceSettings) error {
	for i, s := range svcs {
		id := ids[i]
		st := d.schedStateLocked(id)
		kind := schedKind(schedulerID(s.Scheduler))
		size := uint32(0)
		hash := ""
		if kind == sched.Maglev {
			size, hash = s.TableSize, s.MaglevHash
			if hash == "" {
				hash = MaglevHashFiveTuple
			}
		}
		changed := st.kind != kind || st.size != size
		st.kind, st.size, st.hash = kind, size, hash
		if kind == sched.RoundRobin {
			st.cur, st.read = nil, true
			if err := d.dropSchedulesLocked(id); err != nil {
				return err
			}
			continue
		}
		if st.cur != nil {
			st.cur.Hash = hash
		}
		if !changed || st.refs == nil {
			continue
		}
		rec, err := d.serviceLocked(id)
		if err != nil {
			return err
		}
		if err := d.publishLocked(id, rec, st.refs); err != nil {
			return err
		}
	}
	return nil
}

// dropSchedulesLocked deletes both of service id's schedules. Callers
// hold d.mu.
func (d *Dataplane) dropSchedulesLocked(id uint16) error {
	for _, slot := range []uint32{uint32(id) * 2, uint32(id)*2 + 1} {
		if err := d.objs.XlbSched.Delete(slot); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("dataplane: drop the schedule of routable set %d of service %d: %w", slot, id, err)
		}
	}
	return nil
}

// buildScheduleLocked builds the table of service svc (record rec) over
// refs and returns it as a new inner map for xlb_sched (nil for round
// robin and for an empty set) and as a Schedule. Callers hold d.mu.
func (d *Dataplane) buildScheduleLocked(svc uint16, rec xlbService, refs []BackendRef) (*ebpf.Map, *Schedule, error) {
	kind := schedKind(rec.Scheduler)
	if kind == sched.RoundRobin {
		return nil, nil, nil
	}
	st := d.schedStateLocked(svc)
	size := st.size
	if kind == sched.Maglev && size == 0 {
		// a record no Configure of this process wrote (an adoption):
		// the size of the table it holds
		if cur, err := d.scheduleLocked(svc, rec); err == nil && cur != nil {
			size = cur.Len
		}
		if size == 0 {
			return nil, nil, fmt.Errorf("dataplane: service %d: no Maglev table size (Configure sets it)", svc)
		}
	}
	ms := make([]sched.Member, len(refs))
	for i, r := range refs {
		ms[i] = sched.Member{Name: r.Name, IP: r.IP, Weight: r.Weight}
	}
	t, err := sched.Build(kind, ms, size)
	if err != nil {
		return nil, nil, fmt.Errorf("dataplane: the %s table of service %d: %w", kind, svc, err)
	}
	var rebuilds uint64
	if prev, err := d.scheduleLocked(svc, rec); err != nil {
		return nil, nil, err
	} else if prev != nil {
		rebuilds = prev.Rebuilds
	}
	hash := ""
	if kind == sched.Maglev {
		hash = MaglevHashFiveTuple
		if rec.Flags&serviceClientIPFlag != 0 {
			hash = MaglevHashClientIP
		}
	}
	now := time.Now()
	name := SchedulerWeightedRR
	if kind == sched.Maglev {
		name = SchedulerMaglev
	}
	s := &Schedule{Scheduler: name, Hash: hash, Len: t.Len, Slots: map[uint32]uint32{},
		Rebuilds: rebuilds + 1, BuiltAt: time.UnixMilli(now.UnixMilli())}
	for i, n := range t.Slots {
		s.Slots[refs[i].Member] += n
	}
	if t.Len == 0 {
		return nil, s, nil
	}
	m, err := newScheduleMap(t, s)
	if err != nil {
		return nil, nil, fmt.Errorf("dataplane: the %s table of service %d: %w", kind, svc, err)
	}
	return m, s, nil
}

// newScheduleMap is table t as an inner map of xlb_sched: its header at
// key 0 (s's length, rebuilds and time), its entries from key 1.
func newScheduleMap(t sched.Table, s *Schedule) (*ebpf.Map, error) {
	chunks := (t.Len + schedChunk - 1) / schedChunk
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: uint32(len(xlbSchedChunk{}.Idx) * 2),
		MaxEntries: 1 + chunks, Flags: innerFlag})
	if err != nil {
		return nil, fmt.Errorf("create its map of %d entries: %w", 1+chunks, err)
	}
	keys := make([]uint32, 1+chunks)
	vals := make([]xlbSchedChunk, 1+chunks)
	head := xlbSchedHead{Len: t.Len, Kind: schedulerID(s.Scheduler), Rebuilds: s.Rebuilds, BuiltUnixMs: uint64(s.BuiltAt.UnixMilli())}
	vals[0] = xlbSchedChunk(headChunk(head))
	for i := range keys {
		keys[i] = uint32(i)
	}
	for i, e := range t.Entries {
		vals[1+uint32(i)/schedChunk].Idx[uint32(i)%schedChunk] = e
	}
	if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
		// one update per key where batch operations are unavailable
		for i := range keys {
			if err := m.Update(&keys[i], &vals[i], ebpf.UpdateAny); err != nil {
				m.Close()
				return nil, fmt.Errorf("write entry %d: %w", i, err)
			}
		}
	}
	return m, nil
}

// Schedule returns service svc's current table; false for a round robin
// service, an unknown one, or before its first table. After a Load that
// adopted pins, the table the predecessor published is read once.
func (d *Dataplane) Schedule(svc uint16) (Schedule, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if int(svc) >= MaxServices {
		return Schedule{}, false
	}
	rec, err := d.serviceLocked(svc)
	if err != nil || schedKind(rec.Scheduler) == sched.RoundRobin {
		return Schedule{}, false
	}
	s, err := d.scheduleLocked(svc, rec)
	if err != nil || s == nil {
		return Schedule{}, false
	}
	out := *s
	out.Slots = maps.Clone(s.Slots)
	return out, true
}

// scheduleLocked is service svc's live table (record rec): the one this
// process built, or the pinned one read once. nil: none. Callers hold
// d.mu.
func (d *Dataplane) scheduleLocked(svc uint16, rec xlbService) (*Schedule, error) {
	st := d.schedStateLocked(svc)
	if st.cur != nil || st.read {
		return st.cur, nil
	}
	s, err := d.readScheduleLocked(svc, rec)
	if err != nil {
		return nil, err
	}
	st.cur, st.read = s, true
	return s, nil
}

// readScheduleLocked reads the table of service svc's live set from the
// pins (the program xlb_sched_read: opening an inner map by its id needs
// CAP_SYS_ADMIN, which XLB does not hold). nil: none there. Callers hold
// d.mu.
func (d *Dataplane) readScheduleLocked(svc uint16, rec xlbService) (*Schedule, error) {
	slot := uint32(svc)*2 + uint32(rec.ActiveSet&1)
	info, err := d.readSchedInfoLocked(slot)
	if err != nil {
		return nil, fmt.Errorf("dataplane: read the schedule of service %d: %w", svc, err)
	}
	if info.Found == 0 {
		return nil, nil
	}
	var set xlbBackendSet
	if err := d.objs.XlbBackendSets.Lookup(slot, &set); err != nil {
		return nil, fmt.Errorf("dataplane: read the routable set of service %d: %w", svc, err)
	}
	name := SchedulerWeightedRR
	if info.Head.Kind == schedulerMaglevID {
		name = SchedulerMaglev
	}
	s := &Schedule{Scheduler: name, Len: info.Head.Len, Slots: map[uint32]uint32{},
		Rebuilds: info.Head.Rebuilds, BuiltAt: time.UnixMilli(int64(info.Head.BuiltUnixMs))}
	if info.Head.Kind == schedulerMaglevID {
		s.Hash = MaglevHashFiveTuple
		if rec.Flags&serviceClientIPFlag != 0 {
			s.Hash = MaglevHashClientIP
		}
	}
	for i, e := range set.Entries[:min(set.Count, MaxBackends)] {
		if n := info.Slots[i]; n > 0 {
			s.Slots[uint32(e.Member)] += n
		}
	}
	return s, nil
}

// readSchedInfoLocked runs xlb_sched_read on xlb_sched's slot: its
// header and each set position's entries. Callers hold d.mu.
func (d *Dataplane) readSchedInfoLocked(slot uint32) (*xlbSchedInfo, error) {
	info := &xlbSchedInfo{Slot: slot}
	if err := d.objs.XlbSchedInfo.Update(uint32(0), info, ebpf.UpdateAny); err != nil {
		return nil, err
	}
	if rc, err := runOnce(d.objs.XlbSchedRead); err != nil {
		return nil, err
	} else if rc != xdpPass {
		return nil, fmt.Errorf("xlb_sched_read returned %d", rc)
	}
	if err := d.objs.XlbSchedInfo.Lookup(uint32(0), info); err != nil {
		return nil, err
	}
	return info, nil
}

// headChunk is h in the bytes of a struct sched_chunk (key 0 of a
// schedule: the data path reads it through a cast).
func headChunk(h xlbSchedHead) (c xlbSchedChunk) {
	b := toBytes(&h)
	for i := range c.Idx {
		c.Idx[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return c
}

// schedRefs is refs with their names and weights, kept for a rebuild
// when Configure changes the service's scheduler; nil when a weight is
// outside 1..256 (a set published for round robin, which ignores
// weights: the next SetRoutable builds the table then).
func schedRefs(refs []BackendRef) []BackendRef {
	for _, r := range refs {
		if r.Weight < sched.MinWeight || r.Weight > sched.MaxWeight {
			return nil
		}
	}
	return slices.Clone(refs)
}
