/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * packet.h — the frame: Ethernet/IPv4/TCP (and UDP) parsing with every bound the
 * verifier wants checked, and the MAC copy every rewrite uses.
 */
#ifndef XLB_PACKET_H
#define XLB_PACKET_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define IP_DF 0x4000

#define TCP_FL_FIN 0x01
#define TCP_FL_SYN 0x02
#define TCP_FL_RST 0x04
#define TCP_FL_ACK 0x10

/* pkt.shape: what sets a segment apart from the plain fast path's. */
enum pkt_shape {
	PKT_FRAGMENT = 1 << 0, /* the first fragment of a datagram (MF set, offset 0): frag.h */
	PKT_IP_OPTIONS = 1 << 1, /* an IPv4 header with options: the TCP (UDP) header is read into pkt.hdr */
	PKT_UDP = 1 << 2,        /* a UDP datagram (layout 11): udp, not tcp, is the L4 header */
};

/* The frame offset of the TCP header behind an IPv4 header without options. */
#define PKT_L4_PLAIN (sizeof(struct ethhdr) + sizeof(struct iphdr))

/*
 * Parsed, bounds-checked headers of the current frame. Behind an IPv4
 * header with options the TCP header sits at an offset only known at run
 * time, which the verifier does not let a packet pointer take without
 * CAP_PERFMON: tcp then points at hdr, a copy read with
 * bpf_xdp_load_bytes, and rewrite_and_send (xlb.c) and reply_rst (rst.h)
 * store what they changed back with bpf_xdp_store_bytes.
 */
struct pkt {
	struct ethhdr *eth;
	struct iphdr *iph;
	union {
		struct tcphdr *tcp;  /* in the frame, or &hdr (PKT_IP_OPTIONS) */
		struct udphdr *udp;  /* PKT_UDP: in the frame, or &hdr; its ports sit where TCP's do */
	};
	__u16 tot_len;  /* IPv4 total length, host order */
	__u8 flags;     /* TCP flag byte (CWR..FIN); 0 for UDP */
	__u8 shape;     /* enum pkt_shape */
	__u32 l4_off;   /* frame offset of the TCP header */
	struct tcphdr hdr; /* the TCP header's copy, with PKT_IP_OPTIONS */
};

static __always_inline __u8 tcp_flag_byte(struct tcphdr *tcp)
{
	return ((__u8 *)tcp)[13];
}

/* What parse() found. */
enum parse_result {
	PARSE_OTHER = -1,       /* not for the TCP path: the host's, or an ICMP error (icmp.h) */
	PARSE_SEGMENT = 0,      /* a TCP segment, or a datagram's first fragment holding the TCP header */
	PARSE_LATER_FRAGMENT = 1, /* an IPv4 TCP fragment past the first (no TCP header): frag.h */
	PARSE_UDP_FRAGMENT = 2, /* any fragment of an IPv4 UDP datagram (p->eth and p->iph set): passed, udp.h */
	PARSE_DATAGRAM = 3,     /* an unfragmented UDP datagram (PKT_UDP): a result of its own, which the verifier
				 * follows exactly (it loses p->shape's bits on the stack) */
};

/*
 * The UDP part of parse (layout 11): an unfragmented IPv4 UDP datagram
 * whose 8-byte header is in the frame (behind IPv4 options: copied into
 * p->hdr) and whose whole datagram the frame holds, udp->len within the
 * IPv4 payload: PARSE_DATAGRAM, with PKT_UDP. Any fragment of a UDP
 * datagram is PARSE_UDP_FRAGMENT (p->eth, p->iph set): not tracked.
 */
static __always_inline int parse_udp(struct xdp_md *ctx, struct pkt *p, struct ethhdr *eth, struct iphdr *iph,
				     void *data_end)
{
	struct udphdr *udp;
	__u32 ihl = iph->ihl;
	__u16 tot_len, len;

	p->eth = eth;
	p->iph = iph;
	p->shape = PKT_UDP;
	p->flags = 0;
	/* written on every path: the verifier cannot tell from p->shape whether store_udp_header reads it */
	*(__u64 *)&p->hdr = 0;
	if (iph->frag_off & bpf_htons(IP_OFFSET | IP_MF))
		return PARSE_UDP_FRAGMENT;
	if (ihl == 5) {
		udp = (void *)(iph + 1);
		if ((void *)(udp + 1) > data_end)
			return PARSE_OTHER;
		p->l4_off = PKT_L4_PLAIN;
	} else {
		p->l4_off = sizeof(*eth) + ihl * 4;
		if (bpf_xdp_load_bytes(ctx, p->l4_off, &p->hdr, sizeof(struct udphdr)))
			return PARSE_OTHER;
		udp = (struct udphdr *)&p->hdr;
		p->shape |= PKT_IP_OPTIONS;
	}
	tot_len = bpf_ntohs(iph->tot_len);
	len = bpf_ntohs(udp->len);
	if (tot_len < ihl * 4 + sizeof(*udp) || len < sizeof(*udp) || len > tot_len - ihl * 4)
		return PARSE_OTHER;
	if (sizeof(*eth) + (__u64)tot_len > bpf_xdp_get_buff_len(ctx))
		return PARSE_OTHER;
	p->udp = udp;
	p->tot_len = tot_len;
	return PARSE_DATAGRAM;
}

