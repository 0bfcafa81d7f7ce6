package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

// maintenanceCollector exports the maintenance loop's health, its close
// events and its walk from the latest sample, and the duration histogram
// of its successful cycles (snapshot.Snapshot.MaintenanceDurations). The
// histogram is always exported, empty before the first cycle; the rest
// only once a sample exists. While cycles fail, the close event and walk
// series repeat the latest successful cycle's figures and
// xlb_maintenance_failing is 1.
type maintenanceCollector struct {
	descs
	now func() time.Time

	sampleAge, cycles, errors, failing          *prometheus.Desc
	eventsRead, eventsLost, walkPasses, twSched *prometheus.Desc
	embSched, holdSched, udpSched, unscheduled  *prometheus.Desc
	duration                                    *prometheus.Desc
}

func newMaintenanceCollector(now func() time.Time) *maintenanceCollector {
	c := &maintenanceCollector{now: now}
	c.sampleAge = c.add("xlb_maintenance_sample_age_seconds", "Seconds since the latest maintenance sample was taken; failed cycles publish samples too, so it grows only when the maintenance loop stopped or hangs. Readiness reports dataplane_sample_stale past max(3 cycles, 5 s).")
	c.cycles = c.add("xlb_maintenance_cycles_total", "Successful maintenance cycles since this process started its maintenance loop.")
	c.errors = c.add("xlb_maintenance_errors_total", "Failed maintenance cycles (clock, close event, flow map or counter read, or reaper run refused) since this process started its maintenance loop. The data path keeps forwarding; pairs are not cleaned up until a cycle succeeds.")
	c.failing = c.add("xlb_maintenance_failing", "1 while the latest maintenance cycle failed (connection and flow map series then repeat the latest successful cycle's figures; the error is in the status API's maintenance.last_error), 0 otherwise.")
	c.eventsRead = c.add("xlb_close_events_total", "Close events (one per pair that became terminal) the maintenance loop read from the data path since this process started its maintenance loop, as of the latest maintenance cycle. The status API's maintenance.close_events.path says whether they come through the ring buffer or the per-CPU queues.")
	c.eventsLost = c.add("xlb_close_events_lost_total", "Close events that never reached the maintenance loop: the ring buffer was full (counted since the flow map was created) or a per-CPU queue slot was overwritten before it was read (since this process started its maintenance loop). The walk removes those pairs instead, at most one pass late.")
	c.walkPasses = c.add("xlb_maintenance_walk_passes_total", "Complete passes of the maintenance loop's incremental walk over the flow map since this process started its maintenance loop; a pass visits every entry and takes at most orphan_ttl_secs/10 seconds.")
	c.twSched = c.add("xlb_maintenance_timewait_scheduled", "Pairs the maintenance loop holds for removal at the end of their "+timeWait+" time-wait (from their close events), as of the latest maintenance cycle. Differs from xlb_connections_timewait by pairs whose close event was lost (the walk removes them) and pairs a new SYN replaced (still scheduled).")
	c.embSched = c.add("xlb_maintenance_embryonic_scheduled", "New connection pairs the maintenance loop holds for a check at their embryonic deadline (flow_table.embryonic_ttl_secs after the SYN; established ones are only checked), as of the latest maintenance cycle.")
	c.holdSched = c.add("xlb_maintenance_hold_scheduled", "SNAT ports held for their backend's TIME_WAIT after a pair the backend closed first left its "+timeWait+" time-wait or was replaced by the client's new SYN, which the maintenance loop releases "+snatHold+" after the close ("+timeWait+" plus the kernel timer's rounding and a margin), as of the latest maintenance cycle.")
	c.udpSched = c.add("xlb_maintenance_udp_scheduled", "UDP pairs the maintenance loop holds for a re-check at their timeout (flow_table.udp_timeout_secs, or udp_stream_timeout_secs once answered, after their last datagram; one per live UDP pair, issue 31), as of the latest maintenance cycle. Below xlb_udp_pairs_active by pairs whose event was lost or found the schedule full (the walk finds them).")
	c.unscheduled = c.add("xlb_close_events_unscheduled_total", "Close events that found the maintenance loop's schedule full (a schedule holds at most as many requests as the flow map holds pairs) since this process started its maintenance loop; the walk applies the same rules to those pairs within a pass.")
	c.duration = c.add("xlb_maintenance_duration_seconds", "Wall-clock duration of maintenance cycles (close events, due time-waits, one slice of the flow map walk, the reaper's removals and the sample), one observation per successful cycle.")
	return c
}

// update implements collector; with no snapshot it sends the empty
// histogram only.
func (c *maintenanceCollector) update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error {
	var h snapshot.DurationHistogram
	if s != nil {
		h = s.MaintenanceDurations
	}
	ch <- prometheus.MustNewConstHistogram(c.duration, h.Count, h.Sum, h.Buckets())
	if s == nil {
		return errNoData
	}
	x := s.Sample
	if x == nil {
		return nil
	}
	gauge(ch, c.sampleAge, max(0, s.SampleAge(c.now()).Seconds()))
	counter(ch, c.cycles, x.Cycle)
	counter(ch, c.errors, x.Maintenance.Errors)
	gauge(ch, c.failing, boolValue(x.Maintenance.Failing()))
	counter(ch, c.eventsRead, x.CloseEvents.Read)
	counter(ch, c.eventsLost, x.CloseEvents.Lost)
	counter(ch, c.walkPasses, x.Walk.Passes)
	gauge(ch, c.twSched, float64(x.CloseEvents.TimeWaitScheduled))
	gauge(ch, c.embSched, float64(x.CloseEvents.EmbryonicScheduled))
	gauge(ch, c.holdSched, float64(x.CloseEvents.HoldScheduled))
	gauge(ch, c.udpSched, float64(x.CloseEvents.UDPScheduled))
	counter(ch, c.unscheduled, x.CloseEvents.Unscheduled)
	return nil
}
