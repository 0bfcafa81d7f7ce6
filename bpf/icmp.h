/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * icmp.h — ICMP errors through the NAT. A destination-unreachable
 * (fragmentation needed included: path MTU discovery, RFC 1191) or
 * time-exceeded message about a packet of a pair is translated for the
 * other side of the pair, as Linux NAT does for related ICMP
 * (nf_nat_icmp_reply_translation), and sent the way the pair's own
 * packets go:
 *   - the quoted packet becomes the one the other side sent: its addresses
 *     and ports, its IPv4 checksum and, when the quote reaches it, its TCP
 *     checksum;
 *   - the outer destination becomes that side's peer and the outer source
 *     XLB's address on that side (the service's listen address toward the client,
 *     the SNAT address toward the backend), as if XLB relayed it;
 *   - the ICMP checksum follows every changed quoted byte (RFC 1624), the
 *     outer IPv4 checksum the addresses and the TTL (decremented).
 * ICMP about no pair, other ICMP types, malformed messages, messages with
 * IPv4 options or quoting a header with options (about a pair's segment
 * that carried options: not translated, the sender's retransmission
 * timer copes without it) and messages
 * not addressed to the ingress interface's MAC (ours.h; counted as
 * XLB_C_NOT_OURS) pass to the host untouched. A message with TTL <= 1 is dropped and counted like any
 * balanced packet.
 */
#ifndef XLB_ICMP_H
#define XLB_ICMP_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "counters.h"
#include "csum.h"
#include "flow.h"
#include "listen.h"
#include "ours.h"
#include "snat.h"
#include "udp.h"

/* The quoted L4 bytes every ICMP error carries (RFC 792): TCP ports and sequence, or the whole UDP header. */
#define ICMP_QUOTED_L4 8
#define ICMP_DEST_UNREACH 3
#define ICMP_TIME_EXCEEDED 11

/* An ICMP header (RFC 792); <linux/icmp.h> would pull in the C library's headers. */
struct icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be32 rest; /* unused, or the next-hop MTU of a fragmentation-needed message */
};

/*
 * The frame as an ICMP error about a TCP segment: outer IPv4 without
 * options, ICMP header, quoted IPv4 header without options, the first 8
 * quoted TCP (or UDP) bytes. The quoted TCP checksum (bytes 16..17) may
 * follow; a quoted UDP header holds its checksum (bytes 6..7).
 */
struct icmp_frame {
	struct ethhdr *eth;
	struct iphdr *iph;
	struct icmphdr *icmp;
	struct iphdr *inner;
	__be16 *ports;      /* quoted source and destination ports */
};

static __always_inline int icmp_parse(struct xdp_md *ctx, struct icmp_frame *f)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph, *inner;
	struct icmphdr *icmp;
	__u8 *l4;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end || iph->version != 4 || iph->ihl != 5 || iph->protocol != IPPROTO_ICMP)
		return -1;
	if (iph->frag_off & bpf_htons(IP_MF | IP_OFFSET))
		return -1;
	icmp = (void *)(iph + 1);
	if ((void *)(icmp + 1) > data_end)
		return -1;
	if (icmp->type != ICMP_DEST_UNREACH && icmp->type != ICMP_TIME_EXCEEDED)
		return -1;
	inner = (void *)(icmp + 1);
	if ((void *)(inner + 1) > data_end || inner->version != 4 || inner->ihl != 5 ||
	    (inner->protocol != IPPROTO_TCP && inner->protocol != IPPROTO_UDP))
		return -1;
	if (inner->frag_off & bpf_htons(IP_OFFSET))
		return -1; /* not the first fragment: no TCP header quoted */
	l4 = (void *)(inner + 1);
	if ((void *)(l4 + ICMP_QUOTED_L4) > data_end)
		return -1;
	f->eth = eth;
	f->iph = iph;
	f->icmp = icmp;
	f->inner = inner;
	f->ports = (__be16 *)l4;
	return 0;
}

/*
 * Translate f with recipe v: the entry of the pair that the ICMP's own
 * direction matches (the reverse entry for an ICMP from the backend side,
 * the forward entry for one from the client side). Returns the XDP
 * action, or -1 to let the packet pass untouched.
 */
