// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * floor_lb.c — the floor balancer: a stateless XDP full NAT for the lab's
 * balancer namespace, used only by benchmarks (pkg/dataplane/floor
 * LoadBalancer; issue 17 item 1). It is what XLB would cost per packet if
 * its state were free: XLB's parse (packet.h), the destination MAC check,
 * the TTL check and XLB's rewrite (rewrite_and_send in xlb.c: MACs as three
 * 2-byte moves, TTL decrement, addresses, ports, incremental checksums with
 * per-recipe deltas, csum.h), then XDP_TX out of the ingress interface. No
 * map lookup, no state, no counters.
 *
 * One client address, one virtual service (VIP:port), up to
 * FLOOR_LB_MAX_BACKENDS backends on the same segment (one-arm):
 *   - client:cport -> VIP:port, addressed to self_mac, becomes
 *     SNAT:cport -> backend:bport, MACs self_mac -> the backend's; the
 *     backend is backends[floor_lb_pick(cport)];
 *   - backend:bport -> SNAT:cport, addressed to self_mac, from the backend
 *     floor_lb_pick(cport) names, becomes VIP:port -> client:cport, MACs
 *     self_mac -> client_mac. The client port alone names the connection
 *     because the client address is the only one (SNAT keeps the port).
 * Everything else is XDP_PASS, untouched; a frame that would be balanced
 * with TTL <= 1 is dropped, as XLB drops it.
 *
 * The configuration is read-only data set by the loader before load
 * (frozen: the verifier knows every value). Each backend carries the
 * checksum deltas of both rewrites, computed by the loader exactly as
 * recipe_csum (flow.h) computes a flow entry's, so the packet path adds
 * the TTL word and applies them as XLB does.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "packet.h"
#include "csum.h"

char __license[] SEC("license") = "Dual BSD/GPL";

enum floor_lb_limits {
	FLOOR_LB_MAX_BACKENDS = 64, /* a power of two: the index mask below */
	FLOOR_LB_HASH_MUL = 0x9e3779b1, /* 2^32 / golden ratio (Fibonacci hashing) */
};

/*
 * One backend and the checksum deltas of its two rewrites (each folded as
 * struct flow_value's csum_ip/csum_l4, layout.h): fwd_* turn
 * client:cport -> VIP:port into SNAT:cport -> ip:port, rev_* turn
 * ip:port -> SNAT:cport into VIP:port -> client:cport. 20 bytes.
 */
struct floor_lb_backend {
	__be32 ip_be;
	__be16 port_be;
	__u8 mac[6];
	__u16 fwd_csum_ip;
	__u16 fwd_csum_l4;
	__u16 rev_csum_ip;
	__u16 rev_csum_l4;
};

/* The whole configuration: the service, the SNAT and client addresses, the MACs and the backends. */
struct floor_lb_config {
	__be32 vip_be;
	__be32 snat_be;
	__be32 client_be;
	__be16 port_be;
	__u8 self_mac[6];   /* the balancing interface's own: source of every frame sent */
	__u8 client_mac[6]; /* the next hop toward the client */
	__u16 pad;
	__u32 n_backends;   /* 1..FLOOR_LB_MAX_BACKENDS */
	struct floor_lb_backend backends[FLOOR_LB_MAX_BACKENDS];
};

volatile const struct floor_lb_config floor_lb_cfg;

/*
 * The backend index of a client port (host order): Fibonacci hashing, then
 * Lemire's multiply-shift reduction to 0..n-1 (no division). The loader
 * computes the same (BalancerBackendIndex) for tests and harnesses.
 */
static __always_inline __u32 floor_lb_pick(__u16 cport, __u32 n)
{
	__u32 h = (__u32)cport * (__u32)FLOOR_LB_HASH_MUL;

	return (__u32)(((__u64)h * n) >> 32) & (FLOOR_LB_MAX_BACKENDS - 1);
}

