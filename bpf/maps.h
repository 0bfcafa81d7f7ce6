/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * maps.h — every map of the XLB object (bpf/xlb.c), and the loader's
 * switch between the two close event paths. Keys and values are in
 * layout.h, sizes in its enum xlb_limits. pkg/dataplane reaches each map
 * through the generated xlbMaps. Only the XLB object (xlb.c and the
 * headers it includes) uses this file; floor.c has its own map.
 */
#ifndef XLB_MAPS_H
#define XLB_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"

/*
 * Flow table, XLB_ENTRIES_PER_PAIR entries per connection pair. The loader
 * sets max_entries to XLB_ENTRIES_PER_PAIR * flow_table.max_connections.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
	__uint(max_entries, XLB_ENTRIES_PER_PAIR * XLB_DEFAULT_MAX_CONNECTIONS);
} xlb_flows SEC(".maps");

/* The config: one entry, written by userspace only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xlb_config);
	__uint(max_entries, 1);
} xlb_cfg SEC(".maps");

/* Each service's routable set, double buffered: slot service * 2 + its struct service active_set. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct backend_set);
	__uint(max_entries, XLB_SERVICE_SETS);
} xlb_backend_sets SEC(".maps");

/*
 * The schedules of the table schedulers (struct sched_head), by routable
 * set slot (service * 2 + set, as xlb_backend_sets): an inner array per
 * weighted round robin or Maglev service's set, none for round robin.
 * BPF_F_INNER_MAP: each schedule's array has its own length (1 + its
 * chunks). Written by userspace only.
 */
struct sched_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP);
	__type(key, __u32);
	__type(value, struct sched_chunk);
	__uint(max_entries, 1);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__type(key, __u32);
	__uint(max_entries, XLB_SERVICE_SETS);
	__array(values, struct sched_inner);
} xlb_sched SEC(".maps");

