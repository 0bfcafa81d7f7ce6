// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xlb.c — the XLB XDP program: IPv4 TCP and UDP full-NAT load balancing, plus three
 * programs the daemon runs from userspace with BPF_PROG_TEST_RUN: the clock
 * (xlb_clock, clock.h), the reaper (xlb_reap, reap.h), the maintenance
 * loop's only way to remove flow entries, and the SNAT bitmap sync
 * (xlb_snat_sync, snatsync.h), its only way to change the port bitmap.
 *
 * This file is the packet path, its steps in the order a packet meets
 * them: is it ours (a SNAT address's port range, or listen.h's prefilter
 * of listen addresses, and addressed to the ingress interface's MAC:
 * ours.h), forward it (rewrite_and_send), keep
 * the pair's state (check_counterpart, note_close, track_handshake,
 * check_rst), create or replace a pair for a SYN (try_backend, create_pair,
 * replace_pair), and xlb_xdp, which ties them together. Every map is in
 * maps.h, every key, value and size in layout.h; the headers below hold
 * one step each (SNAT ports: snat.h; next hops: nexthop.h; TCP tracking:
 * track.h; handshake latency: handshake.h; ICMP errors: icmp.h).
 *
 * Packet rules (docs/DESIGN.md §5 and §6b; docs/connections-shutdown-
 * upgrades.txt, cited as "seed": "New connections", "Orderly close and
 * reset", "XLB shutdown behavior"):
 *   - only a frame whose destination MAC is the ingress interface's own
 *     is balanced (ours.h); one to a listen address or to a SNAT
 *     address's port range addressed to another MAC or a group address
 *     (flooded by a switch or bridge: another host's traffic) is counted
 *     and passed untouched, so the kernel drops it as PACKET_OTHERHOST;
 *   - client SYN (no ACK) without a live pair to a serving service's
 *     listen address and local port (xlb_listen: listen_find) creates a
 *     connection pair: the backend the service's scheduler picks
 *     (sched.h: round robin, weighted round robin or Maglev) on the
 *     mapping's remote port (or the backend's own when the mapping has
 *     none), the SYN's time
 *     (handshake.h), a SNAT port claimed in the
 *     backend's bitmap and reserved by inserting the reverse entry with
 *     BPF_NOEXIST (or taken over from a terminal pair that left the backend
 *     no TIME_WAIT), forward entry with BPF_NOEXIST, rollback on failure;
 *     a backend without a free port passes the SYN to the next routable
 *     one; the pair is embryonic until the client ACKs the SYN-ACK;
 *   - packets matching a flow entry are rewritten (IPs, ports, TTL,
 *     checksums, and the MACs of the entry's next hop) and sent with XDP_TX
 *     or a devmap redirect;
 *   - FIN and exact RST update the pair's close state and are forwarded;
 *     the packet that ends a pair (second FIN, or first exact RST) marks
 *     it terminal, counts the closure and posts a close event for the
 *     maintenance loop; a RST elsewhere in the receiver's window is
 *     forwarded and counted, the pair kept (track.h rst_verdict); while
 *     the shutdown flag is set, every other packet of a pair and every
 *     new SYN is answered with a RST instead (an incoming RST is still
 *     judged and forwarded the same way);
 *   - a segment with IPv4 options is balanced as one without: its options
 *     are copied unchanged (the TCP header behind them is read and written
 *     back with bpf_xdp_load_bytes/bpf_xdp_store_bytes: packet.h), so a
 *     SYN with options creates a pair too;
 *   - IPv4 fragments (frag.h): a datagram's first fragment on a known pair
 *     is balanced as a segment (the TCP checksum's update covers the
 *     whole datagram) and its ports remembered for XLB_FRAG_TTL_MS; a
 *     later fragment of a remembered datagram follows it, its IPv4 header
 *     and MACs rewritten (follow_fragment). A fragment never creates or
 *     replaces a pair (a SYN's first fragment passes); a fragment to the
 *     listen address or a SNAT address of no known pair or datagram (a
 *     later fragment ahead of its first one, one of an expired or lost
 *     entry) passes untouched and is counted, the kernel's reassembly
 *     then times it out and the sender retransmits;
 *   - UDP (layout 11; DESIGN §9; udp.h): a client's datagram of no pair
 *     to a serving UDP service's listen address and local port takes the
 *     SYN's path (is_syn: listen_find, create_pair, sched_start,
 *     pick_backend) and creates a pair with XLB_F_UDP on both entries,
 *     its SNAT port from the UDP half of the backend's bitmap (snat.h
 *     snat_half), once its service's udp_unreplied_max admits it
 *     (udp_admit); any datagram of a pair is forwarded both ways and
 *     refreshes the entry it traverses; the backend's first one marks the
 *     pair XLB_F_UDP_REPLIED (udp_note_reply); a zero UDP checksum stays
 *     0. A first datagram over the cap, without a routable backend or a
 *     free port, or to a full table passes to the kernel (counted: its
 *     port unreachable is honest); a FIB miss drops it, as a SYN. While
 *     the shutdown flag is set, live UDP pairs are forwarded and new
 *     datagrams pass. UDP fragments are not tracked: to a listen or SNAT
 *     address, counted and passed (a live pair's too). The reaper removes
 *     a UDP pair idle for its timeout (reap.h reap_udp);
 *   - ICMP errors about a pair (TCP or UDP), addressed to the ingress
 *     interface's MAC, are translated for the other side (icmp.h; not
 *     those quoting a header with IPv4 options, which pass untouched);
 *   - everything else is XDP_PASS, untouched (a SYN to an address and
 *     port no serving service has among them). The program never returns
 *     XDP_ABORTED.
 *
 * Documented drops (each counted): a SYN whose backend next hop is
 * unresolved on every backend tried (FIB miss; the client retransmits), a
 * balanced packet with TTL <= 1, a RST outside the receiver's window, a
 * packet on a held SNAT port (the backend's TIME_WAIT of a replaced pair),
 * a packet whose next hop is gone and cannot be looked up again, a
 * duplicate SYN that lost the race to create the same pair on another CPU
 * and found it gone again, a redirect to an interface that left the
 * devmap, a RST reply whose tail trim failed (not expected: the frame
 * always holds the headers), and a segment behind IPv4 options whose TCP
 * header could not be stored back (not expected: parse() read it from the
 * frame).
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
#include "listen.h"
#include "ours.h"
#include "nexthop.h"
#include "snat.h"
#include "tsopt.h"
#include "track.h"
#include "handshake.h"
#include "icmp.h"
#include "frag.h"
#include "reap.h"
#include "snatsync.h"
#include "sched.h"
#include "udp.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/*
 * Entry v (of pair gen) names a slot that was freed or is stale: look its
 * next hop up again and name the slot found (XLB_C_NEXTHOP_REFRESH).
 * Returns 0 when v names a slot to send through: the new one, or the
 * stale one when the FIB has no answer (its next hop is still the best
 * guess); -1 when there is neither, or v is another pair's now.
 * A function of its own, so that rewrite_and_send keeps few values live
 * across the calls.
 */
static __noinline int refresh_next_hop(struct xdp_md *ctx, struct flow_value *v, __u32 gen)
{
	struct nexthop *nh;
	__u32 id, nid = 0;

	if (!v)
		return -1;
	if (!resolve_next_hop(ctx, v->saddr_be, v->daddr_be, &nid)) {
		nh = bpf_map_lookup_elem(&xlb_nexthops, &nid);
		if (nh && nh->ifindex && !(nh->ifindex & XLB_NEXTHOP_STALE)) {
			if (!flow_is(v, gen))
				return -1; /* another pair's entry now (flow.h: stale pointers) */
			count(XLB_C_NEXTHOP_REFRESH);
			v->nexthop = nid;
			return 0;
		}
	}
	id = v->nexthop;
	nh = bpf_map_lookup_elem(&xlb_nexthops, &id);
	return nh && (nh->ifindex & XLB_NEXTHOP_STALE) ? 0 : -1;
}

/*
 * Entry v's next hop. A next hop whose slot the daemon freed or marked
 * stale meanwhile (a changed route, a failed neighbour: layout.h struct
 * nexthop) is looked up again and the entry names the new slot
 * (XLB_C_NEXTHOP_REFRESH). When the FIB has no answer, a stale slot's next
 * hop is still the best guess and the packet leaves through it (the next
 * packet looks again); a freed slot has none: NULL, a FIB miss, counted
 * (the caller drops the packet and the sender retransmits).
 */
static __always_inline struct nexthop *pair_next_hop(struct xdp_md *ctx, struct flow_value *v, __u32 gen)
{
	struct nexthop *nh;
	__u32 id = v->nexthop;

	nh = bpf_map_lookup_elem(&xlb_nexthops, &id);
	if (!nh || !nh->ifindex || (nh->ifindex & XLB_NEXTHOP_STALE)) {
		if (refresh_next_hop(ctx, v, gen)) {
			count(XLB_C_FIB_MISS);
			return 0;
		}
		id = v->nexthop;
		nh = bpf_map_lookup_elem(&xlb_nexthops, &id);
	}
	return nh;
}

/*
 * The Ethernet and IPv4 part of entry v's rewrite (MACs of next hop nh,
 * addresses, TTL, header checksum), the pair's idle clock and the
 * backend's traffic (its member's cells), and the send toward nh; gen: the generation v had at
 * the packet's lookup. Returns the XDP action.
 * IPv4 options and the rest of the datagram are left as they came.
 */
static __always_inline int send_ip(struct xdp_md *ctx, struct ethhdr *eth, struct iphdr *iph, __u16 tot_len,
				   struct flow_value *v, __u32 gen, struct nexthop *nh, __u32 dir)
{
	struct backend_stats *bs;
	__u32 ipacc, oif, flags;
	__u16 oldw, neww, mid;

	copy_mac(eth->h_dest, nh->dmac);
	copy_mac(eth->h_source, nh->smac);

	oldw = *(__u16 *)&iph->ttl;
	iph->ttl--;
	neww = *(__u16 *)&iph->ttl;
	ipacc = csum_replace16(v->csum_ip, oldw, neww);
	iph->saddr = v->saddr_be;
	iph->daddr = v->daddr_be;
	iph->check = csum_apply(iph->check, ipacc);
	flags = v->flags;
	mid = v->member_id;

	/*
	 * The last read of v. When v is no longer pair gen's, another CPU
	 * replaced or reaped the pair while this packet was on its way, and
	 * what was read may be the new pair's: dropped, counted; the sender
	 * retransmits into whatever holds its 5-tuple now (flow.h: stale
	 * pointers).
	 */
	if (!flow_is(v, gen)) {
		count(XLB_C_PAIR_GONE_IN_FLIGHT);
		return XDP_DROP;
	}

	/*
	 * Any packet refreshes an established pair, and any datagram the UDP
	 * entry it traverses; an embryonic pair keeps its SYN's time (the
	 * embryonic TTL runs from there) and a terminal forward entry the
	 * time it became terminal.
	 */
	if (!(flags & XLB_F_CLOSED) && (flags & (XLB_F_ESTABLISHED | XLB_F_UDP)))
		v->last_seen = now32();

	bs = backend_traffic(mid, dir);
	if (bs) {
		bs->packets++;
		bs->bytes += tot_len;
	}

	oif = nh->ifindex & ~XLB_NEXTHOP_STALE; /* a stale slot's interface is still the best guess */
	if (oif == ctx->ingress_ifindex)
		return XDP_TX;
	return bpf_redirect_map(&xlb_tx_ports, oif, XDP_DROP);
}

/*
 * Rewrite the frame with entry v's recipe and send it toward v's next hop
 * (pair_next_hop; none found drops the packet); gen: the generation v had
 * at the packet's lookup (send_ip). Returns the XDP action. The timestamp
 * option is rewritten by the pair's offset (tsopt.h).
 * Behind IPv4 options the TCP header rewritten is p's copy, stored back
 * into the frame; the options stay as they came (the header checksum's
 * update covers them unchanged). A first fragment or a segment with
 * options that leaves is counted.
 */
static __always_inline int rewrite_and_send(struct xdp_md *ctx, struct pkt *p, struct flow_value *v, __u32 gen, __u32 dir,
					    int udp)
{
	struct tcphdr *tcp = p->tcp;
	struct nexthop *nh;
	__u32 l4 = v->csum_l4;
	int act;

	nh = pair_next_hop(ctx, v, gen);
	if (!nh)
		return XDP_DROP;

	if (udp) {
		/* a datagram: ports and checksum only (udp.h udp_csum: a zero checksum stays 0) */
		p->udp->source = v->sport_be;
		p->udp->dest = v->dport_be;
		p->udp->check = udp_csum(p->udp->check, l4);
		if ((p->shape & PKT_IP_OPTIONS) && store_udp_header(ctx, p, p->l4_off))
			return XDP_DROP;
		goto send;
	}

	/*
	 * Timestamps (tsopt.h): on a pair that negotiated them, and on the
	 * handshake's SYN and SYN-ACK whatever the pair's flags. Read of v
	 * before send_ip's last check of its generation.
	 */
	if (tcp->doff > 5 && ((v->flags & XLB_F_TS) || (p->flags & TCP_FL_SYN)))
		l4 += ts_rewrite(ctx, p->l4_off, tcp->doff, v->ts_off, dir);
	tcp->source = v->sport_be;
	tcp->dest = v->dport_be;
	tcp->check = csum_apply(tcp->check, l4);
	if (!p->shape)
		return send_ip(ctx, p->eth, p->iph, p->tot_len, v, gen, nh, dir);

	if ((p->shape & PKT_IP_OPTIONS) && store_tcp_header(ctx, p, p->l4_off))
		return XDP_DROP;
send:
	act = send_ip(ctx, p->eth, p->iph, p->tot_len, v, gen, nh, dir);
	if (act != XDP_DROP) {
		if (p->shape & PKT_FRAGMENT)
			count(XLB_C_FRAGS_FORWARDED);
		if (p->shape & PKT_IP_OPTIONS)
			count(XLB_C_IP_OPTIONS_FORWARDED);
	}
	return act;
}

/*
 * Entry v's backend id (its SNAT port space, its close events) and member
 * id (its counter cells) in one value: ids_backend and ids_member take
 * them apart.
 */
static __always_inline __u32 pair_ids(const struct flow_value *v)
{
	return (__u32)v->backend_id | (__u32)v->member_id << 16;
}

static __always_inline __u16 ids_backend(__u32 ids)
{
	return (__u16)ids;
}

static __always_inline __u16 ids_member(__u32 ids)
{
	return (__u16)(ids >> 16);
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

/* The counterpart of entry v (key's direction dir) if it is v's pair's; else NULL. */
static __always_inline struct flow_value *pair_peer(struct flow_value *v, __u32 dir, struct flow_key *pk)
{
	struct flow_value *peer;

	flow_peer_key(pk, v, (__u8)dir);
	peer = bpf_map_lookup_elem(&xlb_flows, pk);
	if (peer && peer->generation == v->generation)
		return peer;
	return 0;
}

/*
 * Record a FIN or an accepted RST on the pair's forward entry (seed
 * "Orderly close and reset"); key is the packet's flow key, v its entry,
 * peer its counterpart (pk its key; NULL when missing). The atomic OR's old
 * value decides, exactly once per pair, which packet made the pair
 * terminal: the second FIN (initiator: the side whose FIN came first) or
 * the first RST (initiator: its sender). That packet stamps the forward
 * entry's last_seen, marks the pair XLB_F_CLOSED_FIN or XLB_F_CLOSED_RST,
 * counts the closure globally and for the backend, and posts the close
 * event. When the backend is left without TIME_WAIT -- a RST ended the
 * pair, or the client's FIN came first and this second FIN, the backend's,
 * acknowledges it (the backend closed from CLOSE-WAIT; one that does not
 * is a simultaneous close, after which the backend holds TIME_WAIT too:
 * track.h fin_acks_client_fin) -- it also frees the SNAT port (snat.h;
 * a port held for a backend's TIME_WAIT on a pair that negotiated
 * timestamps is hinted for reuse by the reaper, on the close event: the
 * data path's stack and verifier budget here has no room for it). A
 * missing counterpart is an invariant violation; the packet is forwarded
 * regardless by the caller. gen: the pair's generation, as the packet's
 * lookup read it; nothing is written through an entry of another (flow.h:
 * stale pointers).
 */
static __always_inline void note_close(struct xlb_config *cfg, struct pkt *p, const struct flow_key *key,
				       struct flow_value *v, struct flow_value *peer, const struct flow_key *pk, __u32 dir,
				       __u32 gen)
{
	struct flow_value *fwd, *rev;
	__u32 bit, closes, at, ids;
	int rst = (p->flags & TCP_FL_RST) != 0;
	long old;

	if (!peer) {
		count(XLB_C_INVARIANT);
		if (dir == XLB_DIR_BACKEND)
			return; /* no forward entry to hold the state */
	}
	fwd = dir == XLB_DIR_CLIENT ? v : peer;
	rev = dir == XLB_DIR_CLIENT ? peer : v;
	if (!fwd)
		return;

	if (rst)
		bit = dir == XLB_DIR_CLIENT ? XLB_F_RST_CLIENT : XLB_F_RST_BACKEND;
	else
		bit = dir == XLB_DIR_CLIENT ? XLB_F_FIN_CLIENT : XLB_F_FIN_BACKEND;

	/* one value for both ids (the packet path's stack has no room for two) */
	ids = pair_ids(fwd);
	old = flow_set(fwd, gen, bit);
	if (old == FLOW_GONE || (old & bit))
		return; /* another pair's entry now, or a retransmission */
	closes = XLB_F_FIN_CLIENT | XLB_F_FIN_BACKEND | XLB_F_RST_CLIENT | XLB_F_RST_BACKEND;
	if (!(old & closes) && dir == XLB_DIR_BACKEND)
		flow_set(fwd, gen, XLB_F_INIT_BACKEND);
	if (bits_terminal(old) || !bits_terminal(old | bit))
		return; /* already ended by another packet, or a half-close */

	/* this packet ended the pair */
	at = now32();
	if (!flow_is(fwd, gen))
		return;
	fwd->last_seen = at;
	if (flow_set(fwd, gen, rst ? XLB_F_CLOSED_RST : XLB_F_CLOSED_FIN) == FLOW_GONE)
		return;
	if (rst) {
		count(dir == XLB_DIR_CLIENT ? XLB_C_CLOSED_CLIENT_RST : XLB_C_CLOSED_BACKEND_RST);
		count_pair_event(ids_member(ids), dir == XLB_DIR_CLIENT ? XLB_PAIR_CLOSED_RST : XLB_PAIR_CLOSED_RST_BACKEND);
	} else {
		/* second FIN: the other side initiated */
		count(dir == XLB_DIR_CLIENT ? XLB_C_CLOSED_BACKEND_FIN : XLB_C_CLOSED_CLIENT_FIN);
		count_pair_event(ids_member(ids), dir == XLB_DIR_CLIENT ? XLB_PAIR_CLOSED_FIN_BACKEND : XLB_PAIR_CLOSED_FIN);
	}
	if (rev && (rst || (dir == XLB_DIR_BACKEND && fin_acks_client_fin(p, fwd))) &&
	    flow_set(rev, gen, XLB_F_PORT_FREED) != FLOW_GONE)
		snat_release(cfg, ids_backend(ids), dir == XLB_DIR_CLIENT ? pk : key);
	if (dir == XLB_DIR_CLIENT)
		post_event(key, gen, ids_backend(ids), rst ? XLB_CLOSE_RST : XLB_CLOSE_FIN, at);
	else
		post_event(pk, gen, ids_backend(ids), rst ? XLB_CLOSE_RST : XLB_CLOSE_FIN, at);
}

/*
 * The backend's first SYN-ACK of pair gen (forward entry fwd, reverse
 * entry rev, backend id bid) answered a SYN with timestamps; has_ts: it
 * carried them too. Negotiated (RFC 7323 §3.2): both entries get
 * XLB_F_TS, and the pair's segments have their timestamps rewritten from
 * here on (tsopt.h). Either way the backend's cell in xlb_backend_ts
 * says what its SYN-ACKs do now.
 */
static __noinline void synack_timestamps(struct flow_value *fwd, struct flow_value *rev, __u32 gen, __u32 bid,
					 __u32 has_ts)
{
	__u32 *cell;

	if (!fwd || !rev)
		return;
	if (has_ts && flow_set(fwd, gen, XLB_F_TS) != FLOW_GONE)
		flow_set(rev, gen, XLB_F_TS);
	cell = bpf_map_lookup_elem(&xlb_backend_ts, &bid);
	if (cell && *cell != (has_ts ? XLB_BTS_YES : XLB_BTS_NO))
		*cell = has_ts ? XLB_BTS_YES : XLB_BTS_NO;
}

/*
 * The handshake, as the packet on entry v (direction dir) moves it on
 * (DESIGN §6b "embryonic"): the backend's first SYN-ACK marks the forward
 * entry XLB_F_SYNACK, settles both sides' window scales (RFC 7323 §2.2:
 * scaling holds only when both SYNs carried the option) and, the one
 * packet whose atomic OR set the flag, counts the handshake's latency
 * (handshake.h); the client's first ACK after it makes the pair
 * established on both entries and starts their idle clocks. peer: v's
 * counterpart, or NULL; gen: the pair's generation (note_close).
 */
static __always_inline void track_handshake(struct xdp_md *ctx, struct pkt *p, struct flow_value *v,
					    struct flow_value *peer, __u32 dir, __u32 gen)
{
	__u32 now, syn_us, opts, ids;
	__u8 ws;
	long old;

	if (!peer)
		return;
	if (dir == XLB_DIR_BACKEND) {
		if ((p->flags & (TCP_FL_SYN | TCP_FL_ACK)) != (TCP_FL_SYN | TCP_FL_ACK) || (peer->flags & XLB_F_SYNACK))
			return;
		opts = tcp_options(ctx, p->l4_off, p->tcp->doff);
		ws = opts_wscale(opts);
		ids = pair_ids(v);
		syn_us = peer->syn_us;
		if (!flow_is(v, gen) || !flow_is(peer, gen))
			return;
		if (ws == XLB_WSCALE_NONE || peer->wscale == XLB_WSCALE_NONE) {
			v->wscale = XLB_WSCALE_NONE;
			peer->wscale = XLB_WSCALE_NONE;
		} else {
			v->wscale = ws;
		}
		old = flow_set(peer, gen, XLB_F_SYNACK);
		if (old == FLOW_GONE || (old & XLB_F_SYNACK))
			return;
		observe_handshake(ids_member(ids), syn_us);
		if (old & XLB_F_TS_SYN)
			synack_timestamps(peer, v, gen, ids_backend(ids), opts_ts(opts) != 0);
		return;
	}
	if (!(v->flags & XLB_F_SYNACK) || (p->flags & (TCP_FL_SYN | TCP_FL_ACK | TCP_FL_RST)) != TCP_FL_ACK)
		return;
	now = now32();
	if (!flow_is(v, gen) || !flow_is(peer, gen))
		return;
	v->last_seen = now;
	peer->last_seen = now;
	v->syn_us = 0; /* timed at the SYN-ACK: from here on the client's segment end (track.h track_send) */
	flow_set(peer, gen, XLB_F_ESTABLISHED);
	flow_set(v, gen, XLB_F_ESTABLISHED);
}

enum create_result {
	CREATE_OK,
	CREATE_RACE,      /* another CPU created the same pair */
	CREATE_EXHAUSTED, /* no free SNAT port toward any backend tried */
	CREATE_FULL,      /* flow table full */
	CREATE_NO_BACKEND, /* no routable backend (or the one tried has no port for a mapping without one) */
	CREATE_FIB_MISS,  /* no next hop toward the backend (or no next-hop slot) */
	CREATE_OVER_CAP,  /* a UDP service's udp_unreplied_max reached (udp.h udp_admit) */
};

/*
 * The scratch's reverse entry took a port held for the backend's TIME_WAIT
 * (snat_take_port, TSREUSE_TAKE), and its SYN goes no further (no next
 * hop, or its forward entry could not be inserted): the hold goes back,
 * or a SYN without timestamps could take the port while the backend still
 * has the old 4-tuple. The entry becomes a XLB_F_HOLD entry from now on
 * (a later start than the old hold's: the port is held longer, never
 * shorter), announced with a XLB_CLOSE_HOLD event for the maintenance
 * loop's removal, its hint set again. Returns 0 when the entry is a hold;
 * else the caller removes it and frees the port as for any other. A
 * global function: try_backend's own frame stays small (the SYN's call
 * chain through snat_alloc is at the verifier's stack limit).
 */
__noinline int snat_rehold(void)
{
	struct create_scratch *s;
	struct xlb_config *cfg;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!s || !cfg)
		return -1;
	s->rev.flags = XLB_F_TS | XLB_F_HOLD;
	if (bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_EXIST))
		return -1;
	tsreuse_mark(cfg, s->fwd.backend_id, &s->rkey);
	post_event(&s->rkey, s->rev.generation, s->fwd.backend_id, XLB_CLOSE_HOLD, s->rev.last_seen);
	return 0;
}

/*
 * Install the pair toward the backend that the scratch's fwd names (daddr_be,
 * dport_be, backend_id set; s->rev complete but for the backend id and
 * checksums): a SNAT port (the reverse entry, snat_alloc), the next hop
 * from that SNAT address, then the forward entry. On failure nothing this
 * attempt inserted stays (a terminal pair whose port it took over stays
 * removed).
 * A backend port of 0 (a mapping without a remote port, a backend without
 * one: SetRoutable never publishes that) is CREATE_NO_BACKEND.
 *
 * A global function: the verifier checks it once, on its own, instead of
 * once per backend create_pair tries (without CAP_PERFMON, every one of
 * those walks through the allocator's loops would count against the
 * verifier's branch limit).
 */
__noinline int try_backend(struct xdp_md *ctx, struct flow_key *fk)
{
	struct create_scratch *s;
	struct xlb_config *cfg;
	__u32 id = 0, zero = 0;
	__u64 bit, *w;
	long err;
	int rc;

	/* map values, not arguments: the verifier allows indexing into those only */
	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!s || !cfg || !fk)
		return CREATE_FULL;
	if (!s->fwd.dport_be)
		return CREATE_NO_BACKEND; /* no port to send to (never published: SetRoutable) */
	s->rev.backend_id = s->fwd.backend_id;
	s->rev.member_id = s->fwd.member_id;
	s->rev.service_id = s->fwd.service_id;

	__builtin_memset(&s->rkey, 0, sizeof(s->rkey));
	s->rkey.saddr_be = s->fwd.daddr_be;
	s->rkey.sport_be = s->fwd.dport_be;
	s->rkey.proto = s->proto;
	s->rkey.dir = XLB_DIR_BACKEND;
	s->took_hold = 0;
	err = snat_alloc(s);
	if (err == -ENOSPC)
		return CREATE_EXHAUSTED;
	if (err)
		return CREATE_FULL;

	/*
	 * The next hop from the SNAT address the pair got: with several,
	 * their routes toward the backend may differ (source routing, or
	 * addresses on different interfaces).
	 */
	rc = CREATE_FIB_MISS;
	if (!memo_next_hop(ctx, s->rkey.daddr_be, s->fwd.daddr_be, memo_backend(s->fwd.backend_id), &id)) {
		s->fwd.nexthop = id;
		s->fwd.saddr_be = s->rkey.daddr_be;
		s->fwd.sport_be = s->rkey.dport_be;
		recipe_csum(&s->fwd, fk);
		err = bpf_map_update_elem(&xlb_flows, fk, &s->fwd, BPF_NOEXIST);
		if (!err)
			return CREATE_OK;
		rc = err == -EEXIST ? CREATE_RACE : CREATE_FULL;
	}
	if (s->took_hold && !snat_rehold())
		return rc;
	bpf_map_delete_elem(&xlb_flows, &s->rkey);
	w = snat_word(cfg, s->fwd.backend_id, s->rkey.proto, s->rkey.daddr_be, s->rkey.dport_be, &bit);
	if (w)
		__sync_fetch_and_and(w, ~bit);
	return rc;
}

