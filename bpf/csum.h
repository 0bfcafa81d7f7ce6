/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * csum.h — Internet checksum helpers (RFC 1071, incremental update RFC 1624).
 *
 * All sums work on 16-bit words exactly as they sit in memory (network byte
 * order read as host words): the one's complement sum is byte-order
 * independent, so no byte swaps are needed anywhere.
 */
#ifndef XLB_CSUM_H
#define XLB_CSUM_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

/* Fold a 32-bit one's complement accumulator to 16 bits. */
static __always_inline __u16 csum_fold32(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

/* Accumulate the replacement of 32-bit word old by new (as ~old + new). */
static __always_inline __u32 csum_replace32(__u32 acc, __u32 old, __u32 new)
{
	acc += (__u16)~(__u16)old;
	acc += (__u16)~(__u16)(old >> 16);
	acc += (__u16)new;
	acc += (__u16)(new >> 16);
	return acc;
}

/* Accumulate the replacement of 16-bit word old by new. */
static __always_inline __u32 csum_replace16(__u32 acc, __u16 old, __u16 new)
{
	acc += (__u16)~old;
	acc += new;
	return acc;
}

/*
 * Apply a folded delta to a stored checksum: HC' = ~(~HC + delta), RFC 1624
 * eqn. 3. With end-around-carry folding this yields the canonical 0x0000
 * rather than 0xffff when the data sums to zero, matching a full recompute.
 */
static __always_inline __u16 csum_apply(__u16 check, __u32 delta)
{
	__u32 s = (__u16)~check;
	s += delta;
	return (__u16)~csum_fold32(s);
}

#endif
