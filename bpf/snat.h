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
 * entry that pair's reverse entry became when the client reused its own
 * port or the pair's time-wait ended: the kernel's timer wheel may keep
 * the backend's TIME_WAIT socket seconds past 60 s, so the hold lasts
 * until the reaper's snat_hold after the close (pkg/maintenance
 * SNATHold). A pair that ends with a RST, or with the client's FIN first
 * and a backend FIN that acknowledges it, leaves the backend no
 * TIME_WAIT: the packet that ends it clears the bit at once and marks the
 * reverse entry XLB_F_PORT_FREED, and a later allocation may take the
 * port over from the terminal pair once the reuse guard has passed since
 * its last backend packet (snat_take_port). A simultaneous close (the
 * backend's FIN sent before the client's arrived) leaves the backend in
 * TIME_WAIT like a backend-first close: the port stays taken.
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
 * When a XLB_F_HOLD entry's hold starts: its pair's close (the forward
 * entry's last_seen), or the reverse entry's last backend packet if that
 * came later. The backend (re)starts its TIME_WAIT timer on each FIN it
 * receives (a client's FIN retransmitted after a loss beyond XLB) and
 * answers it, so its latest packet is a later lower bound of the timer's
 * start than the close.
 */
static __always_inline __u32 hold_since(__u32 closed_at, __u32 rev_last_seen)
{
	return (__s32)(rev_last_seen - closed_at) > 0 ? rev_last_seen : closed_at;
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
 * The SNAT port space of a key's protocol (layout 11): half 0 for TCP,
 * half 1 for UDP, whose rows follow all of TCP's (XLB_MAX_BACKENDS of
 * them). A bitmap sized for TCP alone (no UDP service) has no UDP half:
 * its words are not found, so a UDP port has no bit there.
 */
static __always_inline __u32 snat_half(__u8 proto)
{
	return proto == IPPROTO_UDP;
}

/*
 * The bitmap word and bit of port port_be at SNAT address ip toward
 * backend bid in port space half (snat_half); NULL when ip is not a SNAT
 * address or the port is outside the range: a port of a retired SNAT
 * space (layout.h struct snat_retired) has no bit, so releasing it
 * touches nothing.
 */
static __always_inline __u64 *snat_word_in(void *map, const struct xlb_config *cfg, __u16 bid, __u32 half, __be32 ip,
					    __be16 port_be, __u64 *bit)
{
	int a = snat_index(cfg, ip);
	__u32 port = bpf_ntohs(port_be), off, w;

	if (a < 0 || port < cfg->snat_port_lo || port > cfg->snat_port_hi)
		return 0;
	off = port - cfg->snat_port_lo;
	w = (half * XLB_MAX_BACKENDS + (__u32)bid) * snat_backend_words(cfg) + (__u32)a * cfg->snat_words + off / 64;
	*bit = 1ULL << (off % 64);
	return bpf_map_lookup_elem(map, &w);
}

/* snat_word_in of xlb_snat_ports, in the port space of proto (a flow key's). */
static __always_inline __u64 *snat_word(const struct xlb_config *cfg, __u16 bid, __u8 proto, __be32 ip, __be16 port_be,
					 __u64 *bit)
{
	return snat_word_in(&xlb_snat_ports, cfg, bid, snat_half(proto), ip, port_be, bit);
}

/*
 * Timestamp reuse (issue 36; tsopt.h). A pair that negotiated timestamps
 * (XLB_F_TS) and ends leaving the backend in TIME_WAIT (the backend closed
 * first, or both at once) keeps its port's bit like any such pair. Its
 * close event makes the maintenance loop ask the reaper
 * (XLB_REAP_TS_HOLD, reap.h), within a cycle (1 s: the reuse guard is as
 * long), to set the port's hint in xlb_snat_tsreuse (tsreuse_mark). A
 * SYN with timestamps to a backend whose SYN-ACKs carry them (or are not
 * known yet: xlb_backend_ts) first looks for such a port: it claims a
 * hint with an atomic AND, and takes the port over (snat_take_port,
 * TSREUSE_TAKE) when the reverse entry there is still one the backend
 * holds TIME_WAIT for with timestamps (XLB_F_TS without XLB_F_PORT_FREED,
 * its pair ended by FINs in XLB's time-wait, or a XLB_F_HOLD entry) and
 * the reuse guard has passed since the old pair's last packet (its close,
 * or its last backend packet if later: hold_since). The old pair goes as
 * in any takeover, counted (XLB_C_SNAT_TIMEWAIT_REUSES). The backend
 * accepts the SYN: its TSval is at least the guard above every TSval of
 * the old pair (tsopt.h), so tcp_timewait_state_process takes it by RFC
 * 6191. A SYN without timestamps never takes such a port: the hold
 * applies, as it does once the backend answered a SYN with timestamps
 * without them (its TIME_WAIT then checks sequence numbers only).
 *
 * Why not in note_close: without CAP_PERFMON the verifier also walks
 * speculative paths, and any code added there gave one of them a
 * flow_set call with a scalar for its pointer; the failed check on that
 * path marks flow_set unreliable and its next real call is refused
 * ("Caller passes invalid args", no reason given).
 *
 * The hints are only hints, checked against the entries before a port is
 * taken: one claimed and found stale (the port taken, freed or in use
 * since, or held toward another port of the backend) is dropped, which at
 * worst keeps a port held as without timestamps; one whose entry is
 * within the guard is put back. Hints are never pinned: after a hot
 * upgrade the ports held at the hand-over keep their hold.
 * xlb_snat_tsreuse_n counts each backend id's hints, so a SYN toward a
 * backend without any skips the walk.
 */

/* Add d to the hint count of backend id *bid (a key in memory: no stack slot of the caller's). */
static __always_inline void tsreuse_count_at(const __u32 *bid, __s64 d)
{
	__u64 *n = bpf_map_lookup_elem(&xlb_snat_tsreuse_n, bid);

	if (n)
		__sync_fetch_and_add(n, d);
}

/* Add d to backend id bid's hint count. */
static __always_inline void tsreuse_count(__u32 bid, __s64 d)
{
	tsreuse_count_at(&bid, d);
}

/* Set the timestamp reuse hint of a reverse entry's port (key: the reverse entry's key). */
static __always_inline void tsreuse_mark(const struct xlb_config *cfg, __u16 bid, const struct flow_key *rkey)
{
	__u64 bit, *w = snat_word_in(&xlb_snat_tsreuse, cfg, bid, 0, rkey->daddr_be, rkey->dport_be, &bit);

	if (w && !(__sync_fetch_and_or(w, bit) & bit))
		tsreuse_count(bid, 1);
}

/* Clear bit of hint word w of backend id *bid; 1 when this call cleared it. */
static __always_inline int tsreuse_take(__u64 *w, __u64 bit, const __u32 *bid)
{
	if (!(__sync_fetch_and_and(w, ~bit) & bit))
		return 0;
	tsreuse_count_at(bid, -1);
	return 1;
}

/* Clear the bit of a reverse entry's port (key: the reverse entry's key). */
static __always_inline void snat_release(const struct xlb_config *cfg, __u16 bid, const struct flow_key *rkey)
{
	__u64 bit, *w = snat_word(cfg, bid, rkey->proto, rkey->daddr_be, rkey->dport_be, &bit);

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
 * Delete the reverse entry at key of pair gen toward backend bid, whose
 * port is freed (XLB_F_PORT_FREED): such an entry is what an allocation
 * takes over (snat_take_port), writing its new pair's reverse
 * entry under the same key, and a delete by key after a generation check
 * could remove that new entry instead (issue 27 finding 8). The port's
 * bit is the lock every taker holds: whoever removes such an entry (the
 * reaper, replace_pair) takes it first, and when an allocation holds it,
 * leaves the entry (taken over, or reaped as lone later). Returns 0 when
 * the entry is deleted.
 */
static __always_inline long delete_freed_reverse(struct xlb_config *cfg, const struct flow_key *key, __u16 bid, __u32 gen)
{
	struct flow_value *v;
	__u64 bit = 0, *w = cfg ? snat_word(cfg, bid, key->proto, key->daddr_be, key->dport_be, &bit) : 0;
	long err = -ENOENT;

	if (w && (__sync_fetch_and_or(w, bit) & bit))
		return -EBUSY; /* an allocation holds the port */
	v = bpf_map_lookup_elem(&xlb_flows, key);
	if (v && v->generation == gen)
		err = bpf_map_delete_elem(&xlb_flows, key);
	if (w)
		__sync_fetch_and_and(w, ~bit);
	return err;
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
	__u32 b0;     /* the cursor's bit in w0 (low 6 bits); above them the walk's hints (TSREUSE_*, b0 >> 8) */
	__u32 now;
	__u32 pos;    /* the port taken: bit position relative to base */
	__u32 bid;    /* the backend id (also the key of its hint count: tsreuse_count_at) */
	int err;      /* 0: a port was taken; -ENOSPC: none could be; other: the insert's error */
};

/* snat_walk's hints (snat_alloc.b0 >> 8): a walk over free ports, over the timestamp reuse hints that stops at the first port within the guard, or one that tries every hint. */
#define TSREUSE_NONE 0
#define TSREUSE_QUICK 1
#define TSREUSE_ALL 2

/*
 * Put the pair's reverse entry (the scratch's rkey and rev, checksums
 * done) at the port whose bit the caller holds: a free port, or the port
 * of a terminal pair that left the backend no TIME_WAIT, taken over: the
 * old pair's forward entry goes, counted once as replaced, and the new
 * reverse entry takes the old one's place. Returns 0 when the entry is in,
 * SNAT_IN_USE when the port is in use (the bit stays set, which is
 * right), SNAT_NOT_YET when it is free but its old pair's last backend
 * packet is more recent than the reuse guard (cfg->snat_reuse_ticks; the
 * caller clears the bit again), or the insert's error (-E2BIG: the flow
 * table is full). now_mode: jiffies (low 32 bits), and the mode above
 * them (one value: the SYN's call chain has no stack to spare).
 *
 * With mode TSREUSE_TAKE the caller holds the port's timestamp reuse hint
 * instead, for a SYN with timestamps: the port is taken over only from a
 * reverse entry with XLB_F_TS that holds the port for the backend's
 * TIME_WAIT (its pair ended by FINs without XLB_F_PORT_FREED, or a
 * XLB_F_HOLD entry), once the reuse guard has passed since the old pair's
 * close or its last backend packet, whichever came later (hold_since);
 * else SNAT_IN_USE (another entry), SNAT_GONE (none: nothing inserted)
 * or SNAT_NOT_YET. A global function, checked once by the verifier.
 */
#define SNAT_IN_USE 1
#define SNAT_NOT_YET 2
#define SNAT_GONE 3

#define TSREUSE_TAKE 1

/* snat_take_port: the old pair's forward entry is still there (above every flow flag) */
#define OLD_THERE (1U << 31)

__noinline long snat_take_port(__u64 now_mode)
{
	struct create_scratch *s;
	struct xlb_config *cfg;
	struct flow_value *r, *old;
	__u32 zero = 0, flags, oflags, seen;
	__u16 mid;
	long err;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!s || !cfg)
		return -ENOENT;
	if (now_mode >> 32 != TSREUSE_TAKE) {
		err = bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_NOEXIST);
		if (err != -EEXIST)
			return err;
	}
	r = bpf_map_lookup_elem(&xlb_flows, &s->rkey);
	if (!r) {
		if (now_mode >> 32 == TSREUSE_TAKE)
			return SNAT_GONE;
		/* the entry went between the insert and the lookup: once more */
		err = bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_NOEXIST);
		return err == -EEXIST ? SNAT_IN_USE : err;
	}
	/*
	 * The old pair's forward entry, if still there: looked up before
	 * anything of r is kept, so that few values live across the
	 * lookup (the SYN's call chain has no stack to spare).
	 */
	flow_peer_key(&s->okey, r, XLB_DIR_BACKEND);
	old = bpf_map_lookup_elem(&xlb_flows, &s->okey);
	flags = r->flags;
	seen = r->last_seen;
	mid = r->member_id; /* the old pair's counter cells (its backend id is the SYN's) */
	oflags = 0; /* OLD_THERE with the old forward entry's flags when it is still there */
	if (old && old->generation == r->generation) {
		oflags = old->flags | OLD_THERE;
		if (now_mode >> 32 == TSREUSE_TAKE)
			seen = hold_since(old->last_seen, seen);
	}
	if (now_mode >> 32 == TSREUSE_TAKE) {
		/* the backend's TIME_WAIT with timestamps: a pair ended by FINs (not a live one) or a XLB_F_HOLD entry */
		if (!(flags & XLB_F_TS) || (flags & XLB_F_PORT_FREED) ||
		    ((oflags & OLD_THERE) ? (oflags & XLB_F_CLOSED) != XLB_F_CLOSED_FIN : !(flags & XLB_F_HOLD)))
			return SNAT_IN_USE;
	} else if (!(flags & XLB_F_PORT_FREED) || (flags & XLB_F_HOLD)) {
		return SNAT_IN_USE;
	}
	if ((__s32)((__u32)now_mode - seen) < (__s32)cfg->snat_reuse_ticks)
		return SNAT_NOT_YET; /* the old pair's last segments may still be in flight */
	if ((oflags & OLD_THERE) && !bpf_map_delete_elem(&xlb_flows, &s->okey))
		count_pair_event(mid, oflags & XLB_F_CLOSED_RST ? XLB_PAIR_REPLACED_RST : XLB_PAIR_REPLACED_FIN);
	err = bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_EXIST);
	if (err == -ENOENT)
		err = bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_NOEXIST);
	if (err)
		return err == -EEXIST ? SNAT_IN_USE : err;
	s->took_hold = now_mode >> 32 == TSREUSE_TAKE;
	count(now_mode >> 32 == TSREUSE_TAKE ? XLB_C_SNAT_TIMEWAIT_REUSES : XLB_C_SNAT_TAKEOVERS);
	return 0;
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

