/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * snat.h — SNAT ports (DESIGN §6b "SNAT reuse"; layout.h struct
 * xlb_config): the bitmaps of taken ports per (backend id, SNAT address),
 * the allocator that claims a port for a new pair, and the release of a
 * port by whoever removes its reverse entry.
 *
 * A port is taken toward a backend while that backend may still hold the
 * 4-tuple: by a live pair, by a terminal pair whose backend closed first
 * (the backend's 60 s TIME_WAIT, RFC 9293 §3.6.1), or by a XLB_F_HOLD
 * entry left when the client reused its own port earlier. A pair that
 * ends with the client's FIN first or with a RST leaves the backend no
 * TIME_WAIT: the packet that ends it clears the bit at once and marks the
 * reverse entry XLB_F_PORT_FREED, and a later allocation may take the
 * port over from the terminal pair (snat_takeover).
 *
 * The bit is the lock: an allocation first claims a clear bit with an
 * atomic OR, so two CPUs never insert or take over the same port at
 * once. A bit left clear while its port is in use (a release racing a
 * claim) costs one failed insert, after which the bit is set again; a
 * bit left set for a port nobody uses would lose the port, so every path
 * that removes a reverse entry holding its bit clears it.
 */
#ifndef XLB_SNAT_H
#define XLB_SNAT_H

#include <asm-generic/errno-base.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "counters.h"
#include "flow.h"

/* Index of SNAT address ip in cfg, or -1. */
static __always_inline int snat_index(const struct xlb_config *cfg, __be32 ip)
{
	int i;

#pragma unroll
	for (i = 0; i < XLB_MAX_SNAT_IPS; i++) {
		if (i >= cfg->nsnat)
			break;
		if (cfg->snat_ips_be[i] == ip)
			return i;
	}
	return -1;
}

/*
 * Whether port (host order) at ip is a SNAT port a backend's packet may be
 * addressed to: one of the config's SNAT addresses within its range, or a
 * retired SNAT space that live pairs of an earlier config still hold
 * (layout.h struct snat_retired).
 */
static __always_inline int snat_recognised(const struct xlb_config *cfg, __be32 ip, __u16 port)
{
	int i;

	if (port >= cfg->snat_port_lo && port <= cfg->snat_port_hi && snat_index(cfg, ip) >= 0)
		return 1;
#pragma unroll
	for (i = 0; i < XLB_MAX_SNAT_RETIRED; i++) {
		if (i >= cfg->nretired)
			break;
		if (cfg->retired[i].ip_be == ip && port >= cfg->retired[i].port_lo && port <= cfg->retired[i].port_hi)
			return 1;
	}
	return 0;
}

/* Bitmap words of one backend id: nsnat * snat_words. */
static __always_inline __u32 snat_backend_words(const struct xlb_config *cfg)
{
	return cfg->nsnat * cfg->snat_words;
}

/*
 * The bitmap word and bit of port port_be at SNAT address ip toward
 * backend bid; NULL when ip is not a SNAT address or the port is outside
 * the range: a port of a retired SNAT space (layout.h struct
 * snat_retired) has no bit, so releasing it touches nothing.
 */
static __always_inline __u64 *snat_word(const struct xlb_config *cfg, __u16 bid, __be32 ip, __be16 port_be, __u64 *bit)
{
	int a = snat_index(cfg, ip);
	__u32 port = bpf_ntohs(port_be), off, w;

	if (a < 0 || port < cfg->snat_port_lo || port > cfg->snat_port_hi)
		return 0;
	off = port - cfg->snat_port_lo;
	w = (__u32)bid * snat_backend_words(cfg) + (__u32)a * cfg->snat_words + off / 64;
	*bit = 1ULL << (off % 64);
	return bpf_map_lookup_elem(&xlb_snat_ports, &w);
}

/* Clear the bit of a reverse entry's port (key: the reverse entry's key). */
static __always_inline void snat_release(const struct xlb_config *cfg, __u16 bid, const struct flow_key *rkey)
{
	__u64 bit, *w = snat_word(cfg, bid, rkey->daddr_be, rkey->dport_be, &bit);

	if (w)
		__sync_fetch_and_and(w, ~bit);
}

/*
 * Release the port of a reverse entry being removed, unless its bit was
 * already cleared when its pair ended (XLB_F_PORT_FREED). flags: the
 * entry's flags, read before the delete.
 */
static __always_inline void snat_release_entry(const struct xlb_config *cfg, __u16 bid, const struct flow_key *rkey, __u32 flags)
{
	if (!(flags & XLB_F_PORT_FREED))
		snat_release(cfg, bid, rkey);
}

/*
 * Index (0..63) of the single set bit of bit: the number of ones below it,
 * counted without a branch (a population count, SWAR style), so that the
 * verifier has one path to follow instead of 64.
 */
static __always_inline __u32 bit_index(__u64 bit)
{
	__u64 x = bit - 1;

	x = x - ((x >> 1) & 0x5555555555555555ULL);
	x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (__u32)((x * 0x0101010101010101ULL) >> 56);
}

/*
 * What one allocation carries through its bpf_loop steps. Only results
 * are written during the loops, never a counter: the verifier follows a
 * callback's stack across iterations, and a counter that grows would keep
 * it from ever seeing two iterations alike (the loop indexes serve
 * instead).
 */
struct snat_alloc {
	struct create_scratch *s; /* rkey and rev: the reverse entry to insert */
	struct xlb_config *cfg;
	__u32 base;   /* the backend's first word */
	__u32 words;  /* the backend's words (all SNAT addresses) */
	__u32 w0;     /* the word the cursor points into, relative to base */
	__u32 b0;     /* the cursor's bit in w0 */
	__u32 now;
	__u32 pos;    /* the port taken: bit position relative to base */
	long err;     /* 0: a port was taken; -ENOSPC: none free; other: the insert's error */
};

/*
 * Put the pair's reverse entry (the scratch's rkey and rev, checksums
 * done) at the port whose bit the caller holds: a free port, or the port
 * of a terminal pair that left the backend no TIME_WAIT, taken over: the
 * old pair's forward entry goes, counted once as replaced, and the new
 * reverse entry takes the old one's place. Returns 0 when the entry is in,
 * SNAT_IN_USE when the port is in use (the bit stays set, which is
 * right), SNAT_NOT_YET when it is free but its old pair's last packet is
 * too recent to take it over (the caller clears the bit again), or the
 * insert's error. now: jiffies, low 32 bits. A global function, checked
 * once by the verifier.
 */
#define SNAT_IN_USE 1
#define SNAT_NOT_YET 2

__noinline long snat_take_port(__u32 now)
{
	struct create_scratch *s;
	struct flow_value *r, *old;
	__u32 zero = 0, flags, gen;
	__u16 bid;
	long err;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	if (!s)
		return -ENOENT;
	err = bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_NOEXIST);
	if (err != -EEXIST)
		return err;
	r = bpf_map_lookup_elem(&xlb_flows, &s->rkey);
	if (!r)
		return bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_NOEXIST) == -EEXIST ? SNAT_IN_USE : 0;
	flags = r->flags;
	if (!(flags & XLB_F_PORT_FREED) || (flags & XLB_F_HOLD))
		return SNAT_IN_USE;
	if ((__s32)(now - r->last_seen) < XLB_SNAT_REUSE_MIN_TICKS)
		return SNAT_NOT_YET; /* the old pair's last segments may still be in flight */
	gen = r->generation;
	bid = r->backend_id;
	flow_peer_key(&s->okey, r, XLB_DIR_BACKEND);
	old = bpf_map_lookup_elem(&xlb_flows, &s->okey);
	if (old && old->generation == gen) {
		flags = old->flags;
		if (!bpf_map_delete_elem(&xlb_flows, &s->okey))
			count_pair_event(bid, flags & XLB_F_CLOSED_RST ? XLB_PAIR_REPLACED_RST : XLB_PAIR_REPLACED_FIN);
	}
	err = bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_EXIST);
	if (err == -ENOENT)
		err = bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_NOEXIST);
	if (err)
		return err == -EEXIST ? SNAT_IN_USE : err;
	count(XLB_C_SNAT_TAKEOVERS);
	return 0;
}