/*
 * What the backend tries of one SYN carry through their bpf_loop steps.
 * Every step writes every result field: a field written on one path only
 * makes clang pick the field's offset by branch, which the verifier
 * refuses without CAP_PERFMON.
 */
struct pick {
	struct xdp_md *ctx;
	struct flow_key *fk;
	struct create_scratch *s;
	struct backend_set *set;
	__u32 count;      /* routable backends */
	__u32 exhausted;  /* a backend tried had no free SNAT port */
	int rc;           /* the last try's result */
	int fallback;     /* the last try was not the first: with CREATE_OK, a later backend took the pair */
};

/*
 * Try the n-th backend from the scheduled start (the scratch's start: in
 * set order from there). Stops at a result other than "no free port" or
 * "no next hop".
 */
static long pick_step(__u64 n, void *arg)
{
	struct pick *pk = arg;
	struct create_scratch *s = pk->s;
	struct backend_ref br;
	__u32 idx;
	__be16 port;
	int rc;

	if (n >= pk->count)
		return 1;
	idx = (s->start + (__u32)n) % pk->count;
	/* hide idx's range from clang so the verifier sees the bound check */
	asm volatile("" : "+r"(idx));
	if (idx >= XLB_MAX_BACKENDS)
		return 1;
	br = pk->set->entries[idx];
	if (br.id >= XLB_MAX_BACKENDS)
		return 1;
	/* the mapping's remote port, else the backend's own */
	port = s->tmpl.dport_be ? s->tmpl.dport_be : br.port_be;
	s->fwd = s->tmpl;
	s->fwd.daddr_be = br.ip_be;
	s->fwd.dport_be = port;
	s->fwd.backend_id = br.id;
	s->fwd.member_id = br.member;
	s->fwd.service_id = (__u16)s->service;
	rc = try_backend(pk->ctx, pk->fk);
	/* stores at fixed offsets, whatever the result (see struct pick) */
	pk->rc = rc;
	pk->exhausted |= rc == CREATE_EXHAUSTED;
	pk->fallback = n > 0;
	return rc != CREATE_EXHAUSTED && rc != CREATE_FIB_MISS;
}