/* One word of the search, as snat_bit_step sees it. */
struct snat_word {
	struct snat_alloc *al;
	__u64 *wp;    /* the word */
	__u64 valid;  /* the bits of this step's ports (the range, the cursor's half) */
	__u32 rel;    /* the word, relative to the backend's first */
	__u32 first;  /* its first port, relative to snat_port_lo */
	__u32 start;  /* the word's lowest free bit when the step began: bit_step i is bit start + i */
	int done;     /* a port was taken, or an insert failed: stop the search */
};

/*
 * Bit start + n of the word: when its port is free, claim it and put the
 * reverse entry there. Returns 1 (stop) once a port is taken, an insert
 * failed, or no free port is left at or above the bit; 0 to go on with
 * the next bit when this one is not free, was claimed by another CPU
 * first, or turned out to be in use (its bit then stays set, which is
 * right) or not yet reusable (its bit is cleared again). Every free port
 * of the word is tried, lowest first, so a word reports no port only when
 * none of its free ports can be taken; the walk starts at the word's
 * lowest free bit, so the usual SYN, whose first free port is taken,
 * makes one step.
 */
static long snat_bit_step(__u64 n, void *arg)
{
	struct snat_word *sw = arg;
	struct snat_alloc *al = sw->al;
	struct create_scratch *s = al->s;
	struct xlb_config *cfg = al->cfg;
	__u64 *wp = sw->wp, cand, bit, i = n + sw->start;
	__u32 a;
	long err;

	if (i >= 64)
		return 1;
	cand = ~*wp & sw->valid & ~((1ULL << i) - 1);
	if (!cand)
		return 1; /* nothing free left in the word */
	bit = 1ULL << i;
	if (!(cand & bit))
		return 0;
	if (__sync_fetch_and_or(wp, bit) & bit)
		return 0; /* another CPU took it first */

	a = sw->rel / cfg->snat_words;
	s->rkey.daddr_be = cfg->snat_ips_be[a & (XLB_MAX_SNAT_IPS - 1)];
	s->rkey.dport_be = bpf_htons((__u16)(cfg->snat_port_lo + sw->first + (__u32)i));
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
		sw->done = 1;
		return 1;
	}
	al->pos = sw->rel * 64 + (__u32)i;
	al->err = 0;
	sw->done = 1;
	return 1;
}

