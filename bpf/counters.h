/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * counters.h — what the data path counts: the global counters (enum
 * xlb_counter, one of them per XDP verdict), per-backend traffic and pair
 * events, all per-CPU (pkg/dataplane sums them), and the reaper's
 * removals per backend. The per-backend cells are a member's (layout 9:
 * one per service and backend address, flow_value.member_id), not a
 * backend id's.
 */
#ifndef XLB_COUNTERS_H
#define XLB_COUNTERS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&xlb_counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline int finish(int action)
{
	count((__u32)action);
	return action;
}

/*
 * Key of member id's cell i in a per-backend counter map of cells cells
 * per member id: xlb_backend_stats (XLB_DIRS, i an enum xlb_dir),
 * xlb_pair_events (XLB_PAIR_EVENTS) and xlb_reaped (XLB_REAPED_REASONS).
 */
static __always_inline __u32 backend_cell(__u16 member_id, __u32 cells, __u32 i)
{
	return (__u32)member_id * cells + i;
}

/* Member id's traffic in direction dir (enum xlb_dir); NULL if out of range. */
static __always_inline struct backend_stats *backend_traffic(__u16 member_id, __u32 dir)
{
	__u32 slot = backend_cell(member_id, XLB_DIRS, dir);

	return bpf_map_lookup_elem(&xlb_backend_stats, &slot);
}

static __always_inline struct backend_stats *client_stats(__u16 member_id)
{
	return backend_traffic(member_id, XLB_DIR_CLIENT);
}

/*
 * Add one to member id's counter i in map (one __u64 per cell, cells per
 * member id). Per-CPU maps need nothing more; xlb_reaped is written only
 * by the reaper, whose runs are serialised.
 */
static __always_inline void count_backend(void *map, __u16 member_id, __u32 cells, __u32 i)
{
	__u32 idx = backend_cell(member_id, cells, i);
	__u64 *c = bpf_map_lookup_elem(map, &idx);

	if (c)
		*c += 1;
}

/* Count a pair event (enum xlb_pair_event) for member id. */
static __always_inline void count_pair_event(__u16 member_id, __u32 ev)
{
	count_backend(&xlb_pair_events, member_id, XLB_PAIR_EVENTS, ev);
}

/* Count a pair or entry the reaper removed (enum xlb_reaped_reason) for member id. */
static __always_inline void count_reaped(__u16 member_id, __u32 reason)
{
	count_backend(&xlb_reaped, member_id, XLB_REAPED_REASONS, reason);
}

#endif
