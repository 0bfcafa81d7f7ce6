/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * listen.h — which client packets are XLB's (layout 9; DESIGN §9): the
 * listen prefilter over destination addresses (struct xlb_config
 * listen_filter), which tells the packets of established pairs and SYNs
 * to a service's address from everything else before the flow lookup,
 * and xlb_listen, which a SYN of no live pair looks up for its service
 * (xlb.c listen_find).
 */
#ifndef XLB_LISTEN_H
#define XLB_LISTEN_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"

/*
 * The prefilter's bit of address addr_be: a multiplicative hash, the top
 * XLB_LISTEN_FILTER_SHIFT bits of the address (as the CPU loads its
 * network-order bytes) times XLB_LISTEN_HASH_MUL. pkg/dataplane
 * listenBit computes the same.
 */
static __always_inline __u32 listen_bit(__be32 addr_be)
{
	return ((__u32)addr_be * (__u32)XLB_LISTEN_HASH_MUL) >> (32 - XLB_LISTEN_FILTER_SHIFT);
}

/*
 * Whether addr_be may be a service's listen address (a serving or
 * draining one): its prefilter bit is set. The word's index is below
 * XLB_LISTEN_FILTER_WORDS by construction (a shift of a 32-bit value),
 * a bounded offset into the config, which the verifier allows without
 * CAP_PERFMON.
 */
static __always_inline int listen_filtered(const struct xlb_config *cfg, __be32 addr_be)
{
	__u32 bit = listen_bit(addr_be);

	return (cfg->listen_filter[bit / 64] >> (bit % 64)) & 1;
}

#endif
