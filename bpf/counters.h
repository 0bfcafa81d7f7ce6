/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * counters.h — what the data path counts: the global counters (enum
 * xlb_counter, one of them per XDP verdict), per-backend traffic and pair
 * events. All are per-CPU; pkg/dataplane sums them.
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

static __always_inline struct backend_stats *client_stats(__u16 backend_id)
{
	__u32 slot = (__u32)backend_id * 2 + XLB_DIR_CLIENT;

	return bpf_map_lookup_elem(&xlb_backend_stats, &slot);
}

static __always_inline void count_pair_event(__u16 backend_id, __u32 ev)
{
	__u32 idx = (__u32)backend_id * XLB_PAIR_EVENTS + ev;
	__u64 *c = bpf_map_lookup_elem(&xlb_pair_events, &idx);

	if (c)
		*c += 1;
}

#endif