/*
 * Word n of the search (n = 0 is the cursor's word from the cursor's bit
 * on, n = words the same word below that bit, the others in between in
 * order): claim its lowest free port and put the reverse entry there.
 * Returns 1 (stop) once a port is taken or an insert failed; 0 to go on
 * with the next word when this one has no free port, or its port was
 * claimed by another CPU first or turned out to be in use (its bit then
 * stays set, which is right). One try per word keeps the verifier's walk
 * of this callback short; a port passed over is tried by the next SYN.
 */
static long snat_word_step(__u64 n, void *arg)
{
	struct snat_alloc *al = arg;
	struct create_scratch *s = al->s;
	struct xlb_config *cfg = al->cfg;
	__u32 rel, key, nports, first, a, i;
	__u64 *wp, valid, free, bit;
	long err;

	rel = al->w0 + (__u32)n;
	if (rel >= al->words)
		rel -= al->words;
	key = al->base + rel;
	wp = bpf_map_lookup_elem(&xlb_snat_ports, &key);
	if (!wp)
		return 0;
	nports = (__u32)cfg->snat_port_hi - cfg->snat_port_lo + 1;
	first = (rel % cfg->snat_words) * 64;
	if (first >= nports)
		return 0;
	valid = nports - first >= 64 ? ~0ULL : (1ULL << (nports - first)) - 1;
	if (n == 0)
		valid &= ~((1ULL << (al->b0 & 63)) - 1);
	else if (n == al->words)
		valid &= (1ULL << (al->b0 & 63)) - 1;
	free = ~*wp & valid;
	if (!free)
		return 0;
	bit = free & -free;
	if (__sync_fetch_and_or(wp, bit) & bit)
		return 0; /* another CPU took it first */

	i = bit_index(bit);
	a = rel / cfg->snat_words;
	s->rkey.daddr_be = cfg->snat_ips_be[a & (XLB_MAX_SNAT_IPS - 1)];
	s->rkey.dport_be = bpf_htons((__u16)(cfg->snat_port_lo + first + i));
	recipe_csum(&s->rev, &s->rkey);
	err = snat_take_port(al->now);
	if (err == SNAT_IN_USE)
		return 0;
	if (err == SNAT_NOT_YET) {
		__sync_fetch_and_and(wp, ~bit); /* still free: it stays clear for a later SYN */
		return 0;
	}
	if (err) {
		__sync_fetch_and_and(wp, ~bit);
		al->err = err;
		return 1;
	}
	al->pos = rel * 64 + i;
	al->err = 0;
	return 1;
}

