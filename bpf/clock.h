/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * clock.h — the data path's clock, and xlb_clock, the program through
 * which userspace reads the same clock.
 */
#ifndef XLB_CLOCK_H
#define XLB_CLOCK_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"

/*
 * The data path's clock: jiffies (bpf_jiffies64, inlined by the JIT; about
 * 25 ns cheaper per packet than bpf_ktime_get_coarse_ns on this kind of
 * machine). Userspace reads the same clock through xlb_clock and converts
 * with the kernel's HZ. Flow entries keep its low 32 bits.
 */
static __always_inline __u32 now32(void)
{
	return (__u32)bpf_jiffies64();
}

/*
 * The handshake clock (layout.h flow_value.syn_us): CLOCK_MONOTONIC in
 * microseconds, low 32 bits, never 0 (0 means "not timed"; a reading of
 * 0 becomes 1, a microsecond late once every 71 minutes). Read on SYNs
 * that create a pair and on a pair's first SYN-ACK only: jiffies (now32)
 * are too coarse for a handshake and the established path never reads it.
 */
static __always_inline __u32 now_us32(void)
{
	__u32 t = (__u32)(bpf_ktime_get_ns() / 1000);

	return t ? t : 1;
}

/*
 * The timestamp clock (tsopt.h: a pair's ts_off): CLOCK_MONOTONIC in
 * milliseconds, low 32 bits, the rate RFC 7323 §5.4 allows a TCP
 * timestamp clock at most. Read on SYNs that create a pair only.
 */
static __always_inline __u32 now_ms32(void)
{
	return (__u32)(bpf_ktime_get_ns() / 1000000);
}

/*
 * xlb_clock publishes the current jiffies and CLOCK_MONOTONIC nanoseconds in
 * xlb_shared for userspace, which runs it with BPF_PROG_TEST_RUN: the
 * maintenance loop's "now" is the data path's own clock.
 */
SEC("xdp")
int xlb_clock(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct xlb_state *st = bpf_map_lookup_elem(&xlb_shared, &zero);

	if (st) {
		st->clock_jiffies = bpf_jiffies64();
		st->clock_ns = bpf_ktime_get_ns();
	}
	return XDP_PASS;
}

#endif
