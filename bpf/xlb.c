// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xlb.c — the XLB XDP program: IPv4/TCP full-NAT load balancing, plus two
 * programs the daemon runs from userspace with BPF_PROG_TEST_RUN: the clock
 * (xlb_clock, clock.h) and the reaper (xlb_reap, reap.h), the maintenance
 * loop's only way to remove flow entries.
 *
 * This file is the packet path, its steps in the order a packet meets
 * them: is it ours (remote_port_for), forward it (rewrite_and_send), keep
 * the pair's close state (check_counterpart, note_close), create or
 * replace a pair for a SYN (create_pair, replace_pair), and xlb_xdp, which
 * ties them together. Every map is in maps.h, every key, value and size in
 * layout.h; the headers below hold one step each.
 *
 * Packet rules (docs/DESIGN.md §5; docs/connections-shutdown-upgrades.txt,
 * cited as "seed": "New connections", "Orderly close and reset", "XLB
 * shutdown behavior"):
 *   - client SYN (no ACK) to listen_ip:local_port without a live pair creates
 *     a connection pair: round-robin backend, SNAT port reserved by inserting
 *     the reverse entry with BPF_NOEXIST, forward entry with BPF_NOEXIST,
 *     rollback on failure;
 *   - packets matching a flow entry are rewritten (MACs, IPs, ports, TTL,
 *     checksums) and sent with XDP_TX or a devmap redirect;
 *   - FIN/RST update the pair's close state and are forwarded; the packet
 *     that ends a pair (second FIN, or first RST) marks it terminal, counts
 *     the closure and posts a close event for the maintenance loop; while the
 *     shutdown flag is set, every other packet of a pair and every new SYN
 *     is answered with a RST instead (an incoming RST is still forwarded);
 *   - everything else is XDP_PASS, untouched. The program never returns
 *     XDP_ABORTED.
 *
 * Documented drops (each counted): a SYN whose backend next hop is
 * unresolved (FIB miss; the client retransmits), a duplicate SYN that lost
 * the race to create the same pair on another CPU and found it gone again,
 * a redirect to an interface that left the devmap, and a RST reply whose
 * tail trim failed (not expected: the frame always holds the headers).
 */
#include <asm-generic/errno-base.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "packet.h"
#include "counters.h"
#include "clock.h"
#include "flow.h"
#include "events.h"
#include "rst.h"
#include "reap.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/*
 * Find the listen port mapping for dport; returns the remote port or 0.
 * Each mapping is read with one 32-bit load (local port in the low half on
 * this little-endian target) so the result is a value, not a pointer whose
 * offset depends on the matching iteration: without CAP_PERFMON the
 * verifier refuses such an offset.
 */
static __always_inline __be16 remote_port_for(struct xlb_config *cfg, __be16 dport)
{
	__u32 w;
	int i;

#pragma unroll
	for (i = 0; i < XLB_MAX_PORTS; i++) {
		if (i >= cfg->nports)
			break;
		w = *(__u32 *)&cfg->ports[i];
		if ((__be16)w == dport)
			return (__be16)(w >> 16);
	}
	return 0;
}

/* Rewrite the frame with entry v's recipe. Returns the XDP action. */
static __always_inline int rewrite_and_send(struct xdp_md *ctx, struct pkt *p, struct flow_value *v, __u32 dir)
{
	struct iphdr *iph = p->iph;
	struct tcphdr *tcp = p->tcp;
	struct backend_stats *bs;
	__u32 ipacc;
	__u16 oldw, neww;
	int act;

	if (iph->ttl <= 1) {
		/* Let the stack answer with ICMP time exceeded. */
		count(XLB_C_TTL_EXCEEDED);
		return XDP_PASS;
	}

	copy_mac(p->eth->h_dest, v->dmac);
	copy_mac(p->eth->h_source, v->smac);

	oldw = *(__u16 *)&iph->ttl;
	iph->ttl--;
	neww = *(__u16 *)&iph->ttl;
	ipacc = csum_replace16(v->csum_ip, oldw, neww);
	iph->saddr = v->saddr_be;
	iph->daddr = v->daddr_be;
	iph->check = csum_apply(iph->check, ipacc);

	tcp->source = v->sport_be;
	tcp->dest = v->dport_be;
	tcp->check = csum_apply(tcp->check, v->csum_l4);

	/* a terminal forward entry keeps the time it became terminal */
	if (!(v->flags & XLB_F_CLOSED))
		v->last_seen = now32();

	bs = backend_traffic(v->backend_id, dir);
	if (bs) {
		bs->packets++;
		bs->bytes += p->tot_len;
	}

	if (v->ifindex == ctx->ingress_ifindex)
		return XDP_TX;
	act = bpf_redirect_map(&xlb_tx_ports, v->ifindex, XDP_DROP);
	return act;
}

/*
 * A packet on an entry idle for XLB_LONE_CHECK_TICKS checks the entry's
 * counterpart and reports the entry when it is missing or of another pair
 * (DESIGN §5: a half pair is counted and repaired, never a dropped
 * packet; the packet is forwarded as usual). Entries that see no packets
 * are checked by the maintenance walk once idle for the orphan TTL.
 */
static __always_inline void check_counterpart(const struct flow_key *key, struct flow_value *v, __u32 dir, __u32 now)
{
	struct flow_value *peer;
	struct flow_key pk;

	flow_peer_key(&pk, v, (__u8)dir);
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	if (peer && peer->generation == v->generation)
		return;
	post_event(key, v->generation, v->backend_id, XLB_CLOSE_LONE, now);
}

/*
 * Record a FIN or RST on the pair's forward entry (seed "Orderly close and
 * reset"); key is the packet's flow key, v its entry. The atomic OR's old
 * value decides, exactly once per pair, which packet made the pair terminal:
 * the second FIN (initiator: the side whose FIN came first) or the first RST
 * (initiator: its sender). That packet stamps the forward entry's last_seen,
 * marks the pair XLB_F_CLOSED_FIN or XLB_F_CLOSED_RST, counts the closure
 * globally and for the backend, and posts the close event. A missing or
 * foreign counterpart is an invariant violation; the packet is forwarded
 * regardless by the caller.
 */
static __always_inline void note_close(const struct flow_key *key, struct flow_value *v, __u32 dir, __u8 tflags)
{
	struct flow_value *fwd, *peer;
	struct flow_key pk;
	__u32 bit, old, closes, at;
	int rst = (tflags & TCP_FL_RST) != 0;

	flow_peer_key(&pk, v, (__u8)dir);
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	if (!peer || peer->generation != v->generation) {
		count(XLB_C_INVARIANT);
		if (dir == XLB_DIR_BACKEND)
			return; /* no forward entry to hold the state */
		peer = 0;
	}
	fwd = dir == XLB_DIR_CLIENT ? v : peer;
	if (!fwd)
		return;

	if (rst)
		bit = dir == XLB_DIR_CLIENT ? XLB_F_RST_CLIENT : XLB_F_RST_BACKEND;
	else
		bit = dir == XLB_DIR_CLIENT ? XLB_F_FIN_CLIENT : XLB_F_FIN_BACKEND;

	old = __sync_fetch_and_or(&fwd->flags, bit);
	if (old & bit)
		return; /* retransmission */
	closes = XLB_F_FIN_CLIENT | XLB_F_FIN_BACKEND | XLB_F_RST_CLIENT | XLB_F_RST_BACKEND;
	if (!(old & closes) && dir == XLB_DIR_BACKEND)
		__sync_fetch_and_or(&fwd->flags, XLB_F_INIT_BACKEND);
	if (bits_terminal(old) || !bits_terminal(old | bit))
		return; /* already ended by another packet, or a half-close */

	/* this packet ended the pair */
	at = now32();
	fwd->last_seen = at;
	if (rst) {
		__sync_fetch_and_or(&fwd->flags, XLB_F_CLOSED_RST);
		count(dir == XLB_DIR_CLIENT ? XLB_C_CLOSED_CLIENT_RST : XLB_C_CLOSED_BACKEND_RST);
		count_pair_event(fwd->backend_id, XLB_PAIR_CLOSED_RST);
	} else {
		__sync_fetch_and_or(&fwd->flags, XLB_F_CLOSED_FIN);
		/* second FIN: the other side initiated */
		count(dir == XLB_DIR_CLIENT ? XLB_C_CLOSED_BACKEND_FIN : XLB_C_CLOSED_CLIENT_FIN);
		count_pair_event(fwd->backend_id, XLB_PAIR_CLOSED_FIN);
	}
	if (dir == XLB_DIR_CLIENT)
		post_event(key, fwd->generation, fwd->backend_id, rst ? XLB_CLOSE_RST : XLB_CLOSE_FIN, at);
	else
		post_event(&pk, fwd->generation, fwd->backend_id, rst ? XLB_CLOSE_RST : XLB_CLOSE_FIN, at);
}

/*
 * Next hop toward dst from src, as the host's FIB would route a packet this
 * host sends (XLB originates the backend-facing side of a full-NAT pair): the
 * lookup enters from the loopback device, like a locally generated route
 * lookup, so policy rules and the longest prefix apply unchanged. The kernel
 * requires forwarding on the device named in the lookup; the daemon enables
 * net.ipv4.conf.lo.forwarding, which forwards nothing by itself. Returns 0 on
 * success; the egress interface must be ingress or in the redirect map.
 */
#ifndef AF_INET
#define AF_INET 2
#endif
#define LOOPBACK_IFINDEX 1
static __always_inline int next_hop(struct xdp_md *ctx, __be32 src, __be32 dst, __u8 *smac, __u8 *dmac, __u32 *ifindex)
{
	struct bpf_fib_lookup fib = {};
	__u32 oif;
	int rc;

	fib.family = AF_INET;
	fib.l4_protocol = IPPROTO_TCP;
	fib.ipv4_src = src;
	fib.ipv4_dst = dst;
	fib.ifindex = LOOPBACK_IFINDEX;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;
	oif = fib.ifindex;
	if (oif != ctx->ingress_ifindex && !bpf_map_lookup_elem(&xlb_tx_ports, &oif))
		return -1;
	copy_mac(smac, fib.smac);
	copy_mac(dmac, fib.dmac);
	*ifindex = oif;
	return 0;
}

enum create_result {
	CREATE_OK,
	CREATE_RACE,      /* another CPU created the same pair */
	CREATE_EXHAUSTED, /* no free SNAT port within the bounded probes */
	CREATE_FULL,      /* flow table full */
	CREATE_NO_BACKEND,
	CREATE_FIB_MISS,
};

/*
 * SNAT port probing (DESIGN §5 "SNAT port choice"): the next port of the
 * backend's rotating cursor is taken by inserting the pair's reverse entry
 * with BPF_NOEXIST; a port in use (EEXIST) moves on to the next one, at
 * most XLB_SNAT_MAX_TRIES times. The probes run under bpf_loop so the
 * verifier checks the body once: unrolled, the loop is too complex to
 * verify without CAP_PERFMON (Spectre v1 path exploration).
 */
struct snat_probe {
	struct create_scratch *s;
	__u32 *cursor;
	__u32 lo;   /* first port of the range, host order */
	__u32 n;    /* ports in the range, >= 1 */
	long err;   /* result of the last insert; SNAT_NOT_PROBED before the first */
};

/* snat_probe.err until a probe ran (bpf_loop ran none). */
#define SNAT_NOT_PROBED (-1)

static long snat_probe_one(__u64 i, void *arg)
{
	struct snat_probe *pr = arg;
	struct create_scratch *s = pr->s;
	__u32 port;

	if (pr->n == 0)
		return 1;
	port = pr->lo + (__sync_fetch_and_add(pr->cursor, 1) % pr->n);
	s->rkey.dport_be = bpf_htons((__u16)port);
	recipe_csum(&s->rev, &s->rkey);
	pr->err = bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_NOEXIST);
	return pr->err == -EEXIST ? 0 : 1; /* a port in use: the next one */
}

