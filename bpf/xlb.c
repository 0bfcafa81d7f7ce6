// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xlb.c — the XLB XDP program: IPv4/TCP full-NAT load balancing, plus two
 * programs the daemon runs from userspace with BPF_PROG_TEST_RUN: the clock
 * (xlb_clock) and the reaper (xlb_reap), the maintenance loop's only way to
 * remove flow entries.
 *
 * Packet rules (docs/DESIGN.md §5; docs/connections-shutdown-upgrades.txt,
 * cited as "seed": "New connections", "Orderly close and reset", "XLB
 * shutdown behavior"):
 *   - client SYN (no ACK) to listen_ip:local_port without a live pair creates
 *     a connection pair: round-robin backend, SNAT port reserved by inserting
 *     the reverse entry with BPF_NOEXIST, forward entry with BPF_NOEXIST,
 *     rollback on failure;
 *   - packets matching a flow entry are rewritten (MACs, IPs, ports, TTL,
 *     checksums) and sent with XDP_TX or a devmap redirect;
 *   - FIN/RST update the pair's close state and are forwarded; the packet
 *     that ends a pair (second FIN, or first RST) marks it terminal, counts
 *     the closure and posts a close event for the maintenance loop; while the
 *     shutdown flag is set, every other packet of a pair and every new SYN
 *     is answered with a RST instead (an incoming RST is still forwarded);
 *   - everything else is XDP_PASS, untouched. The program never returns
 *     XDP_ABORTED.
 *
 * Documented drops (each counted): a SYN whose backend next hop is
 * unresolved (FIB miss; the client retransmits), a duplicate SYN that lost
 * the race to create the same pair on another CPU and found it gone again,
 * a redirect to an interface that left the devmap, and a RST reply whose
 * tail trim failed (not expected: the frame always holds the headers).
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

#ifndef AF_INET
#define AF_INET 2
#endif
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define IP_DF 0x4000

#define TCP_FL_FIN 0x01
#define TCP_FL_SYN 0x02
#define TCP_FL_RST 0x04
#define TCP_FL_ACK 0x10

char __license[] SEC("license") = "Dual BSD/GPL";

/* Flow table: max_entries is set by the loader to 2 * flow_table.max_connections. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
	__uint(max_entries, 2 * 262144);
} xlb_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xlb_config);
	__uint(max_entries, 1);
} xlb_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct backend_set);
	__uint(max_entries, 2);
} xlb_backend_sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xlb_state);
	__uint(max_entries, 1);
} xlb_shared SEC(".maps");

/* Rotating SNAT port cursor per backend id (DESIGN §5 "SNAT port choice"). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, XLB_MAX_BACKENDS);
} xlb_snat_cursors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct backend_stats);
	__uint(max_entries, XLB_BACKEND_STATS_SLOTS);
} xlb_backend_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_C_MAX);
} xlb_counters SEC(".maps");

/* Per-backend pair events (layout.h enum xlb_pair_event). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_MAX_BACKENDS * XLB_PAIR_EVENTS);
} xlb_pair_events SEC(".maps");

/* Pairs the reaper removed, per backend id and reason (layout.h enum xlb_reaped_reason). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XLB_MAX_BACKENDS * XLB_REAPED_REASONS);
} xlb_reaped SEC(".maps");

/*
 * Close events (layout.h struct close_event): the ring buffer, or where the
 * host refuses ring buffers, a per-CPU queue: XLB_CLOSE_QUEUE_SLOTS slots
 * per CPU written round-robin at the CPU's head count. The loader picks one
 * with close_ring_on; the verifier never visits the other branch.
 */
volatile const __u32 close_ring_on = 1;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, XLB_CLOSE_RING_BYTES);
} xlb_close_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct close_event);
	__uint(max_entries, XLB_CLOSE_QUEUE_SLOTS);
} xlb_close_queue SEC(".maps");

/* Per CPU: events ever written to that CPU's queue (the next slot is head % slots). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} xlb_close_head SEC(".maps");

/* Egress interfaces other than the ingress one, keyed by ifindex. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 64);
} xlb_tx_ports SEC(".maps");

/* Parsed, bounds-checked headers of the current frame. */
struct pkt {
	struct ethhdr *eth;
	struct iphdr *iph;
	struct tcphdr *tcp;
	__u16 tot_len;  /* IPv4 total length, host order */
	__u8 flags;     /* TCP flag byte (CWR..FIN) */
};

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&xlb_counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline int finish(int action)
{
	count((__u32)action);
	return action;
}

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

