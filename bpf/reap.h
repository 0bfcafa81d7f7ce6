/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * reap.h — xlb_reap, the reaper: the maintenance loop's only way to
 * remove flow entries (pkg/dataplane Reap). The loop fills the single
 * xlb_reap_batch slot with requests (layout.h struct reap_req) and the
 * clock to judge them by, runs the program once with BPF_PROG_TEST_RUN and
 * reads the results back. Each request is re-checked against the live
 * entry here, just before the delete: its generation, its close state and
 * its last-seen times. A packet that refreshed a pair after the loop
 * decided keeps it; the check and the delete are nanoseconds apart instead
 * of a system call or a whole walk.
 *
 * Whoever deletes a pair's forward entry accounts for the pair: the
 * reaper adds it to xlb_reaped under the reason it was removed for
 * (counters.h count_reaped). A time-wait pair whose backend closed first
 * leaves its reverse entry behind as a XLB_F_HOLD entry, announced with a
 * XLB_CLOSE_HOLD event and removed by its own request (XLB_REAP_HOLD)
 * snat_hold after the close: the SNAT port stays taken while the
 * backend's TIME_WAIT socket may still exist.
 */
#ifndef XLB_REAP_H
#define XLB_REAP_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "counters.h"
#include "flow.h"
#include "events.h"
#include "snat.h"
#include "udp.h"

/* Age of t at now on the 32-bit clock; 0 when t is not in the past. */
static __always_inline __u32 age32(__u32 now, __u32 t)
{
	__s32 d = (__s32)(now - t);

	return d > 0 ? (__u32)d : 0;
}

/* Why a lone entry (dir, forward flags) is removed, by what its pair was. */
static __always_inline __u32 lone_reason(__u8 dir, __u32 flags)
{
	if (dir != XLB_DIR_CLIENT)
		return XLB_REAPED_LONE_REVERSE;
	if (flags & XLB_F_CLOSED_RST)
		return XLB_REAPED_LONE_RESET;
	if (flags & XLB_F_CLOSED_FIN)
		return XLB_REAPED_LONE_TIMEWAIT;
	return XLB_REAPED_LONE_ACTIVE;
}

/*
 * Release the SNAT port of a lone entry being removed: its own (a reverse
 * entry), or its missing counterpart's (a forward entry whose reverse
 * entry is gone; a port that a new pair took meanwhile is set again by
 * that pair's next allocation attempt that meets it, see snat.h).
 */
static __always_inline void release_lone(struct xlb_config *cfg, const struct flow_key *key, const struct flow_key *pk,
					 __u16 bid, __u32 flags, int peer_present)
{
	if (!cfg)
		return;
	if (key->dir == XLB_DIR_BACKEND)
		snat_release_entry(cfg, bid, key, flags);
	else if (!peer_present)
		snat_release(cfg, bid, pk);
}

/* The later of two 32-bit clock readings. */
static __always_inline __u32 later32(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0 ? a : b;
}

/*
 * A request about a UDP entry (XLB_F_UDP; layout 11). XLB_REAP_UDP on the
 * forward key removes the pair once idle for udp_ttl (no reply seen) or
 * udp_stream_ttl (replied; idle since the later entry's last datagram);
 * not due, it answers KEPT with the jiffies at which the pair falls due as
 * it stands (q->next). An unreplied pair is claimed before its removal:
 * XLB_F_UDP_REPLIED added to its forward entry, which takes it out of its
 * service's unreplied count exactly once (a reply that won the race keeps
 * the pair, due udp_stream_ttl from now). XLB_REAP_CHECK and XLB_REAP_LONE
 * work as for TCP, a lone UDP entry counted under XLB_REAPED_LONE_UDP (an
 * unreplied one leaves the count: a lone forward entry is claimed, a lone
 * reverse entry's forward entry was lost outside XLB, unclaimed). Every
 * other op keeps a UDP entry.
 */