/*
 * Create a connection pair for the client SYN in p whose forward key is fk
 * (seed "New connections"). On CREATE_OK the frame has not been touched yet;
 * *out receives a copy of the new forward recipe in the scratch area.
 */
static __always_inline int create_pair(struct xdp_md *ctx, struct pkt *p, struct xlb_config *cfg,
				       struct flow_key *fk, __be16 remote_port, struct flow_value **out)
{
	struct create_scratch *s;
	struct backend_set *set;
	struct backend_ref br;
	struct xlb_state *st;
	struct backend_stats *bs;
	struct snat_probe probe;
	__u32 zero = 0, slot, count_, idx, n, tries, *cursor, rr, now;
	__u64 gen;
	int err;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	st = bpf_map_lookup_elem(&xlb_shared, &zero);
	if (!s || !st)
		return CREATE_FULL;
	slot = cfg->active_set & 1;
	set = bpf_map_lookup_elem(&xlb_backend_sets, &slot);
	if (!set)
		return CREATE_NO_BACKEND;
	count_ = set->count;
	if (count_ == 0 || count_ > XLB_MAX_BACKENDS)
		return CREATE_NO_BACKEND;
	rr = (__u32)__sync_fetch_and_add(&st->rr, 1);
	idx = rr % count_;
	/* hide idx's range from clang so the verifier sees the bound check */
	asm volatile("" : "+r"(idx));
	if (idx >= XLB_MAX_BACKENDS)
		return CREATE_NO_BACKEND;
	br = set->entries[idx];
	if (br.id >= XLB_MAX_BACKENDS)
		return CREATE_NO_BACKEND;