/* Put the scratch's reverse entry at hint al->pos's port by timestamp reuse (snat_take_port, TSREUSE_TAKE). */
static __always_inline long tsreuse_try(struct snat_alloc *al)
{
	struct create_scratch *s = al->s;
	struct xlb_config *cfg = al->cfg;
	__u32 rel = al->pos / 64, a = rel / cfg->snat_words;

	s->rkey.daddr_be = cfg->snat_ips_be[a & (XLB_MAX_SNAT_IPS - 1)];
	s->rkey.dport_be = bpf_htons((__u16)(cfg->snat_port_lo + (rel % cfg->snat_words) * 64 + al->pos % 64));
	recipe_csum(&s->rev, &s->rkey);
	return snat_take_port(al->now | (__u64)TSREUSE_TAKE << 32);
}

/*
 * Bit start + n of a word of timestamp reuse hints: when set, claim the
 * hint and take the port over if its reverse entry allows
 * (snat_take_port, TSREUSE_TAKE). Returns 1 (stop) once a port is taken,
 * an insert failed, or (TSREUSE_QUICK) a port is still within the reuse
 * guard: hints are set in the order pairs close, which is about the
 * order the cursor handed their ports out, so the ones after the cursor
 * are the oldest, and when one of those is not yet reusable the others
 * hardly are; 0 to go on. A hint whose port is within the guard goes
 * back; a stale one is dropped.
 */
