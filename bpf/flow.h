/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * flow.h — one flow entry read as part of its pair: the counterpart's key,
 * the recipe's checksum deltas, the close bits that make a pair terminal,
 * and the guarded writes through an entry's pointer (stale pointers).
 */
#ifndef XLB_FLOW_H
#define XLB_FLOW_H

#include <linux/in.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

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
	pk->proto = v->flags & XLB_F_UDP ? IPPROTO_UDP : IPPROTO_TCP;
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

/*
 * Stale pointers (layout.h struct flow_value): a lookup's pointer may come
 * to hold another pair's entry once a CPU deleted this one, since the
 * preallocated flow map hands the element to the next insert at once.
 * The data path reads the entry's generation right after its lookup
 * (flow_gen) and writes through the pointer only while the entry still
 * has it: flags with flow_set, any other field right after flow_is.
 */

/* Entry v's generation as memory holds it now (never a copy the compiler kept). */
static __always_inline __u32 flow_gen(const struct flow_value *v)
{
	return *(const volatile __u32 *)&v->generation;
}

/* Whether entry v is still pair gen's: checked just before a plain write through v. */
static __always_inline int flow_is(const struct flow_value *v, __u32 gen)
{
	return flow_gen(v) == gen;
}

/* flow_set's answer when the entry is another pair's now. */
#define FLOW_GONE (-1L)

/* struct flow_value's generation and flags as the one word flow_set swaps. */
union flow_gen_flags {
	__u64 word;
	struct {
		__u32 generation;
		__u32 flags;
	};
};

/* One flow_set: the entry, what it must still be, and what to add. */
struct flow_set_ctx {
	struct flow_value *v;
	__u32 gen;
	__u32 bits;
	long result;
};

/* One try of flow_set: 1 (stop) once decided, result set; 0 after a failed swap. */
static long flow_set_try(__u64 index, void *arg)
{
	struct flow_set_ctx *c = arg;
	union flow_gen_flags cur, next;
	__u64 *w = (__u64 *)&c->v->generation;

	cur.word = *(volatile __u64 *)w;
	if (cur.generation != c->gen) {
		c->result = FLOW_GONE;
		return 1;
	}
	next = cur;
	next.flags |= c->bits;
	if (__sync_val_compare_and_swap(w, cur.word, next.word) != cur.word)
		return 0;
	c->result = cur.flags;
	return 1;
}

/*
 * Add bits to entry v's flags, while v is still pair gen's: a
 * compare-and-swap of generation and flags together. Returns the flags
 * before (as an atomic OR would), or FLOW_GONE when v has another
 * generation or is NULL (nothing written: the memory is another pair's).
 * A failed swap means the word changed: a flag was added, which happens
 * at most XLB_FLOW_FLAG_BITS times in a generation, or the generation
 * changed, which the next read sees; so XLB_FLOW_FLAG_BITS + 2 tries
 * always decide. A global function, its tries a bpf_loop: the verifier
 * checks them once, not at every call and try.
 */
__noinline long flow_set(struct flow_value *v, __u32 gen, __u32 bits)
{
	struct flow_set_ctx c = {.v = v, .gen = gen, .bits = bits, .result = FLOW_GONE};

	if (!v)
		return FLOW_GONE;
	bpf_loop(XLB_FLOW_FLAG_BITS + 2, flow_set_try, &c, 0);
	return c.result;
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
