package dataplane

import "time"

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

// Schedule returns service svc's current table; false for a round robin
// service, an unknown one, or before its first table.
func (d *Dataplane) Schedule(svc uint16) (Schedule, bool) {
	return Schedule{}, false // contract: wip/30-dp implements it
}