static long tsreuse_bit_step(__u64 n, void *arg)
{
	struct snat_word *sw = arg;
	struct snat_alloc *al = sw->al;
	__u64 *wp = sw->wp, cand, bit, i = n + sw->start;
	long err;

	if (i >= 64)
		return 1;
	cand = *wp & sw->valid & ~((1ULL << i) - 1);
	if (!cand)
		return 1; /* no hint left in the word */
	bit = 1ULL << i;
	if (!(cand & bit))
		return 0;
	al->pos = sw->rel * 64 + (__u32)i; /* the port, if taken; kept here rather than on the stack */
	if (!tsreuse_take(wp, bit, &al->bid))
		return 0; /* another CPU claimed it first */
	err = tsreuse_try(al);
	if (!err) {
		al->err = 0;
		sw->done = 1;
		return 1;
	}
	if (err == SNAT_IN_USE || err == SNAT_GONE)
		return 0; /* stale: dropped */
	if (err == SNAT_NOT_YET) {
		bit = 1ULL << (al->pos & 63);
		if (!(__sync_fetch_and_or(sw->wp, bit) & bit))
			tsreuse_count_at(&al->bid, 1);
		if (al->b0 >> 8 == TSREUSE_ALL)
			return 0;
		sw->done = 1;
		return 1;
	}
	al->err = err;
	sw->done = 1;
	return 1;
}

