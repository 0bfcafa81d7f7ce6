/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * udp.h — what a UDP pair needs beside the TCP path (layout 11; DESIGN §9):
 * the per-service cap on pairs without a reply (udp_admit, udp_unadmit),
 * the first reply (udp_note_reply), the checksum rule (udp_csum) and the
 * fragments passed (udp_fragment). The functions that the packet path
 * calls are global: checked once on their own, their frames beside the
 * SYN's deepest call chain (xlb.c create_pair, pick_backend), never under
 * it. They take scalars or an entry pointer and keep their state in the
 * per-CPU scratch.
 */
#ifndef XLB_UDP_H
#define XLB_UDP_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "counters.h"
#include "flow.h"
#include "listen.h"
#include "snat.h"

/* Count per-service counter c (enum xlb_svc_counter) of service id svc. */
static __always_inline void count_svc(__u32 svc, __u32 c)
{
	__u32 idx = svc * XLB_SVC_COUNTERS + c;
	__u64 *v = bpf_map_lookup_elem(&xlb_svc_counters, &idx);

	if (v)
		*v += 1;
}

/*
 * Admit one more unreplied pair to the scratch's service (listen_find
 * wrote its id and udp_max): 0, or -1 when the service already has
 * udp_max pairs without a reply (counted per service and globally; the
 * datagram passes to the kernel). Exact: the add is undone when it went
 * over, so the cell may overshoot by CPUs - 1 for an instant, which only
 * refuses a datagram that would have fit.
 */
__noinline int udp_admit(void)
{
	struct create_scratch *s;
	__u32 zero = 0, svc;
	__u64 *cell, old;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	if (!s)
		return -1;
	svc = s->service;
	cell = bpf_map_lookup_elem(&xlb_udp_unreplied, &svc);
	if (!cell)
		return -1;
	old = __sync_fetch_and_add(cell, 1);
	if (old < s->udp_max)
		return 0;
	__sync_fetch_and_add(cell, -1);
	count_svc(svc, XLB_SVC_UDP_OVER_CAP);
	count(XLB_C_UDP_OVER_CAP);
	return -1;
}

/* Undo udp_admit: the pair it admitted was not created (or another CPU's was). */
__noinline int udp_unadmit(void)
{
	struct create_scratch *s;
	__u32 zero = 0, svc;
	__u64 *cell;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	if (!s)
		return -1;
	svc = s->service;
	cell = bpf_map_lookup_elem(&xlb_udp_unreplied, &svc);
	if (cell)
		__sync_fetch_and_add(cell, -1);
	return 0;
}

/* Take one pair of service id svc out of its unreplied count. */
static __always_inline void udp_replied(__u32 svc)
{
	__u64 *cell = bpf_map_lookup_elem(&xlb_udp_unreplied, &svc);

	if (cell)
		__sync_fetch_and_add(cell, -1);
}

/*
 * The backend's datagram on reverse entry rev (of pair gen) whose pair
 * has no XLB_F_UDP_REPLIED yet: the bit goes on the forward entry first,
 * and the one that added it there takes the pair out of its service's
 * unreplied count; then on rev, so that later replies skip the lookup. A
 * lone reverse entry is left as it is (the reaper counts it).
 */
__noinline int udp_note_reply(struct flow_value *rev, __u32 gen)
{
	struct flow_value *fwd;
	struct flow_key fk;
	__u32 svc;
	long old;

	if (!rev)
		return 0;
	svc = rev->service_id;
	flow_peer_key(&fk, rev, XLB_DIR_BACKEND);
	fwd = bpf_map_lookup_elem(&xlb_flows, &fk);
	if (!fwd)
		return 0;
	old = flow_set(fwd, gen, XLB_F_UDP_REPLIED);
	if (old == FLOW_GONE)
		return 0;
	if (!(old & XLB_F_UDP_REPLIED))
		udp_replied(svc);
	flow_set(rev, gen, XLB_F_UDP_REPLIED);
	return 0;
}

/*
 * A UDP checksum after an incremental update by delta: a zero checksum
 * means none (IPv4 allows it) and stays 0; a result of 0 is sent as
 * 0xffff (RFC 768).
 */
static __always_inline __u16 udp_csum(__u16 check, __u32 delta)
{
	__u16 c;

	if (!check)
		return 0;
	c = csum_apply(check, delta);
	return c ? c : 0xffff;
}

/*
 * A fragment of a UDP datagram (parse: PARSE_UDP_FRAGMENT). Not tracked:
 * one to a listen address or a SNAT address is counted
 * (XLB_C_UDP_FRAGS_PASSED), and every one passes to the kernel untouched
 * (a live pair's first fragment too: the kernel reassembles the
 * datagram, finds no socket and answers port unreachable).
 */
__noinline int udp_fragment(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct xlb_config *cfg;
	struct iphdr *iph;
	__u32 zero = 0;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!cfg)
		return XDP_PASS;
	if (listen_filtered(cfg, iph->daddr) || snat_index(cfg, iph->daddr) >= 0)
		count(XLB_C_UDP_FRAGS_PASSED);
	return XDP_PASS;
}

#endif
