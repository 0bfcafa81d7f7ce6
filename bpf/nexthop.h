/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nexthop.h — next hops (layout.h struct nexthop, the xlb_nexthops map):
 * where a pair's packets leave, resolved with bpf_fib_lookup at pair
 * creation and kept current by the daemon from netlink neighbour, link and
 * route events, so that an established flow follows a changed MAC, and a
 * changed route or a failed neighbour (the slot goes stale: the pair's
 * next packet looks its next hop up again).
 *
 * A slot is found from nexthop_hash by probing XLB_NEXTHOP_PROBES
 * consecutive slots. pkg/dataplane/nexthops.go computes the same hash
 * (NextHopSlots); change both together.
 */
#ifndef XLB_NEXTHOP_H
#define XLB_NEXTHOP_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "counters.h"
#include "clock.h"
#include "packet.h"

/*
 * The slot hash of next hop (ifindex, ip): ip is the address's four bytes
 * as they sit in memory. An L2-sender slot (ip 0) hashes its dmac instead,
 * as three 16-bit words w0..w2: (w0 | w1 << 16) ^ w2.
 */
static __always_inline __u32 nexthop_hash(__u32 ifindex, __u32 ip, const __u8 *dmac)
{
	__u32 k = ip, h;

	if (!ip) {
		const __u16 *w = (const __u16 *)dmac;

		k = ((__u32)w[0] | ((__u32)w[1] << 16)) ^ (__u32)w[2];
	}
	h = ifindex * 0x9E3779B1u ^ k * 0x85EBCA6Bu;
	h ^= h >> 15;
	return h;
}

static __always_inline int mac_equal(const __u8 *a, const __u8 *b)
{
	const __u16 *x = (const __u16 *)a, *y = (const __u16 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2];
}

/* What a next-hop claim looks for, and what it found. */
struct nexthop_claim {
	__u32 ifindex;
	__u32 ip;       /* __be32 as in memory; 0 for the L2 sender */
	__u8 smac[6];
	__u8 dmac[6];
	__u32 hash;
	__u32 now;
	__u32 id;       /* the slot found or claimed */
	int found;
	__u32 stale_id; /* the first stale slot of this next hop met (has_stale) */
	int has_stale;
};

/*
 * Stamp slot nh used at now, then report whether it still holds interface
 * ifindex (neither freed nor stale since the caller matched it). The stamp
 * is an atomic exchange, ordered before the second read: the daemon frees
 * a slot by marking it stale and then reading used (xlb_nexthop_ctl), so
 * either it sees this stamp and keeps the slot, or this read sees its
 * mark (layout.h struct nexthop). A slot stamped now already is not
 * written: a slot many CPUs name stays in every CPU's cache.
 */
static __always_inline int nexthop_stamp(struct nexthop *nh, __u32 ifindex, __u32 now)
{
	if (nh->used != now)
		__atomic_exchange_n(&nh->used, now, __ATOMIC_SEQ_CST);
	return *(volatile __u32 *)&nh->ifindex == ifindex;
}

/*
 * Name slot id (nh) for c: stamp it, and write c's MACs into it when
 * write_macs. Only what differs is written: a slot many CPUs name stays
 * in every CPU's cache instead of moving to the writer's at each SYN.
 * Returns 0, or -1 when the slot was freed or went stale meanwhile (then
 * c names nothing).
 */
static __always_inline int nexthop_take(struct nexthop *nh, struct nexthop_claim *c, __u32 id, int write_macs)
{
	if (write_macs) {
		if (!mac_equal(nh->smac, c->smac))
			copy_mac(nh->smac, c->smac);
		if (!mac_equal(nh->dmac, c->dmac))
			copy_mac(nh->dmac, c->dmac);
	}
	if (!nexthop_stamp(nh, c->ifindex, c->now))
		return -1;
	c->id = id;
	c->found = 1;
	return 0;
}

/* Whether slot nh holds next hop c, live (ifindex) or stale (ifindex | XLB_NEXTHOP_STALE). */
static __always_inline int nexthop_is(const struct nexthop *nh, const struct nexthop_claim *c, __u32 ifindex)
{
	return nh->ifindex == ifindex && nh->ip_be == c->ip && (c->ip || mac_equal(nh->dmac, c->dmac));
}