/*
 * Pick the backend for a new pair and install it (DESIGN §6b): the
 * one its scheduler chose (the scratch's start, sched.h) of the service's
 * live routable set (the scratch's set_slot), or when its SNAT ports are all taken
 * or its next hop is unknown, the next routable ones, XLB_PICK_TRIES
 * backends at most. The scratch's tmpl holds the forward entry's fields
 * shared by every try. A global function, checked once by the verifier.
 */
__noinline int pick_backend(struct xdp_md *ctx, struct flow_key *fk)
{
	struct pick pk;
	__u32 zero = 0;

	__builtin_memset(&pk, 0, sizeof(pk));
	pk.s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	if (!pk.s || !fk)
		return CREATE_FULL;
	pk.set = bpf_map_lookup_elem(&xlb_backend_sets, &pk.s->set_slot);
	if (!pk.set)
		return CREATE_NO_BACKEND;
	pk.count = pk.set->count;
	if (pk.count == 0 || pk.count > XLB_MAX_BACKENDS)
		return CREATE_NO_BACKEND;
	pk.ctx = ctx;
	pk.fk = fk;
	pk.rc = CREATE_NO_BACKEND;
	bpf_loop(XLB_PICK_TRIES, pick_step, &pk, 0);
	if (pk.rc == CREATE_OK && pk.fallback)
		count(XLB_C_SNAT_FALLBACKS);
	if (pk.rc == CREATE_FIB_MISS && pk.exhausted)
		return CREATE_EXHAUSTED;
	return pk.rc;
}

