/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * sched.h — where a SYN's pick starts in its service's routable set
 * (DESIGN §9; struct sched_head): round robin takes the service's next
 * position (xlb_rr), weighted round robin entry xlb_rr % len of the
 * schedule beside the set (xlb_sched), Maglev entry hash % len of it, the
 * hash over the 5-tuple or, with XLB_SVC_HASH_CLIENT_IP, the client's
 * address alone (jhash.h, seed XLB_SCHED_SEED). pick_backend then tries
 * the backends in set order from there (xlb.c pick_step). A table
 * scheduler's SYN that finds no usable schedule (none yet, empty, built
 * for another scheduler, or an entry beyond the set's count: a reader
 * racing userspace's rebuild, never expected otherwise) takes the round
 * robin position and counts XLB_C_SCHED_FALLBACK.
 */
#ifndef XLB_SCHED_H
#define XLB_SCHED_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "counters.h"
#include "jhash.h"

/*
 * The Maglev hash of a new IPv4 TCP connection or UDP pair (proto: the scratch's), host-order words (pkg/sched
 * HashFiveTuple, HashClientIP): five_tuple is jhash_3words(saddr, daddr,
 * sport << 16 | dport, seed ^ proto), client_ip jhash_1word(saddr, seed).
 */
static __always_inline __u32 sched_hash(__u32 saddr_be, __u32 daddr_be, __u32 ports, __u32 proto, int client_ip)
{
	__u32 saddr = bpf_ntohl(saddr_be);

	if (client_ip)
		return jhash_1word(saddr, XLB_SCHED_SEED);
	return jhash_3words(saddr, bpf_ntohl(daddr_be), ports, XLB_SCHED_SEED ^ proto);
}

/*
 * The scratch's start (and rr, hash) for the SYN from saddr_be:sport to
 * daddr_be:dport of the service listen_find put in the scratch (its id,
 * live set slot, scheduler and flags); ports is sport << 16 | dport, host
 * order. Returns 0, or -1 without a scratch or round robin position. A
 * global function with scalar arguments: the SYN's call chain has no stack
 * to spare (xlb.c listen_find).
 */
__noinline int sched_start(__u32 saddr_be, __u32 daddr_be, __u32 ports)
{
	struct create_scratch *s;
	struct backend_set *set;
	struct sched_chunk *c;
	struct sched_head *h;
	__u32 zero = 0, pos, key, len, start;
	__u64 *rr, n = 0;
	void *tbl;
	int kind;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	if (!s)
		return -1;
	kind = s->sched;
	s->hash = 0;
	s->rr = 0;
	if (kind != XLB_SCHED_MAGLEV) {
		rr = bpf_map_lookup_elem(&xlb_rr, &s->service);
		if (!rr)
			return -1;
		n = __sync_fetch_and_add(rr, 1);
		s->rr = (__u32)n;
	}
	s->start = s->rr;
	if (kind == XLB_SCHED_ROUND_ROBIN)
		return 0;
	if (kind == XLB_SCHED_MAGLEV)
		s->hash = sched_hash(saddr_be, daddr_be, ports, s->proto, s->sched_flags & XLB_SVC_HASH_CLIENT_IP);

	tbl = bpf_map_lookup_elem(&xlb_sched, &s->set_slot);
	if (!tbl)
		goto fallback;
	h = bpf_map_lookup_elem(tbl, &zero);
	if (!h || h->kind != kind)
		goto fallback;
	len = h->len;
	if (len == 0)
		goto fallback;
	/* weighted round robin: the whole 64-bit position, so the cycle never jumps at 2^32 */
	pos = kind == XLB_SCHED_MAGLEV ? s->hash % len : (__u32)(n % len);
	key = 1 + pos / XLB_SCHED_CHUNK;
	c = bpf_map_lookup_elem(tbl, &key);
	if (!c)
		goto fallback;
	start = c->idx[pos & (XLB_SCHED_CHUNK - 1)];
	set = bpf_map_lookup_elem(&xlb_backend_sets, &s->set_slot);
	if (!set || start >= set->count)
		goto fallback;
	s->start = start;
	return 0;

fallback:
	if (kind == XLB_SCHED_MAGLEV) {
		rr = bpf_map_lookup_elem(&xlb_rr, &s->service);
		if (!rr)
			return -1;
		s->rr = (__u32)__sync_fetch_and_add(rr, 1);
		s->start = s->rr;
	}
	count(XLB_C_SCHED_FALLBACK);
	return 0;
}

struct sched_read_loop {
	struct sched_info *info;
};

/* One chunk of the schedule xlb_sched_read reads: its entries counted. */
static long sched_read_step(__u64 i, void *arg)
{
	struct sched_info *info = ((struct sched_read_loop *)arg)->info;
	struct sched_chunk *c;
	__u32 key = 1 + (__u32)i, pos = (__u32)i * XLB_SCHED_CHUNK, idx;
	void *tbl;
	int j;

	tbl = bpf_map_lookup_elem(&xlb_sched, &info->slot);
	if (!tbl)
		return 1;
	c = bpf_map_lookup_elem(tbl, &key);
	if (!c)
		return 1;
#pragma clang loop unroll(full) /* constant offsets: no pointer walks past the chunk (!root) */
	for (j = 0; j < XLB_SCHED_CHUNK; j++) {
		if (pos + j >= info->head.len)
			return 1;
		idx = c->idx[j];
		if (idx < XLB_MAX_BACKENDS)
			info->slots[idx & (XLB_MAX_BACKENDS - 1)]++;
	}
	return 0;
}

/*
 * The schedule reader (struct sched_info): the header of the schedule at
 * xlb_sched_info's slot and its entries per set position, added to the
 * slot's counts (userspace writes them zero). XDP_PASS once answered;
 * XDP_DROP without its slot.
 */
SEC("xdp")
int xlb_sched_read(struct xdp_md *ctx)
{
	struct sched_read_loop l;
	struct sched_info *info;
	struct sched_head *h;
	__u32 zero = 0, n;
	void *tbl;

	info = bpf_map_lookup_elem(&xlb_sched_info, &zero);
	if (!info)
		return XDP_DROP;
	l.info = info;
	info->found = 0;
	__builtin_memset(&info->head, 0, sizeof(info->head));
	tbl = bpf_map_lookup_elem(&xlb_sched, &info->slot);
	if (!tbl)
		return XDP_PASS;
	h = bpf_map_lookup_elem(tbl, &zero);
	if (!h)
		return XDP_PASS;
	info->found = 1;
	info->head = *h;
	n = (h->len + XLB_SCHED_CHUNK - 1) / XLB_SCHED_CHUNK;
	bpf_loop(n, sched_read_step, &l, 0);
	return XDP_PASS;
}

#endif /* XLB_SCHED_H */
