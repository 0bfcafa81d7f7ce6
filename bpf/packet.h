/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * packet.h — the frame: Ethernet/IPv4/TCP parsing with every bound the
 * verifier wants checked, and the MAC copy every rewrite uses.
 */
#ifndef XLB_PACKET_H
#define XLB_PACKET_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define IP_DF 0x4000

#define TCP_FL_FIN 0x01
#define TCP_FL_SYN 0x02
#define TCP_FL_RST 0x04
#define TCP_FL_ACK 0x10

/* Parsed, bounds-checked headers of the current frame. */
struct pkt {
	struct ethhdr *eth;
	struct iphdr *iph;
	struct tcphdr *tcp;
	__u16 tot_len;  /* IPv4 total length, host order */
	__u8 flags;     /* TCP flag byte (CWR..FIN) */
};

static __always_inline __u8 tcp_flag_byte(struct tcphdr *tcp)
{
	return ((__u8 *)tcp)[13];
}

/*
 * Parse Ethernet/IPv4/TCP. Returns 0 when the frame is an unfragmented IPv4
 * TCP segment without IP options whose headers fit in the frame; anything
 * else is for the host stack.
 */
static __always_inline int parse(struct xdp_md *ctx, struct pkt *p)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct tcphdr *tcp;
	__u16 tot_len;

	if ((void *)(eth + 1) > data_end)
		return -1;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end)
		return -1;
	if (iph->version != 4 || iph->ihl != 5)
		return -1;
	if (iph->protocol != IPPROTO_TCP)
		return -1;
	if (iph->frag_off & bpf_htons(IP_MF | IP_OFFSET))
		return -1;
	tcp = (void *)(iph + 1);
	if ((void *)(tcp + 1) > data_end)
		return -1;
	if (tcp->doff < 5)
		return -1;
	tot_len = bpf_ntohs(iph->tot_len);
	if (tot_len < sizeof(*iph) + tcp->doff * 4)
		return -1;
	/*
	 * The frame must hold the whole datagram. Compared as lengths, not as
	 * pointers: without CAP_PERFMON the verifier refuses variable-offset
	 * arithmetic on packet pointers, and XLB loads with CAP_BPF alone. A
	 * program without xdp.frags sees single-buffer frames only, so the
	 * buffer length is data_end - data.
	 */
	if (sizeof(*eth) + (__u64)tot_len > bpf_xdp_get_buff_len(ctx))
		return -1;
	p->eth = eth;
	p->iph = iph;
	p->tcp = tcp;
	p->tot_len = tot_len;
	p->flags = tcp_flag_byte(tcp);
	return 0;
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