/*
 * What the client's SYN (TCP header at frame offset l4_off, data offset
 * doff) tells the scratch's new pair: its window scale, and with the
 * timestamp option, XLB_F_TS_SYN and the pair's offset on both entries
 * (tsopt.h): ts_off = (now_ms + 1) - TSval, so that the SYN reaches the
 * backend with the TSval now_ms + 1, above every TSval an earlier pair
 * on the same tuple gave it. A global function: its locals stay off the
 * stack of the SYN's deepest call chain (pick_backend).
 */
__noinline int syn_options(struct xdp_md *ctx, __u32 l4_off, __u32 doff)
{
	struct create_scratch *s;
	__u32 zero = 0, opts, ts;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	if (!s)
		return 0;
	opts = tcp_options(ctx, l4_off, doff);
	s->tmpl.wscale = opts_wscale(opts);
	ts = opts_ts(opts);
	if (ts) {
		s->tmpl.flags |= XLB_F_TS_SYN;
		s->tmpl.ts_off = now_ms32() + 1 - ts_val(ctx, ts);
		s->rev.ts_off = s->tmpl.ts_off;
	}
	return 0;
}

/*
 * The service of a SYN (or a UDP datagram) to addr_be:port_be (network
 * order; the packet's destination; proto in port_be's bits 16..23) with
 * no live pair: xlb_listen's answer, its id, live
 * routable set and the mapping's remote port, go into the scratch for
 * create_pair. Returns 0, or -1 when no serving service has that address
 * and port (the SYN passes to the kernel untouched). A global function:
 * its key and locals stay off the frame of xlb_xdp, whose SYN call chain
 * is at the verifier's stack limit.
 */