static __noinline __u8 reap_udp(struct reap_batch *b, struct reap_req *q)
{
	struct flow_value *v, *peer;
	struct xlb_config *cfg;
	struct flow_key key, pk;
	__u32 now, flags, gen, pflags = 0, zero = 0, last, ttl, stream, svc;
	__u16 bid, mid;
	__u8 op = q->op;
	long old;
	int intact;

	key = q->key;
	v = bpf_map_lookup_elem(&xlb_flows, &key);
	if (!v || v->generation != q->generation)
		return XLB_REAP_GONE;
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	gen = v->generation;
	now = (__u32)b->now;
	flow_peer_key(&pk, v, key.dir);
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	intact = peer && peer->generation == gen;
	flags = v->flags;
	bid = v->backend_id;
	mid = v->member_id;
	svc = v->service_id;
	last = v->last_seen;
	if (intact) {
		pflags = peer->flags;
		if (flags & XLB_F_UDP_REPLIED)
			last = later32(last, peer->last_seen);
	}

	if (op == XLB_REAP_CHECK)
		return intact ? XLB_REAP_INTACT : XLB_REAP_LONE_FOUND;
	if (op == XLB_REAP_LONE) {
		if (intact)
			return XLB_REAP_INTACT;
	} else if (op == XLB_REAP_UDP && key.dir == XLB_DIR_CLIENT) {
		/* both read, then one picked: a field picked by a branch is an offset the verifier refuses */
		ttl = (__u32)b->udp_ttl;
		stream = (__u32)b->udp_stream_ttl;
		asm volatile("" : "+r"(ttl), "+r"(stream));
		if (flags & XLB_F_UDP_REPLIED)
			ttl = stream;
		if (age32(now, last) < ttl) {
			q->next = last + ttl;
			return XLB_REAP_KEPT;
		}
	} else {
		return XLB_REAP_KEPT;
	}

	/* removed: an unreplied pair (or lone forward entry) leaves its service's count first */
	if (key.dir == XLB_DIR_CLIENT && !(flags & XLB_F_UDP_REPLIED)) {
		old = flow_set(v, gen, XLB_F_UDP_REPLIED);
		if (old == FLOW_GONE)
			return XLB_REAP_GONE;
		if (old & XLB_F_UDP_REPLIED) {
			/* a reply won the race: the pair stays */
			q->next = now + (__u32)b->udp_stream_ttl;
			return XLB_REAP_KEPT;
		}
		udp_replied(svc);
	}
	if (bpf_map_delete_elem(&xlb_flows, &key))
		return XLB_REAP_GONE;
	if (!intact) {
		/* a lone UDP entry: an invariant repair (XLB_REAP_LONE: reaped) */
		if (key.dir == XLB_DIR_BACKEND && !(flags & XLB_F_UDP_REPLIED))
			udp_replied(svc); /* its forward entry was lost unclaimed */
		release_lone(cfg, &key, &pk, bid, flags, peer != 0);
		count_reaped(mid, XLB_REAPED_LONE_UDP);
		return op == XLB_REAP_LONE ? XLB_REAPED : XLB_REAP_REPAIRED;
	}
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	if (peer && peer->generation == gen && !bpf_map_delete_elem(&xlb_flows, &pk) && cfg)
		snat_release_entry(cfg, bid, &pk, pflags);
	count_reaped(mid, flags & XLB_F_UDP_REPLIED ? XLB_REAPED_UDP_REPLIED : XLB_REAPED_UDP_UNREPLIED);
	return XLB_REAPED;
}