	/* forward recipe: toward the backend, from the SNAT address */
	__builtin_memset(&s->fwd, 0, sizeof(s->fwd));
	if (next_hop(ctx, cfg->snat_ip_be, br.ip_be, s->fwd.smac, s->fwd.dmac, &s->fwd.ifindex))
		return CREATE_FIB_MISS;
	s->fwd.saddr_be = cfg->snat_ip_be;
	s->fwd.daddr_be = br.ip_be;
	s->fwd.dport_be = remote_port;

	/* reverse recipe: toward the client, from listen:local_port */
	__builtin_memset(&s->rev, 0, sizeof(s->rev));
	if (next_hop(ctx, cfg->listen_ip_be, fk->saddr_be, s->rev.smac, s->rev.dmac, &s->rev.ifindex)) {
		/* no usable route/neighbour: answer the L2 sender of the SYN */
		copy_mac(s->rev.smac, p->eth->h_dest);
		copy_mac(s->rev.dmac, p->eth->h_source);
		s->rev.ifindex = ctx->ingress_ifindex;
	}
	s->rev.saddr_be = cfg->listen_ip_be;
	s->rev.daddr_be = fk->saddr_be;
	s->rev.sport_be = fk->dport_be;
	s->rev.dport_be = fk->sport_be;

	gen = __sync_fetch_and_add(&st->generation, 1) + 1;
	if ((__u32)gen == 0)
		gen = __sync_fetch_and_add(&st->generation, 1) + 1;
	now = now32();
	s->fwd.backend_id = (__u16)br.id;
	s->rev.backend_id = (__u16)br.id;
	s->fwd.generation = (__u32)gen;
	s->rev.generation = (__u32)gen;
	s->fwd.last_seen = now;
	s->rev.last_seen = now;

