/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * snatsync.h — xlb_snat_sync, the SNAT bitmap sync: how userspace
 * rebuilds xlb_snat_ports from the flow map while a program runs on it
 * (pkg/dataplane RebuildSNATPorts). Userspace walks the flow map and the
 * bitmap, then asks here, a batch at a time (layout.h struct
 * snat_sync_batch), for the bits it found missing or stale. Each request
 * is re-checked against the live flow entries just before the atomic OR
 * or AND, never a whole word written, so a port the data path takes or
 * frees after the walk read its entry keeps the bit the data path gave it.
 *
 * A port is held by a reverse entry toward the bit's backend id without
 * XLB_F_PORT_FREED (snat.h). A bit is set only while such an entry is
 * there, and checked again after the OR: the data path marks an entry
 * freed (or deletes it) before it clears the bit, so a release that
 * races the OR is seen by the second check, which takes the bit back. A
 * bit is cleared only when none of the candidate entries userspace names
 * for it (every backend address and port it knows for the backend id)
 * holds the port. A pair created after the walk under a candidate
 * userspace did not know may lose its bit; that costs the allocator one
 * failed insert, after which the bit is set again (snat.h). A bit an
 * allocation holds as its lock while it takes over a freed port (snat.h
 * snat_take_port) looks stale too, and a clear landing between that claim
 * and the takeover's write lets a second allocation race it for the port;
 * the window is the takeover's few instructions, and only a rebuild that
 * finds the bit set without a holder opens it.
 */
#ifndef XLB_SNATSYNC_H
#define XLB_SNATSYNC_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "flow.h"
#include "snat.h"

/* Whether the entry at key (a reverse entry's) holds its port toward bid. */
static __always_inline int snat_port_held(const struct flow_key *key, __u16 bid)
{
	struct flow_value *v;

	if (key->dir != XLB_DIR_BACKEND)
		return 0;
	v = bpf_map_lookup_elem(&xlb_flows, key);
	return v && !(v->flags & XLB_F_PORT_FREED) && v->backend_id == bid;
}

struct snat_sync_loop {
	struct snat_sync_batch *b;
	struct xlb_config *cfg;
	__u32 held; /* a CHECK of the current bit found a holder */
};

static long snat_sync_step(__u64 i, void *arg)
{
	struct snat_sync_loop *l = arg;
	struct snat_sync_req *q;
	struct flow_value *v;
	struct flow_key key;
	__u64 bit, *w;
	__u32 held;
	__u16 bid;

	if (i >= XLB_SNAT_SYNC_BATCH)
		return 1;
	q = &l->b->reqs[i];
	key = q->key;
	switch (q->op) {
	case XLB_SNAT_SYNC_SET:
		v = key.dir == XLB_DIR_BACKEND ? bpf_map_lookup_elem(&xlb_flows, &key) : 0;
		if (!v || (v->flags & XLB_F_PORT_FREED)) {
			q->result = XLB_SNAT_SYNC_FREE;
			break;
		}
		bid = v->backend_id;
		w = snat_word(l->cfg, bid, key.proto, key.daddr_be, key.dport_be, &bit);
		if (!w) {
			q->result = XLB_SNAT_SYNC_OUTSIDE;
			break;
		}
		__sync_fetch_and_or(w, bit);
		if (snat_port_held(&key, bid)) {
			q->result = XLB_SNAT_SYNC_DONE;
		} else {
			__sync_fetch_and_and(w, ~bit); /* released meanwhile */
			q->result = XLB_SNAT_SYNC_FREE;
		}
		break;
	case XLB_SNAT_SYNC_CHECK:
		l->held |= snat_port_held(&key, q->backend_id);
		q->result = l->held ? XLB_SNAT_SYNC_HELD : XLB_SNAT_SYNC_FREE;
		break;
	case XLB_SNAT_SYNC_CLEAR:
		held = l->held | snat_port_held(&key, q->backend_id);
		l->held = 0;
		w = snat_word(l->cfg, q->backend_id, key.proto, key.daddr_be, key.dport_be, &bit);
		if (!w)
			q->result = XLB_SNAT_SYNC_OUTSIDE;
		else if (held)
			q->result = XLB_SNAT_SYNC_HELD;
		else {
			__sync_fetch_and_and(w, ~bit);
			q->result = XLB_SNAT_SYNC_DONE;
		}
		break;
	default:
		break;
	}
	return 0;
}

/* Answers every request of the batch; XDP_PASS once all are answered. */
SEC("xdp")
int xlb_snat_sync(struct xdp_md *ctx)
{
	struct snat_sync_loop l;
	__u32 zero = 0, n;

	l.b = bpf_map_lookup_elem(&xlb_snat_sync_batch, &zero);
	l.cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!l.b || !l.cfg)
		return XDP_DROP;
	l.held = 0;
	n = l.b->count;
	if (n > XLB_SNAT_SYNC_BATCH)
		n = XLB_SNAT_SYNC_BATCH;
	bpf_loop(n, snat_sync_step, &l, 0);
	return XDP_PASS;
}

#endif
