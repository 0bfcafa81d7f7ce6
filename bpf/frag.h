/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * frag.h — IPv4 fragments of a pair. Only a datagram's first fragment
 * (MF set, offset 0) carries the TCP header, so only it can be matched to
 * a pair. When the data path forwards one, it remembers the datagram's
 * ports in xlb_frags, keyed by what every fragment of the datagram
 * carries (RFC 791: source, destination, protocol and identification);
 * a later fragment finds its ports there and goes the way of its first
 * fragment, its IPv4 header rewritten and nothing else (xlb.c
 * follow_fragment). The TCP checksum needs no more than the first
 * fragment's update: it covers the whole datagram, and only the pseudo
 * header's addresses and the ports change. Cilium's IPv4 fragment map
 * (bpf/lib/ipv4.h) tracks fragments the same way.
 *
 * An entry serves for XLB_FRAG_TTL_MS after its first fragment: a
 * datagram's fragments travel together, and an identification reused
 * later (it is 16 bits wide) must not follow an old entry. A later
 * fragment that arrives before its first one, or after the entry went,
 * passes to the kernel, whose reassembly then times it out; the sender
 * retransmits the segment.
 */
#ifndef XLB_FRAG_H
#define XLB_FRAG_H

#include <linux/bpf.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "packet.h"

/* The key of the datagram iph is a fragment of. */
static __always_inline void frag_key_of(struct frag_key *k, const struct iphdr *iph)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->saddr_be = iph->saddr;
	k->daddr_be = iph->daddr;
	k->id_be = iph->id;
	k->proto = iph->protocol;
}

/* Remember the ports of the datagram whose first fragment p is. */
static __always_inline void remember_fragment(struct pkt *p)
{
	struct frag_ports v;
	struct frag_key k;

	frag_key_of(&k, p->iph);
	__builtin_memset(&v, 0, sizeof(v));
	v.sport_be = p->tcp->source;
	v.dport_be = p->tcp->dest;
	v.at_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&xlb_frags, &k, &v, BPF_ANY);
}

/*
 * The ports of the datagram iph is a later fragment of, as its first
 * fragment carried them; NULL when no first fragment of it was forwarded
 * in the last XLB_FRAG_TTL_MS.
 */
static __always_inline struct frag_ports *fragment_ports(const struct iphdr *iph)
{
	struct frag_ports *v;
	struct frag_key k;

	frag_key_of(&k, iph);
	v = bpf_map_lookup_elem(&xlb_frags, &k);
	if (!v || bpf_ktime_get_ns() - v->at_ns > (__u64)XLB_FRAG_TTL_MS * 1000000)
		return 0;
	return v;
}

#endif