	__builtin_memset(&s->rkey, 0, sizeof(s->rkey));
	s->rkey.saddr_be = br.ip_be;
	s->rkey.daddr_be = cfg->snat_ip_be;
	s->rkey.sport_be = remote_port;
	s->rkey.proto = IPPROTO_TCP;
	s->rkey.dir = XLB_DIR_BACKEND;

	if (cfg->snat_port_hi < cfg->snat_port_lo)
		return CREATE_EXHAUSTED;
	n = (__u32)cfg->snat_port_hi - cfg->snat_port_lo + 1;
	tries = n < XLB_SNAT_MAX_TRIES ? n : XLB_SNAT_MAX_TRIES;
	idx = br.id;
	cursor = bpf_map_lookup_elem(&xlb_snat_cursors, &idx);
	if (!cursor)
		return CREATE_EXHAUSTED;

	probe.s = s;
	probe.cursor = cursor;
	probe.lo = cfg->snat_port_lo;
	probe.n = n;
	probe.err = SNAT_NOT_PROBED;
	bpf_loop(tries, snat_probe_one, &probe, 0);
	err = probe.err;
	if (err == -EEXIST || err == SNAT_NOT_PROBED)
		return CREATE_EXHAUSTED;
	if (err)
		return CREATE_FULL;

