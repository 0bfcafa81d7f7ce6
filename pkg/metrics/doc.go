// Package metrics serves XLB's Prometheus exposition (DESIGN §4) on its own
// listener, node_exporter style: /metrics and a small landing page at /.
//
// Every XLB series is built at scrape time from one input, the latest
// published *snapshot.Snapshot; no collector touches a BPF map or the
// instance (DESIGN §8). The status API reads the same snapshot, so both
// show the same value of every counter. Each scrape loads the snapshot
// once and hands it to every collector, one per concern (instance,
// connections, maintenance, backends, dataplane), each with an
// Update(ch) error in the manner of node_exporter's collectors.
//
// Which part of the snapshot feeds which series:
//
//   - Connection and pair series (xlb_connections_*, among them
//     xlb_connections_embryonic_expired_total, xlb_flow_map_*,
//     per-backend traffic xlb_backend_*_total and
//     xlb_backend_connections_*) come from the maintenance sample only, so
//     that a connection leaves xlb_connections_active and enters
//     xlb_connections_closed_total in the same scrape (DESIGN §4 counting
//     rule: the data path counts the closure at the packet that makes the
//     pair terminal, and the sample reads the counters the gauges are
//     derived from together).
//   - xlb_backend_handshake_seconds{backend} is a histogram (every other
//     bound of dataplane.HandshakeBuckets: 8, from 104 µs to 3 s) of the time
//     from the SYN the data path forwarded to the backend's first SYN-ACK,
//     from the sample (maintenance.BackendSample.Handshake); backends of
//     one name are summed as for the traffic series.
//   - Data-path event counters (xlb_xdp_actions_total,
//     xlb_snat_port_exhausted_total, xlb_shutdown_resets_total,
//     xlb_rst_out_of_window_total, xlb_rst_inexact_total,
//     xlb_pair_gone_in_flight_total,
//     xlb_snat_port_takeovers_total, xlb_snat_timewait_reuses_total,
//     xlb_snat_backend_fallbacks_total, xlb_snat_hold_drops_total,
//     xlb_icmp_translated_total{direction="to_client|to_backend"},
//     xlb_nexthop_refreshes_total, xlb_ttl_exceeded_total,
//     xlb_xdp_not_ours_total, xlb_fragments_forwarded_total,
//     xlb_fragments_passed_total, xlb_ip_options_forwarded_total, ...) come
//     from Snapshot.Counters, the daemon's latest read: each maintenance
//     cycle reads them with its sample, and while no cycle runs (the
//     shutdown window) the daemon reads them each second, so they keep
//     moving then. When the latest read failed (Snapshot.CountersError),
//     these series are left out and
//     xlb_scrape_collector_success{collector="dataplane"} is 0.
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
//     time-wait schedule), xlb_maintenance_embryonic_scheduled and
//     xlb_maintenance_hold_scheduled (new pairs awaiting their embryonic
//     deadline, SNAT ports held for a backend's TIME_WAIT),
//     xlb_close_events_unscheduled_total (events that found a schedule
//     full, left to the walk) and xlb_maintenance_walk_passes_total
//     (complete passes of the incremental walk, maintenance.Sample.Walk).
//   - xlb_maintenance_duration_seconds is the histogram of successful
//     cycles' durations the snapshot keeps (Snapshot.MaintenanceDurations,
//     cumulative bucket counts exported as a constant histogram).
//   - xlb_flow_pair_invariant_violations_total is the data path's count of
//     FIN/RST packets on lone entries plus the reaper's count of lone
//     entries it removed (maintenance.Sample.InvariantRepairs), both since
//     the flow map was created.
//   - Hot upgrades (DESIGN §6) come from Snapshot.Upgrades, which the
//     instance publishes from its first snapshot:
//     xlb_hot_upgrades_total{result="ok|failed"} (hand-offs since the
//     pinned state was created; the count lives in its metadata record, so
//     it continues across hand-offs and crashes, and both series are
//     exported from the first snapshot on, 0 before any hand-off) and
//     xlb_adopted_connection_pairs (pairs found in the pinned flow map
//     when this process started, 0 for a fresh start).
//   - xlb_host_setting_repairs_total{setting} comes from
//     Snapshot.HostSettings, which the daemon refreshes with each sample:
//     the resets of net.ipv4.conf.lo.forwarding and
//     net.ipv4.ip_local_reserved_ports the instance's guard put back
//     (hostnet.SysctlGuard), since the instance started; one series per
//     guarded setting from the first sample on.
//   - xlb_snat_retired_ports comes from Snapshot.RetiredSNAT, which the
//     daemon refreshes with each sample: the ports of the retired ranges
//     (an earlier config's, before a reload that changed snat.ip or
//     snat.port_range) that live connections may still hold, every
//     address's together (addresses are never label values); 0 when none.
//   - The schedulers (issue 30) come from each snapshot.Service:
//     xlb_service_scheduler_info{service,scheduler}, and for a
//     weighted_round_robin or maglev service its table
//     (snapshot.Service.Schedule, the daemon's copy of
//     dataplane.Dataplane.Schedule): xlb_scheduler_table_size and
//     xlb_scheduler_table_rebuilds_total (the table header's count, so it
//     continues across hot upgrades); per backend xlb_backend_weight and
//     xlb_backend_table_share (snapshot.Service.TableShare). The
//     instance-wide xlb_scheduler_fallbacks_total is a data-path counter
//     (XLB_C_SCHED_FALLBACK).
//   - xlb_scrape_collector_success{collector} is 1 for each collector that
//     exported its series from the snapshot and 0 for one whose source the
//     snapshot records as unreadable (only the data-path counters can be:
//     the failure is logged once as a warning, the recovery as info). A
//     collector whose source is not in the snapshot yet has no success
//     series.
//
// Before anything is published only xlb_build_info, the (empty) histogram
// and the standard go_* / process_* / promhttp_* series exist; the daemon
// publishes its first snapshot before it opens the listener. Once a
// snapshot is published but before the first maintenance sample, what the
// instance already knows is exported (xlb_service_info,
// xlb_lifecycle_state, xlb_ready, xlb_xdp_attached, xlb_config_*,
// xlb_hot_upgrades_total, xlb_adopted_connection_pairs, xlb_service_ready,
// xlb_service_state, xlb_backend_provider_stale, xlb_backends,
// xlb_backend_state and the scheduler series but the fallbacks); the
// sample-derived series and the
// data-path counters, which the first cycle reads, are absent rather than
// zero, so a dashboard does not mistake "not measured yet" for "no
// connections".
//
// Labels are bounded: service is a service's name from xlb.yaml (DESIGN
// §9: every per-connection and per-backend series has it, and the
// per-service ones, xlb_service_ready, xlb_service_state and
// xlb_backend_provider_stale; the instance-wide ones have none; a
// top-level file's one service is named after the instance's name),
// backend is the backend's configured (or discovered) name, interface an XDP interface name, state one of the words of
// pkg/status/api; no label ever carries a client address. A backend whose
// configured name was left out of xlb.yaml is named by its IP
// (pkg/config), which is a backend address, not a client's.
//
// Each backend name has its own series in each service that lists it
// (docs/observability.md counts them): xlb_backend_state, xlb_backend_tcp_timestamps, the traffic
// series, the handshake histogram, xlb_backend_weight,
// xlb_backend_table_share, and with health checks their counts.
// Options.OmitPerBackend (config metrics.per_backend: false; issue 28
// item 9) leaves all of them out; xlb_backends and the services'
// connection series stay.
package metrics
