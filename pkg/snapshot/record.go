package snapshot

import (
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// AddSample records one maintenance sample in s (a copy being prepared by
// Store.Update): Sample; the data-path counters the cycle read (Counters
// and the FIB history, or CountersError when a failed cycle could not read
// them either, maintenance.Sample.CountersStale); and, for a successful
// cycle, its
// duration in MaintenanceDurations (failed cycles stay out: the histogram
// describes successful cycles). smp must not be modified afterwards.
func (s *Snapshot) AddSample(smp *maintenance.Sample) {
	s.Sample = smp
	if smp.CountersStale {
		s.CountersError = "the failed maintenance cycle could not read them (cycle error: " + smp.Maintenance.LastError + ")"
	} else {
		c := smp.Counters
		s.Counters, s.CountersError = &c, ""
		s.FIB = s.FIB.add(c)
	}
	if !smp.Maintenance.Failing() {
		s.MaintenanceDurations = s.MaintenanceDurations.Observe(smp.Duration)
	}
}

// SetCounters records a read of the data path's counters made outside the
// maintenance loop (the daemon reads them each second of the shutdown
// window, when no cycle runs): c (and the FIB history) when err is nil,
// else err in CountersError with Counters left at the latest successful
// read.
func (s *Snapshot) SetCounters(c dataplane.Counters, err error) {
	if err != nil {
		s.CountersError = err.Error()
		return
	}
	s.Counters, s.CountersError = &c, ""
	s.FIB = s.FIB.add(c)
}