/*
 * The data path's clock: jiffies (bpf_jiffies64, inlined by the JIT; about
 * 25 ns cheaper per packet than bpf_ktime_get_coarse_ns on this kind of
 * machine). Userspace reads the same clock through xlb_clock and converts
 * with the kernel's HZ. Flow entries keep its low 32 bits.
 */
static __always_inline __u32 now32(void)
{
	return (__u32)bpf_jiffies64();
}

/*
 * The key of an entry's counterpart: its recipe read backwards. The
 * forward entry's recipe goes SNAT:port -> backend:remote_port, which is
 * the reverse key with source and destination swapped, and the other way
 * round.
 */
static __always_inline void flow_peer_key(struct flow_key *pk, const struct flow_value *v, __u8 dir)
{
	__builtin_memset(pk, 0, sizeof(*pk));
	pk->saddr_be = v->daddr_be;
	pk->daddr_be = v->saddr_be;
	pk->sport_be = v->dport_be;
	pk->dport_be = v->sport_be;
	pk->proto = IPPROTO_TCP;
	pk->dir = dir ^ 1;
}

/*
 * Folded checksum deltas for rewriting key's addresses and ports into the
 * recipe's (RFC 1624): ip covers the IPv4 header, l4 the TCP pseudo header
 * addresses plus both ports.
 */
static __always_inline void recipe_csum(struct flow_value *v, const struct flow_key *k)
{
	__u32 ip = 0, l4;

	ip = csum_replace32(ip, k->saddr_be, v->saddr_be);
	ip = csum_replace32(ip, k->daddr_be, v->daddr_be);
	l4 = ip;
	l4 = csum_replace16(l4, k->sport_be, v->sport_be);
	l4 = csum_replace16(l4, k->dport_be, v->dport_be);
	v->csum_ip = (__u16)csum_fold32(ip);
	v->csum_l4 = (__u16)csum_fold32(l4);
}

/* Rewrite the frame with entry v's recipe. Returns the XDP action. */
static __always_inline int rewrite_and_send(struct xdp_md *ctx, struct pkt *p, struct flow_value *v, __u32 dir)
{
	struct iphdr *iph = p->iph;
	struct tcphdr *tcp = p->tcp;
	struct backend_stats *bs;
	__u32 ipacc, bid;
	__u16 oldw, neww;
	int act;

	if (iph->ttl <= 1) {
		/* Let the stack answer with ICMP time exceeded. */
		count(XLB_C_TTL_EXCEEDED);
		return XDP_PASS;
	}

	copy_mac(p->eth->h_dest, v->dmac);
	copy_mac(p->eth->h_source, v->smac);

	oldw = *(__u16 *)&iph->ttl;
	iph->ttl--;
	neww = *(__u16 *)&iph->ttl;
	ipacc = csum_replace16(v->csum_ip, oldw, neww);
	iph->saddr = v->saddr_be;
	iph->daddr = v->daddr_be;
	iph->check = csum_apply(iph->check, ipacc);

	tcp->source = v->sport_be;
	tcp->dest = v->dport_be;
	tcp->check = csum_apply(tcp->check, v->csum_l4);

	/* a terminal forward entry keeps the time it became terminal */
	if (!(v->flags & XLB_F_CLOSED))
		v->last_seen = now32();

	bid = v->backend_id * 2 + dir;
	bs = bpf_map_lookup_elem(&xlb_backend_stats, &bid);
	if (bs) {
		bs->packets++;
		bs->bytes += p->tot_len;
	}

	if (v->ifindex == ctx->ingress_ifindex)
		return XDP_TX;
	act = bpf_redirect_map(&xlb_tx_ports, v->ifindex, XDP_DROP);
	return act;
}

/*
 * Turn the frame into a RST answering the received segment, sent back to its
 * sender (RFC 793 "Reset Generation"): seq = SEG.ACK when ACK was set, else 0;
 * ACK set with ack = SEG.SEQ + SEG.LEN (payload + SYN + FIN). TTL 64, payload
 * and options trimmed, checksums computed in full.
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

	len = p->tot_len - sizeof(*iph) - tcp->doff * 4;
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

	frame = (int)bpf_xdp_get_buff_len(ctx);
	delta = (int)(sizeof(*eth) + sizeof(*iph) + sizeof(*tcp)) - frame;
	if (delta < 0 && bpf_xdp_adjust_tail(ctx, delta))
		return XDP_DROP;
	return XDP_TX;
}

/* The FIN/RST bits alone say the pair is over: a RST, or both FINs. */
static __always_inline int bits_terminal(__u32 flags)
{
	if (flags & (XLB_F_RST_CLIENT | XLB_F_RST_BACKEND))
		return 1;
	return (flags & (XLB_F_FIN_CLIENT | XLB_F_FIN_BACKEND)) == (XLB_F_FIN_CLIENT | XLB_F_FIN_BACKEND);
}