/*
 * One probe: the slot is this next hop's (refresh its MACs and stamp it),
 * or free (claim it with compare-and-swap on ifindex). A slot that another
 * CPU is filling in may be passed over; the next hop then takes a second
 * slot, which is harmless. So is a slot the daemon freed or marked stale
 * while this CPU took it: the probe goes on to the next slot. A stale
 * slot (layout.h XLB_NEXTHOP_STALE) is neither this next hop's nor free;
 * the first stale slot of this same next hop is remembered (nexthop_slot).
 */
static long nexthop_probe(__u64 i, void *arg)
{
	struct nexthop_claim *c = arg;
	struct nexthop *nh;
	__u32 id = (c->hash + (__u32)i) & (XLB_MAX_NEXTHOPS - 1);

	nh = bpf_map_lookup_elem(&xlb_nexthops, &id);
	if (!nh)
		return 1;
	if (nexthop_is(nh, c, c->ifindex)) {
		/* this next hop's: a resolved neighbour's MACs are the FIB's current answer */
		return nexthop_take(nh, c, id, c->ip != 0) ? 0 : 1;
	}
	if (nh->ifindex) {
		if (!c->has_stale && nexthop_is(nh, c, c->ifindex | XLB_NEXTHOP_STALE)) {
			c->stale_id = id;
			c->has_stale = 1;
		}
		return 0;
	}
	if (__sync_val_compare_and_swap(&nh->ifindex, 0, c->ifindex) != 0)
		return 0;
	nh->ip_be = c->ip;
	return nexthop_take(nh, c, id, 1) ? 0 : 1;
}

/*
 * Take stale slot c->stale_id back for next hop c: the FIB gives this next
 * hop again and no probed slot is free (stale slots that idle pairs still
 * name would otherwise leave a next hop without slots after a few route
 * changes). Compare-and-swap from stale to live: xlb_nexthop_ctl frees a
 * stale slot only by swapping it to XLB_NEXTHOP_FREEING first, so the two
 * never both succeed. The pairs still naming the slot send through it
 * again, toward a next hop the FIB gives now. Returns 0 when taken.
 */
static __always_inline int nexthop_revive(struct nexthop_claim *c)
{
	struct nexthop *nh;
	__u32 id = c->stale_id, stale = c->ifindex | XLB_NEXTHOP_STALE;

	nh = bpf_map_lookup_elem(&xlb_nexthops, &id);
	if (!nh || __sync_val_compare_and_swap(&nh->ifindex, stale, c->ifindex) != stale)
		return -1;
	return nexthop_take(nh, c, id, 1);
}

/*
 * The slot for next hop (ifindex, ip, MACs), found or claimed, or else a
 * stale slot of the same next hop taken back (nexthop_revive). Returns 0
 * and the slot in c->id, or -1 when all XLB_NEXTHOP_PROBES slots belong
 * to other next hops.
 *
 * This and resolve_next_hop are global functions: the verifier checks
 * each once, on its own, rather than at each of their many call sites
 * (without CAP_PERFMON every such walk counts against its branch limit).
 */
__noinline int nexthop_slot(struct nexthop_claim *arg)
{
	struct nexthop_claim c; /* bpf_loop wants its context on this stack */

	if (!arg)
		return -1;
	c = *arg;
	c.hash = nexthop_hash(c.ifindex, c.ip, c.dmac);
	c.now = now32();
	c.found = 0;
	c.has_stale = 0;
	bpf_loop(XLB_NEXTHOP_PROBES, nexthop_probe, &c, 0);
	if (!c.found && c.has_stale)
		nexthop_revive(&c);
	arg->id = c.id;
	return c.found ? 0 : -1;
}

/*
 * Next hop toward dst from src, as the host's FIB would route a packet this
 * host sends (XLB originates the backend-facing side of a full-NAT pair): the
 * lookup enters from the loopback device, like a locally generated route
 * lookup, so policy rules and the longest prefix apply unchanged. The kernel
 * requires forwarding on the device named in the lookup; the daemon enables
 * net.ipv4.conf.lo.forwarding, which forwards nothing by itself, and puts
 * it back when something resets it. Fills c (ifindex, neighbour address,
 * MACs) and returns 0; -1 when the FIB has no usable answer or the egress
 * interface is neither ingress nor in the redirect map.
 */
#ifndef AF_INET
#define AF_INET 2
#endif
#define LOOPBACK_IFINDEX 1
static __always_inline int fib_next_hop(struct xdp_md *ctx, __be32 src, __be32 dst, struct nexthop_claim *c,
					struct create_scratch *s)
{
	struct bpf_fib_lookup *fib = (struct bpf_fib_lookup *)s->fib; /* the per-CPU scratch's: no stack for it (layout.h) */
	__u32 oif;
	int rc;

