/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ours.h — is the frame addressed to this host at all? On a shared L2
 * segment a switch or bridge floods unknown-unicast frames to every port
 * (MAC aging, a dead host's address still in a router's neighbour table),
 * so the interface also receives frames for other hosts' MACs. The kernel
 * drops those (PACKET_OTHERHOST), but XDP runs first: the data path must
 * not balance them, answer them with a RST, or make a second pair for
 * another host's connection. A frame XLB would balance (or whose ICMP
 * error it would translate) is handled only when its destination MAC is
 * the ingress interface's own; any other goes to the host stack
 * untouched (XDP_PASS), counted as XLB_C_NOT_OURS.
 *
 * The interface's address comes from xlb_if_macs, which userspace writes
 * before it attaches the program and again whenever the address changes
 * (pkg/hostnet's next-hop watcher), and, for every interface whose slot
 * no other holds, from the same address in xlb_if_mac_slots: an array
 * access instead of a second hash lookup per packet (the flow lookup is
 * the first), which cost more than every other step of an established
 * packet together (issue 17). An interface without an entry (its
 * address is not an Ethernet one) accepts every unicast frame: the check
 * can then only let through what it let through before, never blackhole
 * the interface. A group address (multicast, broadcast: the I/G bit) is
 * never ours: a TCP segment or ICMP error for the VIP is unicast.
 */
#ifndef XLB_OURS_H
#define XLB_OURS_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"

/*
 * Whether eth (bounds-checked by the caller) is addressed to the ingress
 * interface. Compared as three 2-byte words, like copy_mac (packet.h).
 */
static __always_inline int frame_is_ours(struct xdp_md *ctx, const struct ethhdr *eth)
{
	const __u16 *d = (const __u16 *)eth->h_dest;
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 slot = ifindex % XLB_MAX_INTERFACES;
	const struct if_mac_slot *s;
	const struct if_mac *m;
	const __u16 *a;

	if (eth->h_dest[0] & 1)
		return 0; /* a group address */
	/* ifindex, then the address: the order pkg/dataplane ifmacs.go writes a slot for */
	s = bpf_map_lookup_elem(&xlb_if_mac_slots, &slot);
	if (s && s->ifindex == ifindex) {
		a = (const __u16 *)s->addr;
		return d[0] == a[0] && d[1] == a[1] && d[2] == a[2];
	}
	m = bpf_map_lookup_elem(&xlb_if_macs, &ifindex);
	if (!m)
		return 1; /* no address known for the interface: as before */
	a = (const __u16 *)m->addr;
	return d[0] == a[0] && d[1] == a[1] && d[2] == a[2];
}

#endif