/*
 * Claim a SNAT port toward backend id bid and insert the pair's reverse
 * entry (s->rkey with saddr, sport, proto and dir set, s->rev complete but
 * for the checksum deltas) there; s->rkey then holds the address and port
 * taken. The search starts at the backend's rotating cursor (DESIGN §5
 * "SNAT port choice": a port freed just now is the last one handed out
 * again) and visits every word of the backend's bitmap at most once, a
 * word at a time. Returns 0, -ENOSPC when every port is taken, or the
 * insert's error (-E2BIG: the flow table is full).
 */
static __noinline long snat_alloc(struct create_scratch *s, struct xlb_config *cfg, __u32 bid)
{
	struct snat_alloc al;
	__u32 *cursor, nports, space, cur, a, off, pos;

	nports = (__u32)cfg->snat_port_hi - cfg->snat_port_lo + 1;
	if (cfg->snat_port_hi < cfg->snat_port_lo || cfg->nsnat == 0 || cfg->nsnat > XLB_MAX_SNAT_IPS ||
	    cfg->snat_words == 0 || cfg->snat_words * 64 < nports || bid >= XLB_MAX_BACKENDS)
		return -ENOSPC;
	cursor = bpf_map_lookup_elem(&xlb_snat_cursors, &bid);
	if (!cursor)
		return -ENOSPC;
	space = cfg->nsnat * nports;
	cur = *cursor % space;
	a = cur / nports;
	off = cur % nports;

	__builtin_memset(&al, 0, sizeof(al));
	al.s = s;
	al.cfg = cfg;
	al.words = snat_backend_words(cfg);
	al.base = bid * al.words;
	pos = a * cfg->snat_words * 64 + off;
	al.w0 = pos / 64;
	al.b0 = pos % 64;
	al.now = s->rev.last_seen;
	al.err = -ENOSPC;
	/* every word once, the cursor's twice (its two halves) */
	bpf_loop(al.words + 1, snat_word_step, &al, 0);
	if (al.err)
		return al.err;
	/* the cursor moves past the port taken */
	a = al.pos / (cfg->snat_words * 64);
	off = al.pos % (cfg->snat_words * 64);
	*cursor = a * nports + off + 1;
	return 0;
}

#endif