/*
 * Word n of the search (n = 0 is the cursor's word from the cursor's bit
 * on, n = words the same word below that bit, the others in between in
 * order): try its free ports, lowest first (snat_bit_step), or with hints
 * its timestamp reuse hints (tsreuse_bit_step). Returns 1 (stop) once a
 * port is taken or an insert failed; 0 to go on with the next word when
 * none of this word's ports could be taken. A search visits every word
 * once and, in a word, every bit up to its highest candidate: one pass
 * over the backend's bitmap at most. hints is a constant at each use, so
 * each walk is verified without the other's branches.
 */
static __always_inline long word_step(__u64 n, struct snat_alloc *al, const int hints)
{
	struct xlb_config *cfg = al->cfg;
	struct snat_word sw;
	__u32 rel, key, nports, first;
	__u64 *wp, valid, free;

	rel = al->w0 + (__u32)n;
	if (rel >= al->words)
		rel -= al->words;
	key = al->base + rel;
	if (hints)
		wp = bpf_map_lookup_elem(&xlb_snat_tsreuse, &key);
	else
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
	free = hints ? *wp & valid : ~*wp & valid; /* the hints, or the free ports */
	if (!free)
		return 0;

	sw.al = al;
	sw.wp = wp;
	sw.valid = valid;
	sw.rel = rel;
	sw.first = first;
	sw.start = bit_index(free & -free);
	sw.done = 0;
	if (hints)
		bpf_loop(64, tsreuse_bit_step, &sw, 0);
	else
		bpf_loop(64, snat_bit_step, &sw, 0);
	return sw.done ? 1 : 0; /* a callback returns 0 or 1, which the verifier must see */
}

static long snat_word_step(__u64 n, void *arg)
{
	return word_step(n, arg, 0);
}

static long tsreuse_word_step(__u64 n, void *arg)
{
	return word_step(n, arg, 1);
}

/*
 * Whether backend id *bid has timestamp reuse hints and a SYN with
 * timestamps may use them: not when its last SYN-ACK to a SYN with
 * timestamps carried none (xlb_backend_ts: its TIME_WAIT takes no SYN by
 * timestamp, net.ipv4.tcp_timestamps=0). bid: a key in memory.
 */
static __always_inline int tsreuse_hinted(const __u32 *bid)
{
	__u64 *n = bpf_map_lookup_elem(&xlb_snat_tsreuse_n, bid);
	__u32 *ts = bpf_map_lookup_elem(&xlb_backend_ts, bid);

	return n && *n && !(ts && *ts == XLB_BTS_NO);
}

/*
 * One walk of snat_alloc toward the scratch's backend id (fwd.backend_id)
 * from its cursor (DESIGN §5
 * "SNAT port choice": a port freed just now is the last one handed out
 * again), over the free ports (hints 0) or the timestamp reuse hints
 * (TSREUSE_QUICK, TSREUSE_ALL; none unless tsreuse_hinted); the cursor
 * moves past the port taken. Returns 0, -ENOSPC, or the insert's error. Global functions, each
 * checked once by the verifier on its own: the walks' loops in one
 * function are more than it follows without CAP_PERFMON.
 */
