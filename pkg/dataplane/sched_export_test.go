package dataplane

import "fmt"

// Test access for the schedulers' fixtures (sched_fixtures_test.go).

// FixtureSchedHashes is each CPU's scratch hash (bpf/layout.h struct
// create_scratch hash): the Maglev hash of the last SYN that CPU created
// a pair for.
func (d *Dataplane) FixtureSchedHashes() ([]uint32, error) {
	var per []xlbCreateScratch
	if err := d.objs.XlbScratch.Lookup(uint32(0), &per); err != nil {
		return nil, fmt.Errorf("read the scratch: %w", err)
	}
	out := make([]uint32, len(per))
	for i := range per {
		out[i] = per[i].Hash
	}
	return out, nil
}

// FixtureRR is service svc's round robin position (xlb_rr).
func (d *Dataplane) FixtureRR(svc uint16) (uint64, error) {
	var v uint64
	err := d.objs.XlbRr.Lookup(uint32(svc), &v)
	return v, err
}

// FixtureDropSchedules deletes both of service svc's schedules, as if none
// had been built yet.
func (d *Dataplane) FixtureDropSchedules(svc uint16) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropSchedulesLocked(svc)
}

// FixtureScheduleSlots reports which of service svc's two set slots hold a
// schedule (xlb_sched).
func (d *Dataplane) FixtureScheduleSlots(svc uint16) (held [2]bool, err error) {
	for i := range 2 {
		var id uint32
		if err := d.objs.XlbSched.Lookup(uint32(svc)*2+uint32(i), &id); err == nil {
			held[i] = id != 0
		}
	}
	return held, nil
}