/* A pair is terminal once the packet that ended it has marked it so. */
static __always_inline int pair_terminal(__u32 flags)
{
	return (flags & XLB_F_CLOSED) != 0;
}

static __always_inline struct backend_stats *client_stats(__u16 backend_id)
{
	__u32 slot = (__u32)backend_id * 2 + XLB_DIR_CLIENT;

	return bpf_map_lookup_elem(&xlb_backend_stats, &slot);
}

static __always_inline void count_pair_event(__u16 backend_id, __u32 ev)
{
	__u32 idx = (__u32)backend_id * XLB_PAIR_EVENTS + ev;
	__u64 *c = bpf_map_lookup_elem(&xlb_pair_events, &idx);

	if (c)
		*c += 1;
}

/*
 * Post an event about the entry under key (generation gen, backend bid). A
 * full ring buffer loses the event (counted); the maintenance walk finds
 * the pair later. The per-CPU queue overwrites its oldest slot; the loop
 * notices from the head count.
 */
static __always_inline void post_event(const struct flow_key *key, __u32 gen, __u16 bid, __u16 kind, __u32 at)
{
	struct close_event ev;
	__u32 zero = 0, slot;
	struct close_event *e;
	__u64 *head;

	__builtin_memset(&ev, 0, sizeof(ev));
	ev.key = *key;
	ev.generation = gen;
	ev.time = at;
	ev.kind = kind;
	ev.backend_id = bid;
	if (close_ring_on) {
		if (bpf_ringbuf_output(&xlb_close_ring, &ev, sizeof(ev), BPF_RB_NO_WAKEUP))
			count(XLB_C_CLOSE_EVENTS_LOST);
		return;
	}
	head = bpf_map_lookup_elem(&xlb_close_head, &zero);
	if (!head)
		return;
	slot = (__u32)(*head % XLB_CLOSE_QUEUE_SLOTS);
	e = bpf_map_lookup_elem(&xlb_close_queue, &slot);
	if (!e)
		return;
	*e = ev;
	*head += 1;
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

/*
 * Record a FIN or RST on the pair's forward entry (seed "Orderly close and
 * reset"); key is the packet's flow key, v its entry. The atomic OR's old
 * value decides, exactly once per pair, which packet made the pair terminal:
 * the second FIN (initiator: the side whose FIN came first) or the first RST
 * (initiator: its sender). That packet stamps the forward entry's last_seen,
 * marks the pair XLB_F_CLOSED_FIN or XLB_F_CLOSED_RST, counts the closure
 * globally and for the backend, and posts the close event. A missing or
 * foreign counterpart is an invariant violation; the packet is forwarded
 * regardless by the caller.
 */
static __always_inline void note_close(const struct flow_key *key, struct flow_value *v, __u32 dir, __u8 tflags)
{
	struct flow_value *fwd, *peer;
	struct flow_key pk;
	__u32 bit, old, closes, at;
	int rst = (tflags & TCP_FL_RST) != 0;

	flow_peer_key(&pk, v, (__u8)dir);
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	if (!peer || peer->generation != v->generation) {
		count(XLB_C_INVARIANT);
		if (dir == XLB_DIR_BACKEND)
			return; /* no forward entry to hold the state */
		peer = 0;
	}
	fwd = dir == XLB_DIR_CLIENT ? v : peer;
	if (!fwd)
		return;

	if (rst)
		bit = dir == XLB_DIR_CLIENT ? XLB_F_RST_CLIENT : XLB_F_RST_BACKEND;
	else
		bit = dir == XLB_DIR_CLIENT ? XLB_F_FIN_CLIENT : XLB_F_FIN_BACKEND;

	old = __sync_fetch_and_or(&fwd->flags, bit);
	if (old & bit)
		return; /* retransmission */
	closes = XLB_F_FIN_CLIENT | XLB_F_FIN_BACKEND | XLB_F_RST_CLIENT | XLB_F_RST_BACKEND;
	if (!(old & closes) && dir == XLB_DIR_BACKEND)
		__sync_fetch_and_or(&fwd->flags, XLB_F_INIT_BACKEND);
	if (bits_terminal(old) || !bits_terminal(old | bit))
		return; /* already ended by another packet, or a half-close */

	/* this packet ended the pair */
	at = now32();
	fwd->last_seen = at;
	if (rst) {
		__sync_fetch_and_or(&fwd->flags, XLB_F_CLOSED_RST);
		count(dir == XLB_DIR_CLIENT ? XLB_C_CLOSED_CLIENT_RST : XLB_C_CLOSED_BACKEND_RST);
		count_pair_event(fwd->backend_id, XLB_PAIR_CLOSED_RST);
	} else {
		__sync_fetch_and_or(&fwd->flags, XLB_F_CLOSED_FIN);
		/* second FIN: the other side initiated */
		count(dir == XLB_DIR_CLIENT ? XLB_C_CLOSED_BACKEND_FIN : XLB_C_CLOSED_CLIENT_FIN);
		count_pair_event(fwd->backend_id, XLB_PAIR_CLOSED_FIN);
	}
	if (dir == XLB_DIR_CLIENT)
		post_event(key, fwd->generation, fwd->backend_id, rst ? XLB_CLOSE_RST : XLB_CLOSE_FIN, at);
	else
		post_event(&pk, fwd->generation, fwd->backend_id, rst ? XLB_CLOSE_RST : XLB_CLOSE_FIN, at);
}

/*
 * Next hop toward dst from src, as the host's FIB would route a packet this
 * host sends (XLB originates the backend-facing side of a full-NAT pair): the
 * lookup enters from the loopback device, like a locally generated route
 * lookup, so policy rules and the longest prefix apply unchanged. The kernel
 * requires forwarding on the device named in the lookup; the daemon enables
 * net.ipv4.conf.lo.forwarding, which forwards nothing by itself. Returns 0 on
 * success; the egress interface must be ingress or in the redirect map.
 */
#define LOOPBACK_IFINDEX 1
static __always_inline int next_hop(struct xdp_md *ctx, __be32 src, __be32 dst, __u8 *smac, __u8 *dmac, __u32 *ifindex)
{
	struct bpf_fib_lookup fib = {};
	__u32 oif;
	int rc;

	fib.family = AF_INET;
	fib.l4_protocol = IPPROTO_TCP;
	fib.ipv4_src = src;
	fib.ipv4_dst = dst;
	fib.ifindex = LOOPBACK_IFINDEX;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;
	oif = fib.ifindex;
	if (oif != ctx->ingress_ifindex && !bpf_map_lookup_elem(&xlb_tx_ports, &oif))
		return -1;
	copy_mac(smac, fib.smac);
	copy_mac(dmac, fib.dmac);
	*ifindex = oif;
	return 0;
}

enum create_result {
	CREATE_OK,
	CREATE_RACE,      /* another CPU created the same pair */
	CREATE_EXHAUSTED, /* no free SNAT port within the bounded probes */
	CREATE_FULL,      /* flow table full */
	CREATE_NO_BACKEND,
	CREATE_FIB_MISS,
};

/* Scratch space for pair creation: two values do not fit the BPF stack comfortably. */
struct create_scratch {
	struct flow_value fwd;
	struct flow_value rev;
	struct flow_key rkey;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct create_scratch);
	__uint(max_entries, 1);
} xlb_scratch SEC(".maps");