/*
 * Parse Ethernet/IPv4/TCP. PARSE_SEGMENT when the frame is an IPv4 TCP
 * segment whose headers fit in the frame, or the first fragment of one
 * (MF set, offset 0) holding the whole TCP header, with or without IPv4
 * options; PARSE_LATER_FRAGMENT for an IPv4 TCP fragment at a non-zero
 * offset (p->eth and p->iph set); PARSE_OTHER for anything else.
 */
static __always_inline int parse(struct xdp_md *ctx, struct pkt *p)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct tcphdr *tcp;
	__u32 ihl;
	__u16 tot_len;

	if ((void *)(eth + 1) > data_end)
		return PARSE_OTHER;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return PARSE_OTHER;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end)
		return PARSE_OTHER;
	if (iph->version != 4 || iph->ihl < 5)
		return PARSE_OTHER;
	if (iph->protocol == IPPROTO_UDP)
		return parse_udp(ctx, p, eth, iph, data_end);
	if (iph->protocol != IPPROTO_TCP)
		return PARSE_OTHER;
	p->eth = eth;
	p->iph = iph;
	p->shape = 0;
	if (iph->frag_off & bpf_htons(IP_OFFSET))
		return PARSE_LATER_FRAGMENT;
	if (iph->frag_off & bpf_htons(IP_MF))
		p->shape = PKT_FRAGMENT;
	ihl = iph->ihl;
	if (ihl == 5) {
		tcp = (void *)(iph + 1);
		if ((void *)(tcp + 1) > data_end)
			return PARSE_OTHER;
		p->l4_off = PKT_L4_PLAIN;
	} else {
		/* options: a copy of the TCP header (struct pkt) */
		p->l4_off = sizeof(*eth) + ihl * 4;
		if (bpf_xdp_load_bytes(ctx, p->l4_off, &p->hdr, sizeof(p->hdr)))
			return PARSE_OTHER;
		tcp = &p->hdr;
		p->shape |= PKT_IP_OPTIONS;
	}
	if (tcp->doff < 5)
		return PARSE_OTHER;
	tot_len = bpf_ntohs(iph->tot_len);
	if (tot_len < ihl * 4 + tcp->doff * 4)
		return PARSE_OTHER;
	/*
	 * The frame must hold the whole datagram (fragment). Compared as
	 * lengths, not as pointers: without CAP_PERFMON the verifier refuses
	 * variable-offset arithmetic on packet pointers, and XLB loads with
	 * CAP_BPF alone. A program without xdp.frags sees single-buffer
	 * frames only, so the buffer length is data_end - data.
	 */
	if (sizeof(*eth) + (__u64)tot_len > bpf_xdp_get_buff_len(ctx))
		return PARSE_OTHER;
	p->tcp = tcp;
	p->tot_len = tot_len;
	p->flags = tcp_flag_byte(tcp);
	return PARSE_SEGMENT;
}

/*
 * Store the TCP header p->tcp points at (p's copy behind IPv4 options)
 * into the frame at offset off. Through a buffer of its own: the helper
 * takes no packet pointer, and the verifier cannot tell from p->shape
 * that p->tcp is the copy.
 */
static __always_inline long store_tcp_header(struct xdp_md *ctx, const struct pkt *p, __u32 off)
{
	const __u32 *src = (const __u32 *)p->tcp;
	__u32 w[sizeof(struct tcphdr) / 4];
	int i;

#pragma unroll
	for (i = 0; i < (int)(sizeof(w) / 4); i++)
		w[i] = src[i];
	return bpf_xdp_store_bytes(ctx, off, w, sizeof(w));
}

/*
 * Store p's copy of the UDP header (behind IPv4 options p->udp points at
 * it) into the frame at offset off. Read from the copy itself, not
 * through p->udp: the verifier cannot tell from p->shape that p->udp is
 * the copy, and a header in the frame is only 8 bytes long.
 */
static __always_inline long store_udp_header(struct xdp_md *ctx, const struct pkt *p, __u32 off)
{
	const __u32 *src = (const __u32 *)&p->hdr;
	__u32 w[sizeof(struct udphdr) / 4];

	w[0] = src[0];
	w[1] = src[1];
	return bpf_xdp_store_bytes(ctx, off, w, sizeof(w));
}

/*
 * Copy a MAC address as three 2-byte moves. Byte by byte, clang keeps
 * bytes in stack slots that held pointers, which the verifier refuses
 * without CAP_PERFMON. Every MAC field XLB copies (Ethernet header, flow
 * value, struct bpf_fib_lookup) starts at an even offset, and the verifier
 * requires aligned stack accesses.
 */
static __always_inline void copy_mac(__u8 *dst, const __u8 *src)
{
	__u16 a = ((const __u16 *)src)[0];
	__u16 b = ((const __u16 *)src)[1];
	__u16 c = ((const __u16 *)src)[2];

	((__u16 *)dst)[0] = a;
	((__u16 *)dst)[1] = b;
	((__u16 *)dst)[2] = c;
}

#endif