static __always_inline long snat_walk(__u32 hints)
{
	struct snat_alloc al;
	struct xlb_config *cfg;
	__u32 *cursor, nports, cur, pos;

	/* keys in al, not slots of their own: al.pos (0) for the one-entry maps, al.bid */
	__builtin_memset(&al, 0, sizeof(al));
	al.s = bpf_map_lookup_elem(&xlb_scratch, &al.pos);
	cfg = bpf_map_lookup_elem(&xlb_cfg, &al.pos);
	if (!al.s || !cfg)
		return -ENOSPC;
	al.bid = al.s->fwd.backend_id;
	if (al.bid >= XLB_MAX_BACKENDS || (hints && !tsreuse_hinted(&al.bid)))
		return -ENOSPC;
	nports = (__u32)cfg->snat_port_hi - cfg->snat_port_lo + 1;
	if (cfg->snat_port_hi < cfg->snat_port_lo || cfg->nsnat == 0 || cfg->nsnat > XLB_MAX_SNAT_IPS ||
	    cfg->snat_words == 0 || cfg->snat_words * 64 < nports)
		return -ENOSPC;
	/*
	 * The port space of the pair's protocol (snat_half): its cursor and
	 * its rows, half * XLB_MAX_BACKENDS + bid (in al.pos until the walk:
	 * no stack to spare for a key of its own).
	 */
	al.pos = snat_half(al.s->rkey.proto) * XLB_MAX_BACKENDS + al.bid;
	cursor = bpf_map_lookup_elem(&xlb_snat_cursors, &al.pos);
	if (!cursor)
		return -ENOSPC;
	cur = *cursor % (cfg->nsnat * nports);
	pos = cur / nports * cfg->snat_words * 64 + cur % nports;

	al.cfg = cfg;
	al.words = snat_backend_words(cfg);
	al.base = al.pos * al.words;
	al.pos = 0;
	al.w0 = pos / 64;
	al.b0 = pos % 64 | hints << 8;
	al.now = al.s->rev.last_seen;
	al.err = -ENOSPC;
	/* every word once, the cursor's twice (its two halves) */
	if (hints)
		bpf_loop(al.words + 1, tsreuse_word_step, &al, 0);
	else
		bpf_loop(al.words + 1, snat_word_step, &al, 0);
	if (al.err)
		return al.err;
	/* the cursor moves past the port taken (what the loop needs no more is read again, not kept) */
	cfg = al.cfg;
	al.w0 = snat_half(al.s->rkey.proto) * XLB_MAX_BACKENDS + al.bid; /* the cursor's key */
	cursor = bpf_map_lookup_elem(&xlb_snat_cursors, &al.w0);
	if (!cursor)
		return 0;
	nports = (__u32)cfg->snat_port_hi - cfg->snat_port_lo + 1;
	pos = al.pos;
	*cursor = pos / (cfg->snat_words * 64) * nports + pos % (cfg->snat_words * 64) + 1;
	return 0;
}

__noinline long snat_walk_free(void)
{
	return snat_walk(TSREUSE_NONE);
}

__noinline long snat_walk_quick(void)
{
	return snat_walk(TSREUSE_QUICK);
}

__noinline long snat_walk_all(void)
{
	return snat_walk(TSREUSE_ALL);
}

/*
 * Claim a SNAT port toward backend id s->fwd.backend_id and insert the pair's reverse
 * entry (s->rkey with saddr, sport, proto and dir set, s->rev complete but
 * for the checksum deltas) there; s->rkey then holds the address and port
 * taken. The search starts at the backend's rotating cursor (DESIGN §5
 * "SNAT port choice": a port freed just now is the last one handed out
 * again) and visits every word of the backend's bitmap at most once, a
 * word at a time, trying each free port of a word before the next word.
 * A SYN with timestamps (XLB_F_TS_SYN) first walks the backend's timestamp
 * reuse hints the same way (above), and all of them again before it gives
 * up. Returns 0, -ENOSPC when no port can be taken (each is in use, held,
 * or freed within the reuse guard), or the insert's error (-E2BIG: the
 * flow table is full).
 */
static __always_inline long snat_alloc(struct create_scratch *s)
{
	long got;

	if (!(s->fwd.flags & XLB_F_TS_SYN))
		return snat_walk_free();
	got = snat_walk_quick();
	if (got == -ENOSPC)
		got = snat_walk_free();
	if (got == -ENOSPC)
		got = snat_walk_all();
	return got;
}

#endif