/* Whether the Ethernet destination is mac (three 2-byte words, as ours.h compares). */
static __always_inline int floor_lb_to(const struct ethhdr *eth, const volatile __u8 *mac)
{
	const __u16 *d = (const __u16 *)eth->h_dest;
	const volatile __u16 *a = (const volatile __u16 *)mac;

	return d[0] == a[0] && d[1] == a[1] && d[2] == a[2];
}

/* Write a MAC from the configuration as three 2-byte moves (copy_mac, packet.h). */
static __always_inline void floor_lb_mac(__u8 *dst, const volatile __u8 *src)
{
	const volatile __u16 *s = (const volatile __u16 *)src;
	__u16 a = s[0], b = s[1], c = s[2];

	((__u16 *)dst)[0] = a;
	((__u16 *)dst)[1] = b;
	((__u16 *)dst)[2] = c;
}

/*
 * Rewrite the frame to saddr:sport -> daddr:dport with the recipe's deltas,
 * as rewrite_and_send (xlb.c) does after its next-hop lookup.
 */
static __always_inline int floor_lb_send(struct pkt *p, const volatile __u8 *dmac, __be32 saddr, __be32 daddr,
					 __be16 sport, __be16 dport, __u16 csum_ip, __u16 csum_l4)
{
	struct iphdr *iph = p->iph;
	struct tcphdr *tcp = p->tcp;
	__u32 ipacc;
	__u16 oldw, neww;

	floor_lb_mac(p->eth->h_dest, dmac);
	floor_lb_mac(p->eth->h_source, floor_lb_cfg.self_mac);

	oldw = *(__u16 *)&iph->ttl;
	iph->ttl--;
	neww = *(__u16 *)&iph->ttl;
	ipacc = csum_replace16(csum_ip, oldw, neww);
	iph->saddr = saddr;
	iph->daddr = daddr;
	iph->check = csum_apply(iph->check, ipacc);

	tcp->source = sport;
	tcp->dest = dport;
	tcp->check = csum_apply(tcp->check, csum_l4);
	return XDP_TX;
}

SEC("xdp")
int floor_lb_xdp(struct xdp_md *ctx)
{
	const volatile struct floor_lb_backend *b;
	struct pkt p;
	__u32 n = floor_lb_cfg.n_backends;

	if (parse(ctx, &p) || p.shape)
		return XDP_PASS; /* not a segment, or a fragment or IPv4 options: XLB's slower paths */
	if (p.iph->daddr == floor_lb_cfg.vip_be && p.tcp->dest == floor_lb_cfg.port_be &&
	    p.iph->saddr == floor_lb_cfg.client_be) {
		/* client -> VIP:port */
		if (!floor_lb_to(p.eth, floor_lb_cfg.self_mac))
			return XDP_PASS;
		if (p.iph->ttl <= 1)
			return XDP_DROP;
		b = &floor_lb_cfg.backends[floor_lb_pick(bpf_ntohs(p.tcp->source), n)];
		return floor_lb_send(&p, b->mac, floor_lb_cfg.snat_be, b->ip_be, p.tcp->source, b->port_be,
				     b->fwd_csum_ip, b->fwd_csum_l4);
	}
	if (p.iph->daddr != floor_lb_cfg.snat_be)
		return XDP_PASS;
	/* backend -> SNAT:cport, from the backend cport was sent to */
	b = &floor_lb_cfg.backends[floor_lb_pick(bpf_ntohs(p.tcp->dest), n)];
	if (p.iph->saddr != b->ip_be || p.tcp->source != b->port_be || !floor_lb_to(p.eth, floor_lb_cfg.self_mac))
		return XDP_PASS;
	if (p.iph->ttl <= 1)
		return XDP_DROP;
	return floor_lb_send(&p, floor_lb_cfg.client_mac, floor_lb_cfg.vip_be, floor_lb_cfg.client_be,
			     floor_lb_cfg.port_be, p.tcp->dest, b->rev_csum_ip, b->rev_csum_l4);
}

/* Keep the limits enum in BTF so that bpf2go generates its Go constants. */
const enum floor_lb_limits *__floor_lb_limits_btf __attribute__((unused));