static __noinline __u8 reap_one_req(struct reap_batch *b, struct reap_req *q)
{
	struct flow_value *v, *peer;
	struct xlb_config *cfg;
	struct flow_key key, pk;
	__u32 now, flags, gen, pflags = 0, zero = 0, closed_at;
	__u16 bid, mid;
	__u8 op = q->op;
	int intact;

	key = q->key;
	v = bpf_map_lookup_elem(&xlb_flows, &key);
	if (!v || v->generation != q->generation)
		return XLB_REAP_GONE;
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	gen = v->generation;
	now = (__u32)b->now;
	flow_peer_key(&pk, v, key.dir);
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	intact = peer && peer->generation == gen;
	/* the entries' memory may be reused once deleted: copy first */
	flags = v->flags;
	bid = v->backend_id;
	mid = v->member_id;
	if (intact)
		pflags = peer->flags;

	if (flags & XLB_F_UDP)
		return reap_udp(b, q);
	if (op == XLB_REAP_UDP)
		return XLB_REAP_KEPT;
	if (flags & XLB_F_HOLD) {
		/* lone on purpose (replace_pair): only its own rule removes it */
		if (op == XLB_REAP_CHECK || op == XLB_REAP_LONE)
			return XLB_REAP_INTACT;
		if (op != XLB_REAP_HOLD || age32(now, v->last_seen) < b->snat_hold)
			return XLB_REAP_KEPT;
		if (bpf_map_delete_elem(&xlb_flows, &key))
			return XLB_REAP_GONE;
		if (cfg)
			snat_release(cfg, bid, &key);
		return XLB_REAPED;
	}
	if (op == XLB_REAP_HOLD)
		return XLB_REAP_KEPT;
	if (op == XLB_REAP_CHECK)
		return intact ? XLB_REAP_INTACT : XLB_REAP_LONE_FOUND;
	if (op == XLB_REAP_LONE) {
		if (intact)
			return XLB_REAP_INTACT;
		if (key.dir == XLB_DIR_BACKEND && (flags & XLB_F_PORT_FREED)) {
			if (delete_freed_reverse(cfg, &key, bid, gen))
				return XLB_REAP_GONE;
		} else if (bpf_map_delete_elem(&xlb_flows, &key)) {
			return XLB_REAP_GONE;
		}
		release_lone(cfg, &key, &pk, bid, flags, peer != 0);
		count_reaped(mid, lone_reason(key.dir, flags));
		return XLB_REAPED;
	}
	if (key.dir != XLB_DIR_CLIENT)
		return XLB_REAP_KEPT; /* pairs are reaped through their forward entry */
	if (op == XLB_REAP_TS_HOLD) {
		/*
		 * Timestamp reuse (snat.h): the pair ended by FINs with
		 * timestamps negotiated, and its backend holds TIME_WAIT (the
		 * port is not freed). The maintenance loop asks on the pair's
		 * close event, a cycle (1 s) after the close at most: the
		 * reuse guard is as long.
		 */
		if (!intact || !cfg || (flags & (XLB_F_CLOSED | XLB_F_TS)) != (XLB_F_CLOSED_FIN | XLB_F_TS) ||
		    (pflags & (XLB_F_PORT_FREED | XLB_F_TS)) != XLB_F_TS)
			return XLB_REAP_KEPT;
		tsreuse_mark(cfg, bid, &pk);
		return XLB_REAP_HINTED;
	}

	switch (op) {
	case XLB_REAP_RESET:
		if (!(flags & XLB_F_CLOSED_RST))
			return XLB_REAP_KEPT;
		break;
	case XLB_REAP_TIMEWAIT:
		if (!(flags & XLB_F_CLOSED_FIN) || age32(now, v->last_seen) < b->time_wait)
			return XLB_REAP_KEPT;
		break;
	case XLB_REAP_EMBRYONIC:
		if (flags & (XLB_F_CLOSED | XLB_F_ESTABLISHED))
			return XLB_REAP_KEPT;
		if (age32(now, v->last_seen) < b->embryonic_ttl)
			return XLB_REAP_KEPT;
		break;
	case XLB_REAP_ORPHAN:
		if (flags & XLB_F_CLOSED)
			return XLB_REAP_KEPT;
		if (age32(now, v->last_seen) < b->orphan_ttl)
			return XLB_REAP_KEPT;
		if (intact && age32(now, peer->last_seen) < b->orphan_ttl)
			return XLB_REAP_KEPT;
		break;
	default:
		return XLB_REAP_KEPT;
	}

	if (!intact) {
		/* the pair was already half gone: an invariant repair */
		if (bpf_map_delete_elem(&xlb_flows, &key))
			return XLB_REAP_GONE;
		release_lone(cfg, &key, &pk, bid, flags, peer != 0);
		count_reaped(mid, lone_reason(key.dir, flags));
		return XLB_REAP_REPAIRED;
	}
	closed_at = v->last_seen;
	if (bpf_map_delete_elem(&xlb_flows, &key))
		return XLB_REAP_GONE; /* a new SYN replaced it meanwhile */
	/*
	 * The counterpart only if it is still this pair's: its key may have
	 * gone to a new pair (a takeover of its port), whose port stays.
	 */
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	if (peer && peer->generation == gen) {
		if (op == XLB_REAP_TIMEWAIT && !(pflags & XLB_F_PORT_FREED)) {
			/*
			 * The backend closed first: its TIME_WAIT may outlive
			 * the pair's (the timer wheel's rounding), so the
			 * reverse entry stays as a XLB_F_HOLD entry keeping the
			 * port until snat_hold after the close, as replace_pair
			 * leaves one (hold_since).
			 */
			closed_at = hold_since(closed_at, peer->last_seen);
			if (flow_is(peer, gen)) {
				peer->last_seen = closed_at;
				if (flow_set(peer, gen, XLB_F_HOLD) != FLOW_GONE)
					post_event(&pk, gen, bid, XLB_CLOSE_HOLD, closed_at);
			}
		} else if (pflags & XLB_F_PORT_FREED) {
			delete_freed_reverse(cfg, &pk, bid, gen); /* left to a taker, or reaped as lone */
		} else if (!bpf_map_delete_elem(&xlb_flows, &pk) && cfg) {
			snat_release_entry(cfg, bid, &pk, pflags);
		}
	}
	if (op == XLB_REAP_RESET)
		count_reaped(mid, XLB_REAPED_RESET);
	else if (op == XLB_REAP_TIMEWAIT)
		count_reaped(mid, XLB_REAPED_TIMEWAIT);
	else if (op == XLB_REAP_EMBRYONIC)
		count_reaped(mid, XLB_REAPED_EMBRYONIC);
	else
		count_reaped(mid, XLB_REAPED_ORPHANED);
	return XLB_REAPED;
}

struct reap_loop {
	struct reap_batch *b;
};

static long reap_step(__u64 i, void *arg)
{
	struct reap_batch *b = ((struct reap_loop *)arg)->b;

	if (i >= XLB_REAP_BATCH)
		return 1;
	b->reqs[i].result = reap_one_req(b, &b->reqs[i]);
	return 0;
}

/* Answers every request of the batch; XDP_PASS once all are answered. */
SEC("xdp")
int xlb_reap(struct xdp_md *ctx)
{
	struct reap_loop l;
	__u32 zero = 0, n;

	l.b = bpf_map_lookup_elem(&xlb_reap_batch, &zero);
	if (!l.b)
		return XDP_DROP;
	n = l.b->count;
	if (n > XLB_REAP_BATCH)
		n = XLB_REAP_BATCH;
	bpf_loop(n, reap_step, &l, 0);
	return XDP_PASS;
}

#endif
