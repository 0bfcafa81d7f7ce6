/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * handshake.h — passive handshake latency (issue 14): how long each
 * backend takes to answer a SYN. The data path stamps the SYN that
 * creates a pair (layout.h flow_value.syn_us, on the forward entry) and,
 * when the backend's first SYN-ACK of the pair goes through, adds its age
 * to the backend's histogram in xlb_handshake (layout.h enum xlb_hs_cell,
 * by member id, per CPU; pkg/dataplane HandshakeHistograms sums the CPUs). A
 * retransmitted SYN keeps the first one's time, so a backend that drops
 * SYNs (a full accept queue) shows the client's retransmission delay; a
 * retransmitted SYN-ACK is not counted again (XLB_F_SYNACK is set once).
 */
#ifndef XLB_HANDSHAKE_H
#define XLB_HANDSHAKE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "clock.h"

/*
 * One term of the bucket index: 1 when us is above bound, else 0, as the
 * sign bit of bound - us in 64 bits (both below 2^32), so the verifier
 * walks one path instead of one per comparison.
 */
#define XLB_HS_ABOVE(k, bound) +(__u32)(((__u64)(bound) - x) >> 63)

/* The histogram cell of a handshake of us microseconds: 0..XLB_HS_INF. */
static __always_inline __u32 hs_bucket(__u32 us)
{
	__u64 x = us;

	/* hide x from clang, which would turn each term back into a branch */
	asm volatile("" : "+r"(x));
	return 0 XLB_HS_BOUNDS_US(XLB_HS_ABOVE);
}

/* Add n to member id mid's cell of xlb_handshake. */
static __always_inline void hs_add(__u32 mid, __u32 cell, __u64 n)
{
	__u32 idx = mid * XLB_HS_CELLS + cell;
	__u64 *c = bpf_map_lookup_elem(&xlb_handshake, &idx);

	if (c)
		*c += n;
}

/*
 * Count the handshake of a pair of member id mid whose SYN was stamped
 * syn_us (0: not timed, nothing counted): the caller's SYN-ACK is the
 * pair's first. A global function, checked once by the verifier.
 */
__noinline int observe_handshake(__u32 mid, __u32 syn_us)
{
	__u32 us;

	if (!syn_us || mid >= XLB_MAX_MEMBERS)
		return 0;
	us = now_us32() - syn_us;
	hs_add(mid, hs_bucket(us), 1);
	hs_add(mid, XLB_HS_SUM_US, us);
	return 0;
}

#endif