	s->fwd.sport_be = s->rkey.dport_be;
	recipe_csum(&s->fwd, fk);
	err = bpf_map_update_elem(&xlb_flows, fk, &s->fwd, BPF_NOEXIST);
	if (err) {
		bpf_map_delete_elem(&xlb_flows, &s->rkey);
		return err == -EEXIST ? CREATE_RACE : CREATE_FULL;
	}

	count(XLB_C_PAIRS_CREATED);
	bs = client_stats((__u16)br.id);
	if (bs)
		bs->opened++;
	*out = &s->fwd;
	return CREATE_OK;
}

/*
 * seed: a new SYN meeting terminal state replaces that pair. The
 * counterpart goes only if it is still this pair's (a reverse key freed and
 * reused by another pair stays). Whoever deletes a forward entry accounts
 * for its pair: here, the backend's XLB_PAIR_REPLACED_* count (the gauges).
 */
static __always_inline void replace_pair(const struct flow_key *key, struct flow_value *v)
{
	struct flow_value *peer;
	struct flow_key pk;
	__u32 flags = v->flags;
	__u16 bid = v->backend_id;

	flow_peer_key(&pk, v, XLB_DIR_CLIENT);
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	if (peer && peer->generation == v->generation)
		bpf_map_delete_elem(&xlb_flows, &pk);
	if (bpf_map_delete_elem(&xlb_flows, key))
		return; /* the maintenance loop removed it first */
	count(XLB_C_PAIRS_REPLACED);
	count_pair_event(bid, flags & XLB_F_CLOSED_RST ? XLB_PAIR_REPLACED_RST : XLB_PAIR_REPLACED_FIN);
}