static __always_inline int icmp_rewrite(struct xdp_md *ctx, struct icmp_frame *f, struct flow_value *v)
{
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *iph = f->iph, *in = f->inner;
	__sum16 *l4_csum = (__sum16 *)((__u8 *)f->ports + 16);
	__sum16 *udp_check = (__sum16 *)((__u8 *)f->ports + 6); /* inside the 8 quoted bytes */
	int udp = in->protocol == IPPROTO_UDP;
	struct nexthop *nh;
	__be32 in_src = v->daddr_be, in_dst = v->saddr_be;
	__be16 in_sport = v->dport_be, in_dport = v->sport_be;
	__u32 ip_acc = 0, icmp_acc = 0, l4_acc = 0;
	__u16 old_inner_check, oldw, neww;
	__u32 nh_id = v->nexthop, oif;

	nh = bpf_map_lookup_elem(&xlb_nexthops, &nh_id);
	if (!nh || !nh->ifindex || (nh->ifindex & XLB_NEXTHOP_STALE))
		return -1; /* the pair's next hop is being looked up again: let the host have it */

	/* quoted packet: addresses, ports, checksums */
	old_inner_check = in->check;
	ip_acc = csum_replace32(ip_acc, in->saddr, in_src);
	ip_acc = csum_replace32(ip_acc, in->daddr, in_dst);
	l4_acc = csum_replace16(ip_acc, f->ports[0], in_sport);
	l4_acc = csum_replace16(l4_acc, f->ports[1], in_dport);
	icmp_acc = l4_acc; /* the ICMP checksum covers the quoted addresses and ports too */
	in->saddr = in_src;
	in->daddr = in_dst;
	in->check = csum_apply(in->check, ip_acc);
	icmp_acc = csum_replace16(icmp_acc, old_inner_check, in->check);
	f->ports[0] = in_sport;
	f->ports[1] = in_dport;
	if (udp) {
		/* the quoted UDP checksum: a zero one (none) stays 0 (udp.h udp_csum) */
		__u16 old_l4 = *udp_check;

		*udp_check = udp_csum(old_l4, l4_acc);
		icmp_acc = csum_replace16(icmp_acc, old_l4, *udp_check);
	} else if ((void *)(l4_csum + 1) <= data_end) {
		/* the quote reaches the TCP checksum */
		__u16 old_l4 = *l4_csum;

		*l4_csum = csum_apply(old_l4, l4_acc);
		icmp_acc = csum_replace16(icmp_acc, old_l4, *l4_csum);
	}
	f->icmp->checksum = csum_apply(f->icmp->checksum, icmp_acc);

	/* outer header: toward the quoted packet's sender, from XLB's address on that side */
	ip_acc = csum_replace32(0, iph->saddr, in_dst);
	ip_acc = csum_replace32(ip_acc, iph->daddr, in_src);
	oldw = *(__u16 *)&iph->ttl;
	iph->ttl--;
	neww = *(__u16 *)&iph->ttl;
	ip_acc = csum_replace16(ip_acc, oldw, neww);
	iph->saddr = in_dst;
	iph->daddr = in_src;
	iph->check = csum_apply(iph->check, ip_acc);

	copy_mac(f->eth->h_dest, nh->dmac);
	copy_mac(f->eth->h_source, nh->smac);
	oif = nh->ifindex & ~XLB_NEXTHOP_STALE; /* marked stale meanwhile: still the best guess */
	if (oif == ctx->ingress_ifindex)
		return XDP_TX;
	return bpf_redirect_map(&xlb_tx_ports, oif, XDP_DROP);
}

/*
 * An ICMP error about a pair, translated (XDP_TX or a redirect), dropped
 * (TTL <= 1), or -1: not ours, pass it. A global function, checked once by
 * the verifier on its own.
 */
__noinline int icmp_nat(struct xdp_md *ctx)
{
	struct icmp_frame f;
	struct xlb_config *cfg;
	struct flow_value *v;
	struct flow_key key;
	__u32 zero = 0, dir, port;
	int act;

	if (icmp_parse(ctx, &f))
		return -1;
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!cfg)
		return -1;
	/*
	 * The quoted packet is one XLB sent, from the address the ICMP is
	 * addressed to: toward the client from a service's listen address
	 * and port, or toward the backend from a SNAT address and port of
	 * the range (or of a retired SNAT space: snat.h snat_recognised) --
	 * told apart as xlb_xdp does: a SNAT address's port range first,
	 * then a listen address (the listen prefilter); a listen address
	 * that is also a SNAT address has no local port in the range. The entry of the ICMP's own
	 * direction has the quoted packet's key read backwards.
	 */
	port = bpf_ntohs(f.ports[0]);
	if (f.iph->daddr != f.inner->saddr)
		return -1;
	if (snat_recognised(cfg, f.inner->saddr, port))
		dir = XLB_DIR_BACKEND;
	else if (listen_filtered(cfg, f.inner->saddr))
		dir = XLB_DIR_CLIENT;
	else
		return -1;
	if (!frame_is_ours(ctx, f.eth)) {
		count(XLB_C_NOT_OURS);
		return -1;
	}
	__builtin_memset(&key, 0, sizeof(key));
	key.saddr_be = f.inner->daddr;
	key.daddr_be = f.inner->saddr;
	key.sport_be = f.ports[1];
	key.dport_be = f.ports[0];
	key.proto = f.inner->protocol; /* TCP or UDP: icmp_parse */
	key.dir = dir;
	v = bpf_map_lookup_elem(&xlb_flows, &key);
	if (!v || (v->flags & XLB_F_HOLD))
		return -1;
	if (f.iph->ttl <= 1) {
		count(XLB_C_TTL_EXCEEDED);
		return XDP_DROP;
	}
	act = icmp_rewrite(ctx, &f, v);
	if (act < 0)
		return -1;
	count(dir == XLB_DIR_CLIENT ? XLB_C_ICMP_TO_BACKEND : XLB_C_ICMP_TO_CLIENT);
	return act;
}

#endif