__noinline int listen_find(__u32 addr_be, __u32 port_be)
{
	struct create_scratch *s;
	struct listen_value *lv;
	struct service *svc;
	struct listen_key lk;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	if (!s)
		return -1;
	lk.addr_be = addr_be;
	lk.port_be = (__be16)port_be;
	lk.proto = (__u8)(port_be >> 16);
	lk.pad = 0;
	lv = bpf_map_lookup_elem(&xlb_listen, &lk);
	if (!lv)
		return -1;
	s->service = lv->service;
	s->remote_port_be = lv->remote_port_be;
	svc = bpf_map_lookup_elem(&xlb_services, &s->service);
	if (!svc || svc->state != XLB_SVC_SERVING)
		return -1;
	s->set_slot = s->service * 2 + (svc->active_set & 1);
	s->sched = svc->scheduler;
	s->sched_flags = (__u8)svc->flags;
	s->proto = lk.proto;
	s->udp_max = lk.proto == IPPROTO_UDP ? svc->udp_unreplied_max : 0;
	return 0;
}

/*
 * Create a connection pair for the client SYN in p whose forward key is fk
 * (seed "New connections") to the service listen_find put in the
 * scratch: the way back to the client, then a backend of the service's
 * routable set (pick_backend) on the mapping's remote port (0: the
 * backend's own port). The forward entry keeps the SYN's time for the
 * handshake histogram. On CREATE_OK the frame has not been touched yet.
 */
