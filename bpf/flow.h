/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * flow.h — one flow entry read as part of its pair: the counterpart's key,
 * the recipe's checksum deltas, and the close bits that make a pair
 * terminal.
 */
#ifndef XLB_FLOW_H
#define XLB_FLOW_H

#include <linux/in.h>
#include <linux/types.h>

#include "layout.h"
#include "csum.h"

/*
 * The key of an entry's counterpart: its recipe read backwards. The
 * forward entry's recipe goes SNAT:port -> backend:remote_port, which is
 * the reverse key with source and destination swapped, and the other way
 * round.
 */
static __always_inline void flow_peer_key(struct flow_key *pk, const struct flow_value *v, __u8 dir)
{
	__builtin_memset(pk, 0, sizeof(*pk));
	pk->saddr_be = v->daddr_be;
	pk->daddr_be = v->saddr_be;
	pk->sport_be = v->dport_be;
	pk->dport_be = v->sport_be;
	pk->proto = IPPROTO_TCP;
	pk->dir = dir ^ 1;
}

/*
 * Folded checksum deltas for rewriting key's addresses and ports into the
 * recipe's (RFC 1624): ip covers the IPv4 header, l4 the TCP pseudo header
 * addresses plus both ports.
 */
static __always_inline void recipe_csum(struct flow_value *v, const struct flow_key *k)
{
	__u32 ip = 0, l4;

	ip = csum_replace32(ip, k->saddr_be, v->saddr_be);
	ip = csum_replace32(ip, k->daddr_be, v->daddr_be);
	l4 = ip;
	l4 = csum_replace16(l4, k->sport_be, v->sport_be);
	l4 = csum_replace16(l4, k->dport_be, v->dport_be);
	v->csum_ip = (__u16)csum_fold32(ip);
	v->csum_l4 = (__u16)csum_fold32(l4);
}

/* The FIN/RST bits alone say the pair is over: a RST, or both FINs. */
static __always_inline int bits_terminal(__u32 flags)
{
	if (flags & (XLB_F_RST_CLIENT | XLB_F_RST_BACKEND))
		return 1;
	return (flags & (XLB_F_FIN_CLIENT | XLB_F_FIN_BACKEND)) == (XLB_F_FIN_CLIENT | XLB_F_FIN_BACKEND);
}

/* A pair is terminal once the packet that ended it has marked it so. */
static __always_inline int pair_terminal(__u32 flags)
{
	return (flags & XLB_F_CLOSED) != 0;
}

#endif