	__builtin_memset(fib, 0, sizeof(*fib));
	fib->family = AF_INET;
	fib->l4_protocol = IPPROTO_TCP;
	fib->ipv4_src = src;
	fib->ipv4_dst = dst;
	fib->ifindex = LOOPBACK_IFINDEX;
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;
	oif = fib->ifindex;
	if (oif != ctx->ingress_ifindex && !bpf_map_lookup_elem(&xlb_tx_ports, &oif))
		return -1;
	c->ifindex = oif;
	c->ip = fib->ipv4_dst; /* the gateway, or dst itself on link */
	copy_mac(c->smac, fib->smac);
	copy_mac(c->dmac, fib->dmac);
	return 0;
}

/* The slot of the next hop toward dst from src; -1 when there is none. */
__noinline int resolve_next_hop(struct xdp_md *ctx, __be32 src, __be32 dst, __u32 *id)
{
	struct create_scratch *s;
	struct nexthop_claim c;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	if (!s || !id)
		return -1;
	__builtin_memset(&c, 0, sizeof(c));
	if (fib_next_hop(ctx, src, dst, &c, s) || nexthop_slot(&c))
		return -1;
	*id = c.id;
	return 0;
}

/*
 * Remembered FIB answers (layout.h struct fib_memo; per CPU, in the
 * scratch): a new pair's next hop toward a backend, or back toward a
 * client, that a SYN on this CPU resolved less than XLB_FIB_MEMO_TICKS
 * ago is that SYN's slot again, without bpf_fib_lookup or a probe, while
 * the slot still holds the same next hop (the daemon frees idle slots
 * and marks stale those of a changed route or a FAILED neighbour) and its
 * interface is still the ingress one or in the redirect map. So a route or
 * neighbour change the daemon sees reaches new pairs at once (a stale slot
 * matches no memo), any other within XLB_FIB_MEMO_TICKS, and a MAC change
 * at once:
 * the daemon writes MACs into the slot itself (pkg/hostnet
 * WatchNextHops). A failed lookup is never remembered. Backends take memo
 * memo_backend(id), clients memo_client(address).
 */
static __always_inline __u32 memo_backend(__u16 bid)
{
	return bid & (XLB_FIB_MEMOS - 1);
}

/*
 * A client's memo: the top bits of a multiplicative hash of its address
 * (the low bits of the product would see only the address's first bytes,
 * the same for a whole /16).
 */
static __always_inline __u32 memo_client(__be32 ip)
{
	__u32 h = (__u32)ip * 0x9E3779B1u;

	return XLB_FIB_MEMOS + (__u32)(((__u64)h * XLB_FIB_MEMOS) >> 32);
}

/*
 * The slot of the next hop toward dst from src (resolve_next_hop), from
 * memo memo when it is fresh (see above); -1 when there is none. A global
 * function, checked once by the verifier.
 */
__noinline int memo_next_hop(struct xdp_md *ctx, __be32 src, __be32 dst, __u32 memo, __u32 *id)
{
	struct create_scratch *s;
	struct nexthop_claim c;
	struct fib_memo *m;
	struct nexthop *nh;
	__u32 zero = 0, now, slot, oif;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	if (!s || !id)
		return -1;
	m = &s->memo[memo & (2 * XLB_FIB_MEMOS - 1)];
	now = now32();
	if (m->dst_be == dst && m->src_be == src && now - m->at < XLB_FIB_MEMO_TICKS) {
		slot = m->nexthop;
		oif = m->ifindex;
		nh = bpf_map_lookup_elem(&xlb_nexthops, &slot);
		if (nh && oif && nh->ifindex == oif && nh->ip_be == m->ip_be &&
		    (oif == ctx->ingress_ifindex || bpf_map_lookup_elem(&xlb_tx_ports, &oif)) &&
		    nexthop_stamp(nh, oif, now)) {
			*id = slot;
			return 0;
		}
	}
	__builtin_memset(&c, 0, sizeof(c));
	if (fib_next_hop(ctx, src, dst, &c, s) || nexthop_slot(&c))
		return -1;
	m->src_be = src;
	m->dst_be = dst;
	m->nexthop = c.id;
	m->ifindex = c.ifindex;
	m->ip_be = c.ip;
	m->at = now;
	*id = c.id;
	return 0;
}

/*
 * The slot of the L2 sender of the frame (eth): the way back to a client
 * the FIB cannot route, answered on the ingress interface. -1 when no slot
 * is left.
 */