/*
 * SNAT port probing (DESIGN §5 "SNAT port choice"): the next port of the
 * backend's rotating cursor is taken by inserting the pair's reverse entry
 * with BPF_NOEXIST; a port in use (EEXIST) moves on to the next one, at
 * most XLB_SNAT_MAX_TRIES times. The probes run under bpf_loop so the
 * verifier checks the body once: unrolled, the loop is too complex to
 * verify without CAP_PERFMON (Spectre v1 path exploration).
 */
struct snat_probe {
	struct create_scratch *s;
	__u32 *cursor;
	__u32 lo;   /* first port of the range, host order */
	__u32 n;    /* ports in the range, >= 1 */
	long err;   /* result of the last insert; -1 before the first */
};

static long snat_probe_one(__u64 i, void *arg)
{
	struct snat_probe *pr = arg;
	struct create_scratch *s = pr->s;
	__u32 port;

	if (pr->n == 0)
		return 1;
	port = pr->lo + (__sync_fetch_and_add(pr->cursor, 1) % pr->n);
	s->rkey.dport_be = bpf_htons((__u16)port);
	recipe_csum(&s->rev, &s->rkey);
	pr->err = bpf_map_update_elem(&xlb_flows, &s->rkey, &s->rev, BPF_NOEXIST);
	return pr->err == -17 /* EEXIST: next port */ ? 0 : 1;
}