static __always_inline int create_pair(struct xdp_md *ctx, struct pkt *p, struct flow_key *fk, int udp)
{
	struct create_scratch *s;
	struct backend_set *set;
	struct xlb_state *st;
	struct backend_stats *bs;
	__u32 zero = 0, now, id = 0;
	__u64 gen; /* 64-bit: see below */
	int rc;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	st = bpf_map_lookup_elem(&xlb_shared, &zero);
	if (!s || !st)
		return CREATE_FULL;
	set = bpf_map_lookup_elem(&xlb_backend_sets, &s->set_slot);
	if (!set)
		return CREATE_NO_BACKEND;
	if (set->count == 0)
		return CREATE_NO_BACKEND;

	/* reverse recipe: toward the client, from the service's address and local port */
	__builtin_memset(&s->rev, 0, sizeof(s->rev));
	if (memo_next_hop(ctx, fk->daddr_be, fk->saddr_be, memo_client(fk->saddr_be), &id) &&
	    sender_next_hop(ctx, p->eth, &id)) /* no route or neighbour: answer the SYN's L2 sender */
		return CREATE_FIB_MISS;
	s->rev.nexthop = id;
	s->rev.saddr_be = fk->daddr_be;
	s->rev.daddr_be = fk->saddr_be;
	s->rev.sport_be = fk->dport_be;
	s->rev.dport_be = fk->sport_be;
	s->rev.wscale = XLB_WSCALE_NONE;

	/*
	 * gen is 64-bit: clang spills it into a stack slot that held a
	 * pointer, and without CAP_PERFMON the verifier refuses a narrower
	 * store there.
	 */
	gen = __sync_fetch_and_add(&st->generation, 1) + 1;
	if ((__u32)gen == 0)
		gen = __sync_fetch_and_add(&st->generation, 1) + 1;
	now = now32();
	s->rev.generation = (__u32)gen;
	s->rev.last_seen = now;

	/* forward recipe: toward a backend, from a SNAT address */
	__builtin_memset(&s->tmpl, 0, sizeof(s->tmpl));
	s->tmpl.dport_be = s->remote_port_be;
	s->tmpl.generation = (__u32)gen;
	s->tmpl.last_seen = now;
	if (udp) {
		/* a UDP pair: no TCP state; admitted under its service's cap first */
		s->tmpl.flags = XLB_F_UDP;
		s->rev.flags = XLB_F_UDP;
		if (udp_admit())
			return CREATE_OVER_CAP;
	} else {
		s->tmpl.track_seq = bpf_ntohl(p->tcp->seq) + 1;
		syn_options(ctx, p->l4_off, p->tcp->doff);
		s->tmpl.syn_us = now_us32();
	}
	rc = CREATE_FULL;
	if (!sched_start(fk->saddr_be, fk->daddr_be, (__u32)bpf_ntohs(fk->sport_be) << 16 | bpf_ntohs(fk->dport_be)))
		rc = pick_backend(ctx, fk);
	if (rc != CREATE_OK) {
		if (udp)
			udp_unadmit(); /* CREATE_RACE too: the other CPU counted the pair */
		return rc;
	}

	if (udp) {
		/* UDP pairs opened: the member's backend slot (TCP's are its client slot) */
		count(XLB_C_UDP_PAIRS_CREATED);
		bs = backend_traffic(s->fwd.member_id, XLB_DIR_BACKEND);
	} else {
		count(XLB_C_PAIRS_CREATED);
		bs = client_stats(s->fwd.member_id);
	}
	if (bs)
		bs->opened++;
	post_event(fk, (__u32)gen, s->fwd.backend_id, XLB_CLOSE_OPEN, now);
	return CREATE_OK;
}

/*
 * seed: a new SYN meeting terminal state replaces that pair. The
 * counterpart goes only if it is still this pair's (a reverse key freed and
 * reused by another pair stays). When the backend closed first it holds
 * the 4-tuple in TIME_WAIT, so the reverse entry stays as a XLB_F_HOLD
 * entry keeping the SNAT port until the SNAT hold after the close (DESIGN
 * §6b; pkg/maintenance SNATHold), announced to the maintenance loop with a
 * XLB_CLOSE_HOLD event; otherwise it goes too, releasing a port not freed
 * yet. Whoever
 * deletes a forward entry accounts for its pair: here, the backend's
 * XLB_PAIR_REPLACED_* count (the gauges). gen: v's generation at the
 * SYN's lookup.
 */
static __noinline void replace_pair(struct xlb_config *cfg, const struct flow_key *key, struct flow_value *v, __u32 gen)
{
	struct flow_value *peer;
	struct flow_key pk;
	__u32 flags = v->flags, closed_at = v->last_seen, pflags;
	__u16 bid = v->backend_id, mid = v->member_id;

	peer = pair_peer(v, XLB_DIR_CLIENT, &pk);
	if (peer) {
		pflags = peer->flags;
		if ((flags & XLB_F_CLOSED_FIN) && !(pflags & XLB_F_PORT_FREED)) {
			closed_at = hold_since(closed_at, peer->last_seen);
			if (flow_is(peer, gen)) {
				peer->last_seen = closed_at;
				if (flow_set(peer, gen, XLB_F_HOLD) != FLOW_GONE)
					post_event(&pk, gen, bid, XLB_CLOSE_HOLD, closed_at);
			}
		} else if (pflags & XLB_F_PORT_FREED) {
			delete_freed_reverse(cfg, &pk, bid, gen);
		} else if (!bpf_map_delete_elem(&xlb_flows, &pk)) {
			snat_release(cfg, bid, &pk);
		}
	}
	if (bpf_map_delete_elem(&xlb_flows, key))
		return; /* the maintenance loop removed it first */
	count(XLB_C_PAIRS_REPLACED);
	count_pair_event(mid, flags & XLB_F_CLOSED_RST ? XLB_PAIR_REPLACED_RST : XLB_PAIR_REPLACED_FIN);
}