static __always_inline int sender_next_hop(struct xdp_md *ctx, struct ethhdr *eth, __u32 *id)
{
	struct nexthop_claim c;

	__builtin_memset(&c, 0, sizeof(c));
	c.ifindex = ctx->ingress_ifindex;
	c.ip = 0;
	copy_mac(c.smac, eth->h_dest);
	copy_mac(c.dmac, eth->h_source);
	if (nexthop_slot(&c))
		return -1;
	*id = c.id;
	return 0;
}

/*
 * xlb_nexthop_ctl answers the daemon's requests in xlb_nexthop_batch
 * (layout.h struct nexthop_req; pkg/dataplane FreeNextHops,
 * MarkNextHopsStale), each re-checked here against the live slot.
 *
 * FREE marks a live slot stale with compare-and-swap (no CPU takes it from
 * then on), then reads used: a pair creation that named the slot since
 * used_before stamped it before its own second read of ifindex
 * (nexthop_stamp), so it is seen here and the slot goes back to live.
 * Otherwise the slot is swapped from stale to XLB_NEXTHOP_FREEING (a SYN
 * that took the stale slot back meanwhile makes that fail: nexthop_revive),
 * every field is cleared, and ifindex last (a claim waits for ifindex 0).
 */
static __always_inline __u8 nexthop_free(struct nexthop *nh, struct nexthop_req *q)
{
	__u32 live = q->ifindex & ~XLB_NEXTHOP_STALE, stale = live | XLB_NEXTHOP_STALE;

	if (!live || live == (XLB_NEXTHOP_FREEING & ~XLB_NEXTHOP_STALE) || nh->ip_be != q->ip_be)
		return XLB_NH_CHANGED;
	if (q->ifindex == live && __sync_val_compare_and_swap(&nh->ifindex, live, stale) != live)
		return XLB_NH_CHANGED;
	if (*(volatile __u32 *)&nh->ifindex != stale || nh->ip_be != q->ip_be)
		return XLB_NH_CHANGED;
	if ((__s32)(*(volatile __u32 *)&nh->used - q->used_before) >= 0) {
		if (q->ifindex == live)
			__sync_val_compare_and_swap(&nh->ifindex, stale, live);
		return XLB_NH_KEPT;
	}
	if (__sync_val_compare_and_swap(&nh->ifindex, stale, XLB_NEXTHOP_FREEING) != stale)
		return XLB_NH_CHANGED;
	nh->ip_be = 0;
	__builtin_memset(nh->smac, 0, sizeof(nh->smac));
	__builtin_memset(nh->dmac, 0, sizeof(nh->dmac));
	nh->used = 0;
	__sync_val_compare_and_swap(&nh->ifindex, XLB_NEXTHOP_FREEING, 0);
	return XLB_NH_DONE;
}

static long nexthop_ctl_step(__u64 i, void *arg)
{
	struct nexthop_batch *b = *(struct nexthop_batch **)arg;
	struct nexthop_req *q;
	struct nexthop *nh;
	__u32 id, live;

	if (i >= XLB_NEXTHOP_BATCH)
		return 1;
	q = &b->reqs[i];
	id = q->id;
	nh = bpf_map_lookup_elem(&xlb_nexthops, &id);
	if (!nh) {
		q->result = XLB_NH_CHANGED;
		return 0;
	}
	if (q->op == XLB_NH_FREE) {
		q->result = nexthop_free(nh, q);
		return 0;
	}
	live = q->ifindex;
	if (q->op != XLB_NH_STALE || !live || (live & XLB_NEXTHOP_STALE) || !q->ip_be || nh->ip_be != q->ip_be ||
	    __sync_val_compare_and_swap(&nh->ifindex, live, live | XLB_NEXTHOP_STALE) != live) {
		q->result = XLB_NH_CHANGED;
		return 0;
	}
	q->result = XLB_NH_DONE;
	return 0;
}

/* Answers every request of the batch; XDP_PASS once all are answered. */
SEC("xdp")
int xlb_nexthop_ctl(struct xdp_md *ctx)
{
	struct nexthop_batch *b;
	__u32 zero = 0, n;

	b = bpf_map_lookup_elem(&xlb_nexthop_batch, &zero);
	if (!b)
		return XDP_DROP;
	n = b->count;
	if (n > XLB_NEXTHOP_BATCH)
		n = XLB_NEXTHOP_BATCH;
	bpf_loop(n, nexthop_ctl_step, &b, 0);
	return XDP_PASS;
}

#endif