/*
 * Create a connection pair for the client SYN in p whose forward key is fk
 * (seed "New connections"). On CREATE_OK the frame has not been touched yet;
 * *out receives a copy of the new forward recipe in the scratch area.
 */
static __always_inline int create_pair(struct xdp_md *ctx, struct pkt *p, struct xlb_config *cfg,
				       struct flow_key *fk, __be16 remote_port, struct flow_value **out)
{
	struct create_scratch *s;
	struct backend_set *set;
	struct backend_ref br;
	struct xlb_state *st;
	struct backend_stats *bs;
	struct snat_probe probe;
	__u32 zero = 0, slot, count_, idx, n, tries, *cursor, rr, now;
	__u64 gen;
	int err;

	s = bpf_map_lookup_elem(&xlb_scratch, &zero);
	st = bpf_map_lookup_elem(&xlb_shared, &zero);
	if (!s || !st)
		return CREATE_FULL;
	slot = cfg->active_set & 1;
	set = bpf_map_lookup_elem(&xlb_backend_sets, &slot);
	if (!set)
		return CREATE_NO_BACKEND;
	count_ = set->count;
	if (count_ == 0 || count_ > XLB_MAX_BACKENDS)
		return CREATE_NO_BACKEND;
	rr = (__u32)__sync_fetch_and_add(&st->rr, 1);
	idx = rr % count_;
	/* hide idx's range from clang so the verifier sees the bound check */
	asm volatile("" : "+r"(idx));
	if (idx >= XLB_MAX_BACKENDS)
		return CREATE_NO_BACKEND;
	br = set->entries[idx];
	if (br.id >= XLB_MAX_BACKENDS)
		return CREATE_NO_BACKEND;

	/* forward recipe: toward the backend, from the SNAT address */
	__builtin_memset(&s->fwd, 0, sizeof(s->fwd));
	if (next_hop(ctx, cfg->snat_ip_be, br.ip_be, s->fwd.smac, s->fwd.dmac, &s->fwd.ifindex))
		return CREATE_FIB_MISS;
	s->fwd.saddr_be = cfg->snat_ip_be;
	s->fwd.daddr_be = br.ip_be;
	s->fwd.dport_be = remote_port;

	/* reverse recipe: toward the client, from listen:local_port */
	__builtin_memset(&s->rev, 0, sizeof(s->rev));
	if (next_hop(ctx, cfg->listen_ip_be, fk->saddr_be, s->rev.smac, s->rev.dmac, &s->rev.ifindex)) {
		/* no usable route/neighbour: answer the L2 sender of the SYN */
		copy_mac(s->rev.smac, p->eth->h_dest);
		copy_mac(s->rev.dmac, p->eth->h_source);
		s->rev.ifindex = ctx->ingress_ifindex;
	}
	s->rev.saddr_be = cfg->listen_ip_be;
	s->rev.daddr_be = fk->saddr_be;
	s->rev.sport_be = fk->dport_be;
	s->rev.dport_be = fk->sport_be;

	gen = __sync_fetch_and_add(&st->generation, 1) + 1;
	if ((__u32)gen == 0)
		gen = __sync_fetch_and_add(&st->generation, 1) + 1;
	now = now32();
	s->fwd.backend_id = (__u16)br.id;
	s->rev.backend_id = (__u16)br.id;
	s->fwd.generation = (__u32)gen;
	s->rev.generation = (__u32)gen;
	s->fwd.last_seen = now;
	s->rev.last_seen = now;

	__builtin_memset(&s->rkey, 0, sizeof(s->rkey));
	s->rkey.saddr_be = br.ip_be;
	s->rkey.daddr_be = cfg->snat_ip_be;
	s->rkey.sport_be = remote_port;
	s->rkey.proto = IPPROTO_TCP;
	s->rkey.dir = XLB_DIR_BACKEND;

	if (cfg->snat_port_hi < cfg->snat_port_lo)
		return CREATE_EXHAUSTED;
	n = (__u32)cfg->snat_port_hi - cfg->snat_port_lo + 1;
	tries = n < XLB_SNAT_MAX_TRIES ? n : XLB_SNAT_MAX_TRIES;
	idx = br.id;
	cursor = bpf_map_lookup_elem(&xlb_snat_cursors, &idx);
	if (!cursor)
		return CREATE_EXHAUSTED;

	probe.s = s;
	probe.cursor = cursor;
	probe.lo = cfg->snat_port_lo;
	probe.n = n;
	probe.err = -1;
	bpf_loop(tries, snat_probe_one, &probe, 0);
	err = probe.err;
	if (err == -17 || err == -1)
		return CREATE_EXHAUSTED;
	if (err)
		return CREATE_FULL;