/* The schedule reader's single slot (struct sched_info). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct sched_info);
	__uint(max_entries, 1);
} xlb_sched_info SEC(".maps");

/* The services by id (struct service), written by userspace only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct service);
	__uint(max_entries, XLB_MAX_SERVICES);
} xlb_services SEC(".maps");

/* (address, protocol, local port) of every serving service -> its id and the mapping's remote port. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct listen_key);
	__type(value, struct listen_value);
	__uint(max_entries, XLB_MAX_LISTENS);
} xlb_listen SEC(".maps");

/* Each service's round-robin position, by service id. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_MAX_SERVICES);
} xlb_rr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xlb_state);
	__uint(max_entries, 1);
} xlb_shared SEC(".maps");

/*
 * SNAT port bitmaps (struct xlb_config comment; DESIGN §6b): one bit per
 * (backend id, SNAT address, port), set while the port is taken toward
 * that backend. The loader sets max_entries to XLB_MAX_BACKENDS * nsnat *
 * snat_words; the default below fits one address and the default range.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_MAX_BACKENDS * 313);
} xlb_snat_ports SEC(".maps");

/*
 * SNAT ports a SYN with timestamps may reuse (snat.h "timestamp reuse"):
 * xlb_snat_ports' geometry, a bit set by the reaper (XLB_REAP_TS_HOLD)
 * for a pair that negotiated timestamps and ended leaving the port held
 * for the backend's TIME_WAIT. A hint: every bit is checked against the
 * reverse entry before a port is taken, so a bit that went stale costs
 * one lookup, and a missing one keeps the port held as without
 * timestamps.
 * The loader sizes it as xlb_snat_ports. Never pinned: a successor
 * starts with no hints, the ports held at the hand-over keep their hold.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_MAX_BACKENDS * 313);
} xlb_snat_tsreuse SEC(".maps");

/* Per backend id: the bits set in its words of xlb_snat_tsreuse (a SYN skips the walk at 0). Never pinned. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_MAX_BACKENDS);
} xlb_snat_tsreuse_n SEC(".maps");

/* Next hops (struct nexthop), named by flow_value.nexthop. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct nexthop);
	__uint(max_entries, XLB_MAX_NEXTHOPS);
} xlb_nexthops SEC(".maps");

/* Rotating SNAT port cursor per backend id (DESIGN §5 "SNAT port choice"). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, XLB_SNAT_CURSORS);
} xlb_snat_cursors SEC(".maps");

/*
 * Each UDP service's pairs that saw no reply yet, by service id (layout
 * 11): added to atomically by the pair's creation (udp.h udp_admit, which
 * refuses above the service's udp_unreplied_max), taken from exactly once
 * by whoever adds XLB_F_UDP_REPLIED to the pair's forward entry (its first
 * reply, or the reaper removing it unreplied). Shared by every CPU;
 * userspace zeroes a service id's cell when the id is freed.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_MAX_SERVICES);
} xlb_udp_unreplied SEC(".maps");

/* Per-CPU counters per service id (enum xlb_svc_counter; layout 11). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_SVC_COUNTER_CELLS);
} xlb_svc_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct create_scratch);
	__uint(max_entries, 1);
} xlb_scratch SEC(".maps");

/* Egress interfaces other than the ingress one, keyed by ifindex. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, XLB_MAX_INTERFACES);
} xlb_tx_ports SEC(".maps");

/*
 * The Ethernet address of each attached interface (struct if_mac), keyed
 * by ifindex: written by userspace before it attaches the program to the
 * interface and whenever the address changes (ours.h). Configuration, not
 * state: never pinned, every start writes its own.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct if_mac);
	__uint(max_entries, XLB_MAX_INTERFACES);
} xlb_if_macs SEC(".maps");

/*
 * The same addresses, one array slot per interface where the slots allow
 * (struct if_mac_slot): the data path reads an interface's address with
 * an array access instead of a hash lookup (ours.h). Configuration like
 * xlb_if_macs: never pinned.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct if_mac_slot);
	__uint(max_entries, XLB_MAX_INTERFACES);
} xlb_if_mac_slots SEC(".maps");

/*
 * Fragmented datagrams of pairs (struct frag_key, struct frag_ports;
 * frag.h): written by a first fragment the data path forwards, read by
 * the later ones. Short-lived by their time stamp, evicted least recently
 * used when full. Never pinned: a hot upgrade or restart loses at most the
 * rest of the datagrams in flight, which the kernel then gets.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct frag_key);
	__type(value, struct frag_ports);
	__uint(max_entries, XLB_FRAG_DATAGRAMS);
} xlb_frags SEC(".maps");

/* Global counters, per CPU (enum xlb_counter). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_C_MAX);
} xlb_counters SEC(".maps");

/* Per-backend traffic by member id, per CPU (struct backend_stats). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct backend_stats);
	__uint(max_entries, XLB_BACKEND_STATS_SLOTS);
} xlb_backend_stats SEC(".maps");

/* Per-backend pair events by member id, per CPU (enum xlb_pair_event). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_PAIR_EVENT_CELLS);
} xlb_pair_events SEC(".maps");

/* Handshake latency per member id, per CPU (enum xlb_hs_cell; handshake.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_HANDSHAKE_CELLS);
} xlb_handshake SEC(".maps");

/* Per backend id: whether its SYN-ACKs carry timestamps (enum xlb_backend_ts_state; tsopt.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, XLB_MAX_BACKENDS);
} xlb_backend_ts SEC(".maps");

/* Pairs the reaper removed, per member id and reason (enum xlb_reaped_reason). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_REAPED_CELLS);
} xlb_reaped SEC(".maps");

/*
 * Close events (struct close_event): the ring buffer, or where the host
 * refuses ring buffers, a per-CPU queue: XLB_CLOSE_QUEUE_SLOTS slots per
 * CPU written round-robin at the CPU's head count. The loader picks one
 * with close_ring_on; the verifier never visits the other branch.
 */
volatile const __u32 close_ring_on = 1;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, XLB_CLOSE_RING_BYTES);
} xlb_close_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct close_event);
	__uint(max_entries, XLB_CLOSE_QUEUE_SLOTS);
} xlb_close_queue SEC(".maps");

/* Per CPU: events ever written to that CPU's queue (the next slot is head % slots). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} xlb_close_head SEC(".maps");

/*
 * The pinned metadata record (struct xlb_pin_meta): one entry, written and
 * read by userspace only (pkg/dataplane pins it at state_dir/meta). The
 * programs never touch it; it is declared here so that its one definition
 * sits with the other maps.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xlb_pin_meta);
	__uint(max_entries, 1);
} xlb_meta SEC(".maps");

/* The reaper's single request slot (struct reap_batch). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct reap_batch);
	__uint(max_entries, 1);
} xlb_reap_batch SEC(".maps");

/* The SNAT bitmap sync's single request slot (struct snat_sync_batch). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct snat_sync_batch);
	__uint(max_entries, 1);
} xlb_snat_sync_batch SEC(".maps");

/* xlb_nexthop_ctl's single request slot (struct nexthop_batch). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct nexthop_batch);
	__uint(max_entries, 1);
} xlb_nexthop_batch SEC(".maps");

#endif