SEC("xdp")
int xlb_xdp(struct xdp_md *ctx)
{
	struct flow_value *v, *peer;
	struct xlb_config *cfg;
	struct flow_key key;
	struct pkt p;
	__be16 remote = 0;
	__u32 zero = 0, dir, now;
	__u16 dport;
	int rc, is_syn;

	if (parse(ctx, &p))
		return finish(XDP_PASS);
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!cfg)
		return finish(XDP_PASS);

	dport = bpf_ntohs(p.tcp->dest);
	if (p.iph->daddr == cfg->listen_ip_be && (remote = remote_port_for(cfg, p.tcp->dest)) != 0)
		dir = XLB_DIR_CLIENT;
	else if (p.iph->daddr == cfg->snat_ip_be && dport >= cfg->snat_port_lo && dport <= cfg->snat_port_hi)
		dir = XLB_DIR_BACKEND;
	else
		return finish(XDP_PASS);

	__builtin_memset(&key, 0, sizeof(key));
	key.saddr_be = p.iph->saddr;
	key.daddr_be = p.iph->daddr;
	key.sport_be = p.tcp->source;
	key.dport_be = p.tcp->dest;
	key.proto = IPPROTO_TCP;
	key.dir = dir;

	v = bpf_map_lookup_elem(&xlb_flows, &key);
	is_syn = dir == XLB_DIR_CLIENT && (p.flags & (TCP_FL_SYN | TCP_FL_ACK | TCP_FL_RST | TCP_FL_FIN)) == TCP_FL_SYN;

	if (cfg->flags & XLB_CFG_SHUTDOWN) {
		/* seed "XLB shutdown behavior": reactive RSTs; an incoming RST is never answered */
		if (p.flags & TCP_FL_RST) {
			if (!v)
				return finish(XDP_PASS);
			note_close(&key, v, dir, p.flags);
			return finish(rewrite_and_send(ctx, &p, v, dir));
		}
		if (!v && !is_syn)
			return finish(XDP_PASS);
		count(XLB_C_SHUTDOWN_RESETS);
		return finish(reply_rst(ctx, &p));
	}

	if (is_syn) {
		if (v) {
			if (!pair_terminal(v->flags)) {
				count(XLB_C_SYN_REUSED);
				return finish(rewrite_and_send(ctx, &p, v, dir));
			}
			replace_pair(&key, v);
		}
		rc = create_pair(ctx, &p, cfg, &key, remote, &v);
		switch (rc) {
		case CREATE_OK:
			break;
		case CREATE_RACE:
			v = bpf_map_lookup_elem(&xlb_flows, &key);
			if (!v)
				return finish(XDP_DROP);
			count(XLB_C_SYN_REUSED);
			break;
		case CREATE_FIB_MISS:
			count(XLB_C_FIB_MISS);
			return finish(XDP_DROP);
		case CREATE_EXHAUSTED:
			count(XLB_C_SNAT_EXHAUSTED);
			return finish(reply_rst(ctx, &p));
		case CREATE_NO_BACKEND:
			count(XLB_C_NO_BACKEND);
			return finish(reply_rst(ctx, &p));
		default:
			count(XLB_C_TABLE_FULL);
			return finish(reply_rst(ctx, &p));
		}
		if (rc == CREATE_OK) {
			/* the map holds the entry; forward with the map's copy so stats land there */
			peer = bpf_map_lookup_elem(&xlb_flows, &key);
			if (peer)
				v = peer;
		}
		return finish(rewrite_and_send(ctx, &p, v, dir));
	}

	if (!v)
		return finish(XDP_PASS);
	now = now32();
	if ((__s32)(now - v->last_seen) >= XLB_LONE_CHECK_TICKS)
		check_counterpart(&key, v, dir, now);
	if (p.flags & (TCP_FL_FIN | TCP_FL_RST))
		note_close(&key, v, dir, p.flags);
	return finish(rewrite_and_send(ctx, &p, v, dir));
}

/*
 * Keep the enums that no map or struct names in BTF, so that bpf2go generates
 * their Go constants (pkg/dataplane/gen.go -type).
 */
const enum xlb_limits *__xlb_limits_btf __attribute__((unused));
const enum xlb_counter *__xlb_counter_btf __attribute__((unused));
const enum xlb_flow_flags *__xlb_flow_flags_btf __attribute__((unused));
const enum xlb_dir *__xlb_dir_btf __attribute__((unused));
const enum xlb_cfg_flags *__xlb_cfg_flags_btf __attribute__((unused));
const enum xlb_close_kind *__xlb_close_kind_btf __attribute__((unused));
const enum xlb_reaped_reason *__xlb_reaped_reason_btf __attribute__((unused));
const enum xlb_pair_event *__xlb_pair_event_btf __attribute__((unused));
const enum xlb_pin *__xlb_pin_btf __attribute__((unused));