	s->fwd.sport_be = s->rkey.dport_be;
	recipe_csum(&s->fwd, fk);
	err = bpf_map_update_elem(&xlb_flows, fk, &s->fwd, BPF_NOEXIST);
	if (err) {
		bpf_map_delete_elem(&xlb_flows, &s->rkey);
		return err == -17 ? CREATE_RACE : CREATE_FULL;
	}

	count(XLB_C_PAIRS_CREATED);
	bs = client_stats((__u16)br.id);
	if (bs)
		bs->opened++;
	*out = &s->fwd;
	return CREATE_OK;
}

/*
 * seed: a new SYN meeting terminal state replaces that pair. The
 * counterpart goes only if it is still this pair's (a reverse key freed and
 * reused by another pair stays). Whoever deletes a forward entry accounts
 * for its pair: here, the backend's XLB_PAIR_REPLACED_* count (the gauges).
 */
static __always_inline void replace_pair(const struct flow_key *key, struct flow_value *v)
{
	struct flow_value *peer;
	struct flow_key pk;
	__u32 flags = v->flags;
	__u16 bid = v->backend_id;

	flow_peer_key(&pk, v, XLB_DIR_CLIENT);
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	if (peer && peer->generation == v->generation)
		bpf_map_delete_elem(&xlb_flows, &pk);
	if (bpf_map_delete_elem(&xlb_flows, key))
		return; /* the maintenance loop removed it first */
	count(XLB_C_PAIRS_REPLACED);
	count_pair_event(bid, flags & XLB_F_CLOSED_RST ? XLB_PAIR_REPLACED_RST : XLB_PAIR_REPLACED_FIN);
}

/*
 * Find the listen port mapping for dport; returns the remote port or 0.
 * Each mapping is read with one 32-bit load (local port in the low half on
 * this little-endian target) so the result is a value, not a pointer whose
 * offset depends on the matching iteration: without CAP_PERFMON the
 * verifier refuses such an offset.
 */
static __always_inline __be16 remote_port_for(struct xlb_config *cfg, __be16 dport)
{
	__u32 w;
	int i;

#pragma unroll
	for (i = 0; i < XLB_MAX_PORTS; i++) {
		if (i >= cfg->nports)
			break;
		w = *(__u32 *)&cfg->ports[i];
		if ((__be16)w == dport)
			return (__be16)(w >> 16);
	}
	return 0;
}

SEC("xdp")
int xlb_xdp(struct xdp_md *ctx)
{
	struct flow_value *v, *peer;
	struct xlb_config *cfg;
	struct flow_key key;
	struct pkt p;
	__be16 remote = 0;
	__u32 zero = 0, dir, now;
	__u16 dport;
	int rc, is_syn;

	if (parse(ctx, &p))
		return finish(XDP_PASS);
	cfg = bpf_map_lookup_elem(&xlb_cfg, &zero);
	if (!cfg)
		return finish(XDP_PASS);

	dport = bpf_ntohs(p.tcp->dest);
	if (p.iph->daddr == cfg->listen_ip_be && (remote = remote_port_for(cfg, p.tcp->dest)) != 0)
		dir = XLB_DIR_CLIENT;
	else if (p.iph->daddr == cfg->snat_ip_be && dport >= cfg->snat_port_lo && dport <= cfg->snat_port_hi)
		dir = XLB_DIR_BACKEND;
	else
		return finish(XDP_PASS);

	__builtin_memset(&key, 0, sizeof(key));
	key.saddr_be = p.iph->saddr;
	key.daddr_be = p.iph->daddr;
	key.sport_be = p.tcp->source;
	key.dport_be = p.tcp->dest;
	key.proto = IPPROTO_TCP;
	key.dir = dir;

	v = bpf_map_lookup_elem(&xlb_flows, &key);
	is_syn = dir == XLB_DIR_CLIENT && (p.flags & (TCP_FL_SYN | TCP_FL_ACK | TCP_FL_RST | TCP_FL_FIN)) == TCP_FL_SYN;

	if (cfg->flags & XLB_CFG_SHUTDOWN) {
		/* seed "XLB shutdown behavior": reactive RSTs; an incoming RST is never answered */
		if (p.flags & TCP_FL_RST) {
			if (!v)
				return finish(XDP_PASS);
			note_close(&key, v, dir, p.flags);
			return finish(rewrite_and_send(ctx, &p, v, dir));
		}
		if (!v && !is_syn)
			return finish(XDP_PASS);
		count(XLB_C_SHUTDOWN_RESETS);
		return finish(reply_rst(ctx, &p));
	}

	if (is_syn) {
		if (v) {
			if (!pair_terminal(v->flags)) {
				count(XLB_C_SYN_REUSED);
				return finish(rewrite_and_send(ctx, &p, v, dir));
			}
			replace_pair(&key, v);
		}
		rc = create_pair(ctx, &p, cfg, &key, remote, &v);
		switch (rc) {
		case CREATE_OK:
			break;
		case CREATE_RACE:
			v = bpf_map_lookup_elem(&xlb_flows, &key);
			if (!v)
				return finish(XDP_DROP);
			count(XLB_C_SYN_REUSED);
			break;
		case CREATE_FIB_MISS:
			count(XLB_C_FIB_MISS);
			return finish(XDP_DROP);
		case CREATE_EXHAUSTED:
			count(XLB_C_SNAT_EXHAUSTED);
			return finish(reply_rst(ctx, &p));
		case CREATE_NO_BACKEND:
			count(XLB_C_NO_BACKEND);
			return finish(reply_rst(ctx, &p));
		default:
			count(XLB_C_TABLE_FULL);
			return finish(reply_rst(ctx, &p));
		}
		if (rc == CREATE_OK) {
			/* the map holds the entry; forward with the map's copy so stats land there */
			peer = bpf_map_lookup_elem(&xlb_flows, &key);
			if (peer)
				v = peer;
		}
		return finish(rewrite_and_send(ctx, &p, v, dir));
	}

	if (!v)
		return finish(XDP_PASS);
	now = now32();
	if ((__s32)(now - v->last_seen) >= XLB_LONE_CHECK_TICKS)
		check_counterpart(&key, v, dir, now);
	if (p.flags & (TCP_FL_FIN | TCP_FL_RST))
		note_close(&key, v, dir, p.flags);
	return finish(rewrite_and_send(ctx, &p, v, dir));
}

