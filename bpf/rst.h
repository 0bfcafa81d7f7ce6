/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * rst.h — answering a segment with a RST in place (no backend, no SNAT
 * port, a full table, and every packet while the shutdown flag is set).
 */
#ifndef XLB_RST_H
#define XLB_RST_H

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "csum.h"
#include "packet.h"

/*
 * Turn the frame into a RST answering the received segment, sent back to its
 * sender (RFC 793 "Reset Generation"): seq = SEG.ACK when ACK was set, else 0;
 * ACK set with ack = SEG.SEQ + SEG.LEN (payload + SYN + FIN). TTL 64, payload
 * and options (TCP and IPv4) trimmed, checksums computed in full. Behind
 * IPv4 options the RST's TCP header is built in p's copy and stored where
 * the options began. For a datagram's first fragment, SEG.LEN is the
 * payload the fragment holds.
 */
static __noinline int reply_rst(struct xdp_md *ctx, struct pkt *p)
{
	struct ethhdr *eth = p->eth;
	struct iphdr *iph = p->iph;
	struct tcphdr *tcp = p->tcp;
	__u8 mac[8] __attribute__((aligned(8))); /* stack accesses must be aligned */
	__u32 seq, ack, len, acc, a;
	__be32 addr;
	__be16 port;
	__u16 *w;
	int i, frame, delta;

	len = p->tot_len - p->l4_off + sizeof(*eth) - tcp->doff * 4;
	if (p->flags & TCP_FL_SYN)
		len++;
	if (p->flags & TCP_FL_FIN)
		len++;
	ack = bpf_ntohl(tcp->seq) + len;
	seq = (p->flags & TCP_FL_ACK) ? bpf_ntohl(tcp->ack_seq) : 0;

	copy_mac(mac, eth->h_dest);
	copy_mac(eth->h_dest, eth->h_source);
	copy_mac(eth->h_source, mac);

	addr = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = addr;
	*(__u8 *)iph = 0x45; /* version 4, no options */
	iph->tos = 0;
	iph->tot_len = bpf_htons(sizeof(*iph) + sizeof(*tcp));
	iph->id = 0;
	iph->frag_off = bpf_htons(IP_DF);
	iph->ttl = 64;
	iph->check = 0;
	acc = 0;
	w = (__u16 *)iph;
#pragma unroll
	for (i = 0; i < (int)(sizeof(*iph) / 2); i++)
		acc += w[i];
	iph->check = ~csum_fold32(acc);

	port = tcp->source;
	tcp->source = tcp->dest;
	tcp->dest = port;
	tcp->seq = bpf_htonl(seq);
	tcp->ack_seq = bpf_htonl(ack);
	((__u8 *)tcp)[12] = 5 << 4; /* doff 5, reserved 0 */
	((__u8 *)tcp)[13] = TCP_FL_RST | TCP_FL_ACK;
	tcp->window = 0;
	tcp->urg_ptr = 0;
	tcp->check = 0;
	/* pseudo header: addresses, zero+protocol, TCP length */
	acc = 0;
	a = iph->saddr;
	acc += (__u16)a + (__u16)(a >> 16);
	a = iph->daddr;
	acc += (__u16)a + (__u16)(a >> 16);
	acc += bpf_htons(IPPROTO_TCP);
	acc += bpf_htons(sizeof(*tcp));
	w = (__u16 *)tcp;
#pragma unroll
	for (i = 0; i < (int)(sizeof(*tcp) / 2); i++)
		acc += w[i];
	tcp->check = ~csum_fold32(acc);
	if ((p->shape & PKT_IP_OPTIONS) && store_tcp_header(ctx, p, sizeof(*eth) + sizeof(*iph)))
		return XDP_DROP;

	frame = (int)bpf_xdp_get_buff_len(ctx);
	delta = (int)(sizeof(*eth) + sizeof(*iph) + sizeof(*tcp)) - frame;
	if (delta < 0 && bpf_xdp_adjust_tail(ctx, delta))
		return XDP_DROP;
	return XDP_TX;
}

#endif