/*
 * A RST (on entry v, direction dir) ends its pair only when it is exact
 * for the receiver; one elsewhere in the receiver's window is forwarded
 * and counted, the pair kept (the endpoint answers it with a challenge
 * ACK); one outside is dropped and counted (RFC 5961 §3: a blind reset
 * must guess the exact sequence; track.h rst_verdict). Returns -1 to
 * forward the RST, or XDP_DROP.
 */
static __always_inline int check_rst(struct xlb_config *cfg, struct pkt *p, const struct flow_key *key,
				     struct flow_value *v, __u32 gen, __u32 dir)
{
	struct flow_value *peer, *fwd;
	struct flow_key pk;
	int verdict;

	peer = pair_peer(v, dir, &pk);
	fwd = dir == XLB_DIR_CLIENT ? v : peer;
	verdict = rst_verdict(p, v, peer, fwd, dir);
	if (verdict == RST_OUTSIDE) {
		count(XLB_C_RST_OUT_OF_WINDOW);
		return XDP_DROP;
	}
	if (verdict == RST_INEXACT) {
		count(XLB_C_RST_INEXACT);
		return -1;
	}
	note_close(cfg, p, key, v, peer, &pk, dir, gen);
	return -1;
}

/*
 * A later fragment of an IPv4 TCP datagram (no TCP header: frag.h). It
 * follows its first fragment when the data path forwarded that one in
 * the last XLB_FRAG_TTL_MS: the same pair's recipe, its IPv4 header and
 * MACs rewritten. A fragment to a listen address or a SNAT address of
 * no datagram remembered, or of a pair gone since, passes to the kernel
 * untouched and is counted (XLB_C_FRAGS_PASSED); the rest of the pair's
 * rules hold as for any packet (ours.h, TTL, hold entries). Returns the
 * XDP action. A global function, checked once by the verifier on its own.
 */
__noinline int follow_fragment(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct xlb_config *cfg;
	struct frag_ports *fp;
	struct flow_value *v;
	struct nexthop *nh;
	struct flow_key key;
	struct iphdr *iph;
	__u32 zero = 0, dir, gen;
	__u16 dport, tot_len;
	int act;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!cfg)
		return XDP_PASS;
	if (!listen_filtered(cfg, iph->daddr) && snat_index(cfg, iph->daddr) < 0)
		return XDP_PASS; /* not to an address of XLB's */
	fp = fragment_ports(iph);
	if (!fp) {
		count(XLB_C_FRAGS_PASSED);
		return XDP_PASS;
	}
	dport = bpf_ntohs(fp->dport_be);
	if (dport >= cfg->snat_port_lo && dport <= cfg->snat_port_hi && snat_index(cfg, iph->daddr) >= 0)
		dir = XLB_DIR_BACKEND;
	else if (listen_filtered(cfg, iph->daddr))
		dir = XLB_DIR_CLIENT;
	else {
		count(XLB_C_FRAGS_PASSED); /* the ports map nothing since a reload */
		return XDP_PASS;
	}
	if (!frame_is_ours(ctx, eth)) {
		count(XLB_C_NOT_OURS);
		return XDP_PASS;
	}

	__builtin_memset(&key, 0, sizeof(key));
	key.saddr_be = iph->saddr;
	key.daddr_be = iph->daddr;
	key.sport_be = fp->sport_be;
	key.dport_be = fp->dport_be;
	key.proto = IPPROTO_TCP;
	key.dir = dir;
	v = bpf_map_lookup_elem(&xlb_flows, &key);
	tot_len = bpf_ntohs(iph->tot_len);
	if (!v || sizeof(*eth) + (__u64)tot_len > bpf_xdp_get_buff_len(ctx)) {
		count(XLB_C_FRAGS_PASSED);
		return XDP_PASS;
	}
	gen = flow_gen(v);
	if (iph->ttl <= 1) {
		count(XLB_C_TTL_EXCEEDED);
		return XDP_DROP;
	}
	if (v->flags & XLB_F_HOLD) {
		count(XLB_C_HOLD_DROPS);
		return XDP_DROP;
	}
	nh = pair_next_hop(ctx, v, gen);
	if (!nh)
		return XDP_DROP;
	act = send_ip(ctx, eth, iph, tot_len, v, gen, nh, dir);
	if (act != XDP_DROP)
		count(XLB_C_FRAGS_FORWARDED);
	return act;
}