/*
 * xlb_clock publishes the current jiffies and CLOCK_MONOTONIC nanoseconds in
 * xlb_shared for userspace, which runs it with BPF_PROG_TEST_RUN: the
 * maintenance loop's "now" is the data path's own clock.
 */
SEC("xdp")
int xlb_clock(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct xlb_state *st = bpf_map_lookup_elem(&xlb_shared, &zero);

	if (st) {
		st->clock_jiffies = bpf_jiffies64();
		st->clock_ns = bpf_ktime_get_ns();
	}
	return XDP_PASS;
}

/*
 * xlb_reap is the maintenance loop's only way to remove flow entries. The
 * loop fills the single xlb_reap_batch slot with requests (layout.h struct
 * reap_req) and the clock to judge them by, runs the program once with
 * BPF_PROG_TEST_RUN and reads the results back. Each request is re-checked
 * against the live entry here, just before the delete: its generation, its
 * close state and its last-seen times. A packet that refreshed a pair
 * after the loop decided keeps it; the check and the delete are
 * nanoseconds apart instead of a system call or a whole walk.
 *
 * Whoever deletes a pair's forward entry accounts for the pair: the
 * reaper adds it to xlb_reaped under the reason it was removed for.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct reap_batch);
	__uint(max_entries, 1);
} xlb_reap_batch SEC(".maps");

/* Age of t at now on the 32-bit clock; 0 when t is not in the past. */
static __always_inline __u32 age32(__u32 now, __u32 t)
{
	__s32 d = (__s32)(now - t);

	return d > 0 ? (__u32)d : 0;
}

static __always_inline void count_reaped(__u16 backend_id, __u32 reason)
{
	__u32 idx = (__u32)backend_id * XLB_REAPED_REASONS + reason;
	__u64 *c = bpf_map_lookup_elem(&xlb_reaped, &idx);

	if (c)
		*c += 1;
}

/* Why a lone entry (dir, forward flags) is removed, by what its pair was. */
static __always_inline __u32 lone_reason(__u8 dir, __u32 flags)
{
	if (dir != XLB_DIR_CLIENT)
		return XLB_REAPED_LONE_REVERSE;
	if (flags & XLB_F_CLOSED_RST)
		return XLB_REAPED_LONE_RESET;
	if (flags & XLB_F_CLOSED_FIN)
		return XLB_REAPED_LONE_TIMEWAIT;
	return XLB_REAPED_LONE_ACTIVE;
}

