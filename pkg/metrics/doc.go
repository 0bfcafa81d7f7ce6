// Package metrics serves XLB's Prometheus exposition (DESIGN §4) on its own
// listener, node_exporter style: /metrics and a small landing page at /.
//
// Collectors, one per concern, build every series at scrape time from two
// sources and never touch BPF maps themselves (DESIGN §8):
//
//   - the latest published *snapshot.Snapshot (lifecycle, attachments,
//     config watch, backend set and the maintenance sample), and
//   - a CountersFunc supplied by the daemon that sums the data path's
//     per-CPU counters (DESIGN §5) at scrape time.
//
// Which source feeds which series:
//
//   - Connection and pair series (xlb_connections_*, xlb_flow_map_*,
//     per-backend traffic xlb_backend_*_total and
//     xlb_backend_connections_*) come from the maintenance sample only, so
//     that a connection leaves xlb_connections_active and enters
//     xlb_connections_closed_total in the same scrape (DESIGN §4 counting
//     rule: the data path counts the closure at the packet that makes the
//     pair terminal, and the sample reads the counters the gauges are
//     derived from together), and so that they agree with the status API,
//     which shows the same sample.
//   - Data-path event counters (xlb_xdp_actions_total,
//     xlb_snat_port_exhausted_total, xlb_shutdown_resets_total, ...) come
//     from CountersFunc, so they keep moving when no maintenance cycle runs
//     (during the shutdown window). When Options.Counters is nil they come
//     from the sample's copy instead (up to one cycle old). The source is
//     fixed per Server, so a counter never goes backwards by switching
//     source. When CountersFunc fails, these series are left out of that
//     scrape and xlb_scrape_collector_success{collector="dataplane"} is 0;
//     when it returns ErrNoDataplane (not loaded yet, or closed) they are
//     left out quietly.
//   - Maintenance health (xlb_maintenance_cycles_total,
//     xlb_maintenance_errors_total, xlb_maintenance_failing,
//     xlb_maintenance_sample_age_seconds) comes from the sample as well
//     (maintenance.Sample.Maintenance). A failed cycle publishes a sample
//     that repeats the latest successful cycle's pair figures, so while
//     xlb_maintenance_failing is 1 the connection and flow map series stand
//     still, while the sample age stays low because samples keep coming.
//   - How the loop finds what it removes, from the sample too:
//     xlb_close_events_total and xlb_close_events_lost_total
//     (maintenance.Sample.CloseEvents: events read, and events lost to a
//     full ring buffer or an overwritten per-CPU queue slot),
//     xlb_maintenance_timewait_scheduled (pairs waiting in the loop's
//     time-wait schedule) and xlb_maintenance_walk_passes_total (complete
//     passes of the incremental walk, maintenance.Sample.Walk).
//   - xlb_flow_pair_invariant_violations_total is the data path's count of
//     FIN/RST packets on lone entries plus the reaper's count of lone
//     entries it removed (maintenance.Sample.InvariantRepairs), both since
//     the flow map was created.
//
// Before anything is published only xlb_build_info, the histogram and the
// standard go_* / process_* / promhttp_* series exist. Once a snapshot is
// published but before the first maintenance sample, what the instance
// already knows is exported (xlb_service_info, xlb_lifecycle_state,
// xlb_ready, xlb_xdp_attached, xlb_config_*, xlb_backends,
// xlb_backend_state and the data-path counters); the sample-derived series
// are absent rather than zero, so a dashboard does not mistake "not
// measured yet" for "no connections".
//
// Labels are bounded: backend is the backend's configured (or discovered)
// name, interface an XDP interface name; no label ever carries a client
// address. A backend whose configured name was left out of xlb.yaml is
// named by its IP (pkg/config), which is a backend address, not a client's.
package metrics
