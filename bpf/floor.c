// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * floor.c — the benchmark floor: the least work any stateful NAT must do per
 * packet. Parse Ethernet/IPv4/TCP, one hash lookup on the 5-tuple, rewrite
 * both addresses, both ports and both MACs from the looked-up value with
 * incremental checksums, XDP_TX. Used only by `make bench` to report the XLB
 * program's cost as a ratio measured in the same run.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "csum.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/*
 * A floor recipe: what a stateful NAT must keep per flow at the least --
 * the rewrite of struct flow_value with the MACs in the entry itself (XLB
 * keeps them in a next-hop slot). 32 bytes.
 */
struct floor_recipe {
	__be32 saddr_be;
	__be32 daddr_be;
	__be16 sport_be;
	__be16 dport_be;
	__u16 csum_ip;
	__u16 csum_l4;
	__u8 smac[6];
	__u8 dmac[6];
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct flow_key);
	__type(value, struct floor_recipe);
	__uint(max_entries, 1024);
} floor_flows SEC(".maps");

SEC("xdp")
int floor_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct floor_recipe *v;
	struct flow_key key;
	struct iphdr *iph;
	struct tcphdr *tcp;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end || iph->ihl != 5 || iph->protocol != IPPROTO_TCP)
		return XDP_PASS;
	tcp = (void *)(iph + 1);
	if ((void *)(tcp + 1) > data_end)
		return XDP_PASS;

	__builtin_memset(&key, 0, sizeof(key));
	key.saddr_be = iph->saddr;
	key.daddr_be = iph->daddr;
	key.sport_be = tcp->source;
	key.dport_be = tcp->dest;
	key.proto = IPPROTO_TCP;
	v = bpf_map_lookup_elem(&floor_flows, &key);
	if (!v)
		return XDP_PASS;

	__builtin_memcpy(eth->h_dest, v->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, v->smac, ETH_ALEN);
	iph->saddr = v->saddr_be;
	iph->daddr = v->daddr_be;
	iph->check = csum_apply(iph->check, v->csum_ip);
	tcp->source = v->sport_be;
	tcp->dest = v->dport_be;
	tcp->check = csum_apply(tcp->check, v->csum_l4);
	return XDP_TX;
}