static __noinline __u8 reap_one_req(struct reap_batch *b, struct reap_req *q)
{
	struct flow_value *v, *peer;
	struct flow_key key, pk;
	__u32 now, flags, gen;
	__u16 bid;
	__u8 op = q->op;
	int intact;

	key = q->key;
	v = bpf_map_lookup_elem(&xlb_flows, &key);
	if (!v || v->generation != q->generation)
		return XLB_REAP_GONE;
	gen = v->generation;
	flow_peer_key(&pk, v, key.dir);
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	intact = peer && peer->generation == gen;

	if (op == XLB_REAP_CHECK)
		return intact ? XLB_REAP_INTACT : XLB_REAP_LONE_FOUND;
	/* the entry's memory may be reused once it is deleted: copy first */
	flags = v->flags;
	bid = v->backend_id;
	if (op == XLB_REAP_LONE) {
		if (intact)
			return XLB_REAP_INTACT;
		if (bpf_map_delete_elem(&xlb_flows, &key))
			return XLB_REAP_GONE;
		count_reaped(bid, lone_reason(key.dir, flags));
		return XLB_REAPED;
	}
	if (key.dir != XLB_DIR_CLIENT)
		return XLB_REAP_KEPT; /* pairs are reaped through their forward entry */

	now = (__u32)b->now;
	switch (op) {
	case XLB_REAP_RESET:
		if (!(flags & XLB_F_CLOSED_RST))
			return XLB_REAP_KEPT;
		break;
	case XLB_REAP_TIMEWAIT:
		if (!(flags & XLB_F_CLOSED_FIN) || age32(now, v->last_seen) < b->time_wait)
			return XLB_REAP_KEPT;
		break;
	case XLB_REAP_ORPHAN:
		if (flags & XLB_F_CLOSED)
			return XLB_REAP_KEPT;
		if (age32(now, v->last_seen) < b->orphan_ttl)
			return XLB_REAP_KEPT;
		if (intact && age32(now, peer->last_seen) < b->orphan_ttl)
			return XLB_REAP_KEPT;
		break;
	default:
		return XLB_REAP_KEPT;
	}

	if (!intact) {
		/* the pair was already half gone: an invariant repair */
		if (bpf_map_delete_elem(&xlb_flows, &key))
			return XLB_REAP_GONE;
		count_reaped(bid, lone_reason(key.dir, flags));
		return XLB_REAP_REPAIRED;
	}
	if (bpf_map_delete_elem(&xlb_flows, &key))
		return XLB_REAP_GONE; /* a new SYN replaced it meanwhile */
	/* the counterpart only if it is still this pair's (its key may have gone to a new pair) */
	peer = bpf_map_lookup_elem(&xlb_flows, &pk);
	if (peer && peer->generation == gen)
		bpf_map_delete_elem(&xlb_flows, &pk);
	if (op == XLB_REAP_RESET)
		count_reaped(bid, XLB_REAPED_RESET);
	else if (op == XLB_REAP_TIMEWAIT)
		count_reaped(bid, XLB_REAPED_TIMEWAIT);
	else
		count_reaped(bid, XLB_REAPED_ORPHANED);
	return XLB_REAPED;
}

struct reap_loop {
	struct reap_batch *b;
};

static long reap_step(__u64 i, void *arg)
{
	struct reap_batch *b = ((struct reap_loop *)arg)->b;

	if (i >= XLB_REAP_BATCH)
		return 1;
	b->reqs[i].result = reap_one_req(b, &b->reqs[i]);
	return 0;
}

SEC("xdp")
int xlb_reap(struct xdp_md *ctx)
{
	struct reap_loop l;
	__u32 zero = 0, n;

	l.b = bpf_map_lookup_elem(&xlb_reap_batch, &zero);
	if (!l.b)
		return XDP_DROP;
	n = l.b->count;
	if (n > XLB_REAP_BATCH)
		n = XLB_REAP_BATCH;
	bpf_loop(n, reap_step, &l, 0);
	return XDP_PASS;
}

/* Keep the enums in BTF so bpf2go generates their Go constants. */
const enum xlb_counter *__xlb_counter_btf __attribute__((unused));
const enum xlb_flow_flags *__xlb_flow_flags_btf __attribute__((unused));
const enum xlb_dir *__xlb_dir_btf __attribute__((unused));
const enum xlb_cfg_flags *__xlb_cfg_flags_btf __attribute__((unused));
const enum xlb_close_kind *__xlb_close_kind_btf __attribute__((unused));
const enum xlb_reap_op *__xlb_reap_op_btf __attribute__((unused));
const enum xlb_reap_result *__xlb_reap_result_btf __attribute__((unused));
const enum xlb_reaped_reason *__xlb_reaped_reason_btf __attribute__((unused));
const enum xlb_pair_event *__xlb_pair_event_btf __attribute__((unused));