SEC("xdp")
int xlb_xdp(struct xdp_md *ctx)
{
	struct flow_value *v, *peer;
	struct create_scratch *s;
	struct xlb_config *cfg;
	struct flow_key key, pk;
	struct pkt p;
	__u32 zero = 0, dir, now, gen = 0;
	int rc, is_syn, udp;

	rc = parse(ctx, &p);
	udp = rc == PARSE_DATAGRAM;
	if (rc != PARSE_SEGMENT && !udp) {
		if (rc == PARSE_LATER_FRAGMENT)
			return finish(follow_fragment(ctx));
		if (rc == PARSE_UDP_FRAGMENT)
			return finish(udp_fragment(ctx));
		rc = icmp_nat(ctx);
		return finish(rc < 0 ? XDP_PASS : rc);
	}
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!cfg)
		return finish(XDP_PASS);

	/*
	 * A SNAT address's port range (a backend's packet), else a listen
	 * address (the prefilter: a client's). A listen address may be a
	 * SNAT address too, but then no local port of it is inside the range
	 * (pkg/dataplane Configure, as pkg/config refuses it).
	 */
	if (snat_recognised(cfg, p.iph->daddr, bpf_ntohs(p.tcp->dest)))
		dir = XLB_DIR_BACKEND;
	else if (listen_filtered(cfg, p.iph->daddr))
		dir = XLB_DIR_CLIENT;
	else
		return finish(XDP_PASS);
	if (!frame_is_ours(ctx, p.eth)) {
		/* another host's frame, flooded to this port: the kernel drops it */
		count(XLB_C_NOT_OURS);
		return finish(XDP_PASS);
	}

	__builtin_memset(&key, 0, sizeof(key));
	key.saddr_be = p.iph->saddr;
	key.daddr_be = p.iph->daddr;
	key.sport_be = p.tcp->source; /* a UDP header's ports sit at the same offsets */
	key.dport_be = p.tcp->dest;
	key.proto = udp ? IPPROTO_UDP : IPPROTO_TCP;
	key.dir = dir;

	v = bpf_map_lookup_elem(&xlb_flows, &key);
	if (v)
		gen = flow_gen(v); /* the pair the packet is for (flow.h: stale pointers) */
	/* is_syn: a new pair's first packet, a client's SYN or a client's datagram of no pair (UDP is never terminal) */
	if (udp)
		is_syn = dir == XLB_DIR_CLIENT && !v;
	else
		is_syn = dir == XLB_DIR_CLIENT &&
			 (p.flags & (TCP_FL_SYN | TCP_FL_ACK | TCP_FL_RST | TCP_FL_FIN)) == TCP_FL_SYN;
	/*
	 * A SYN of no live pair: to a serving service's address and port, or
	 * the kernel's. The terminal pair's entry is looked up again after
	 * the call, so that no pointer lives across it (the SYN's call chain
	 * has no stack to spare; gen is never 0 for an entry).
	 */
	if (is_syn && (!v || pair_terminal(v->flags))) {
		if (listen_find(key.daddr_be, key.dport_be | (__u32)key.proto << 16))
			return finish(XDP_PASS);
		v = gen ? bpf_map_lookup_elem(&xlb_flows, &key) : 0;
		gen = v ? flow_gen(v) : 0;
	}
	if ((p.shape & PKT_FRAGMENT) && (!v || (is_syn && pair_terminal(v->flags)))) {
		/* a fragment never creates (or replaces) a pair */
		count(XLB_C_FRAGS_PASSED);
		return finish(XDP_PASS);
	}
	if (!v && !is_syn)
		return finish(XDP_PASS);

	/* a balanced packet that would expire here: never forwarded, never a new pair */
	if (p.iph->ttl <= 1) {
		count(XLB_C_TTL_EXCEEDED);
		return finish(XDP_DROP);
	}
	if (v && (v->flags & XLB_F_HOLD)) {
		/* the backend's TIME_WAIT of a replaced pair: nobody on the client side wants it */
		count(XLB_C_HOLD_DROPS);
		return finish(XDP_DROP);
	}

	if (cfg->flags & XLB_CFG_SHUTDOWN) {
		if (udp) {
			/* a live UDP pair is forwarded; a new datagram passes (no RST exists) */
			if (is_syn)
				return finish(XDP_PASS);
		} else if (p.flags & TCP_FL_RST) {
			/* seed "XLB shutdown behavior": reactive RSTs; an incoming RST is never answered */
			if (!v)
				return finish(XDP_PASS);
			rc = check_rst(cfg, &p, &key, v, gen, dir);
			if (rc >= 0)
				return finish(rc);
			return finish(rewrite_and_send(ctx, &p, v, gen, dir, 0));
		} else {
			count(XLB_C_SHUTDOWN_RESETS);
			return finish(reply_rst(ctx, &p));
		}
	}

	if (p.shape & PKT_FRAGMENT)
		remember_fragment(&p); /* its later fragments follow it (follow_fragment) */

	if (is_syn) {
		if (v) {
			if (!pair_terminal(v->flags)) {
				count(XLB_C_SYN_REUSED);
				return finish(rewrite_and_send(ctx, &p, v, gen, dir, udp));
			}
			replace_pair(cfg, &key, v, gen);
		}
		rc = create_pair(ctx, &p, &key, udp);
		switch (rc) {
		case CREATE_OK:
			break;
		case CREATE_RACE:
			if (!udp)
				count(XLB_C_SYN_REUSED);
			break;
		case CREATE_FIB_MISS:
			count(XLB_C_FIB_MISS);
			return finish(XDP_DROP);
		case CREATE_OVER_CAP:
			return finish(XDP_PASS); /* counted by udp_admit */
		case CREATE_EXHAUSTED:
			count(XLB_C_SNAT_EXHAUSTED);
			break;
		case CREATE_NO_BACKEND:
			count(udp ? XLB_C_UDP_NO_BACKEND : XLB_C_NO_BACKEND);
			break;
		default:
			count(XLB_C_TABLE_FULL);
			break;
		}
		if (rc != CREATE_OK && rc != CREATE_RACE)
			/* a SYN is answered with a RST; a datagram passes (the kernel's port unreachable) */
			return finish(udp ? XDP_PASS : reply_rst(ctx, &p));
		if (rc == CREATE_OK) {
			/* the forward entry just inserted is the scratch's: no lookup */
			s = bpf_map_lookup_elem(&xlb_scratch, &zero);
			if (s)
				return finish(rewrite_and_send(ctx, &p, &s->fwd, s->fwd.generation, dir, udp));
		}
		v = bpf_map_lookup_elem(&xlb_flows, &key);
		if (!v)
			return finish(XDP_DROP);
		return finish(rewrite_and_send(ctx, &p, v, flow_gen(v), dir, udp));
	}

	now = now32();
	if ((__s32)(now - v->last_seen) >= XLB_LONE_CHECK_TICKS)
		check_counterpart(&key, v, dir, now);
	if (udp) {
		/* a datagram on a live pair: the backend's first one marks the pair replied (udp.h) */
		if (dir == XLB_DIR_BACKEND && !(v->flags & XLB_F_UDP_REPLIED))
			udp_note_reply(v, gen);
		return finish(rewrite_and_send(ctx, &p, v, gen, dir, 1));
	}
	if (p.flags & TCP_FL_RST) {
		rc = check_rst(cfg, &p, &key, v, gen, dir);
		if (rc >= 0)
			return finish(rc);
		return finish(rewrite_and_send(ctx, &p, v, gen, dir, 0));
	}
	if (!(v->flags & XLB_F_ESTABLISHED)) {
		peer = pair_peer(v, dir, &pk);
		track_handshake(ctx, &p, v, peer, dir, gen);
	}
	track_ack(&p, v, gen);
	track_send(&p, v, dir, gen);
	if (p.flags & TCP_FL_FIN) {
		peer = pair_peer(v, dir, &pk);
		note_close(cfg, &p, &key, v, peer, &pk, dir, gen);
	}
	return finish(rewrite_and_send(ctx, &p, v, gen, dir, 0));
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
const enum xlb_hs_bound *__xlb_hs_bound_btf __attribute__((unused));
const enum xlb_hs_cell *__xlb_hs_cell_btf __attribute__((unused));
const enum xlb_backend_ts_state *__xlb_backend_ts_state_btf __attribute__((unused));
const enum xlb_pin *__xlb_pin_btf __attribute__((unused));
const enum xlb_service_state *__xlb_service_state_btf __attribute__((unused));
const enum xlb_service_flags *__xlb_service_flags_btf __attribute__((unused));
const enum xlb_scheduler *__xlb_scheduler_btf __attribute__((unused));
const enum xlb_svc_counter *__xlb_svc_counter_btf __attribute__((unused));
const struct nexthop *__xlb_nexthop_btf __attribute__((unused));
const struct sched_head *__xlb_sched_head_btf __attribute__((unused));
const struct sched_chunk *__xlb_sched_chunk_btf __attribute__((unused));
