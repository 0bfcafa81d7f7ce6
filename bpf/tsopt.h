/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * tsopt.h — TCP options (issue 36): the one walk over a segment's options
 * (the window scale of a SYN or SYN-ACK, the timestamp option of any
 * segment), and the rewrite of the timestamp option on the backend side
 * of a pair, so that a backend's TIME_WAIT accepts the SYN of a new pair
 * on a SNAT port an earlier pair left it holding (RFC 6191).
 *
 * Why timestamps that never go backwards let a port be reused. A backend
 * that closed first keeps the 4-tuple (backend, SNAT address and port) in
 * TIME_WAIT for 60 s. Linux accepts a new SYN into that TIME_WAIT
 * (net/ipv4/tcp_minisocks.c tcp_timewait_state_process) when PAWS does
 * not reject it and either its sequence is after the old connection's
 * RCV.NXT or it carries a timestamp newer than the last one the old
 * connection received: (s32)(tw_ts_recent - rcv_tsval) < 0, RFC 6191 §2.
 * A client's TSvals are its own clock plus an offset random per address
 * pair (RFC 7323 §5.4, Linux's tsoffset), so two clients behind one SNAT
 * port carry unrelated TSvals, and the backend rejects about half of the
 * new SYNs (TcpExtPAWSTimewait; the client retries after 1 s).
 *
 * The data path therefore gives every pair toward the backend timestamps
 * on its own clock (clock.h now_ms32, milliseconds): at the SYN, ts_off =
 * (now_ms + 1) - the SYN's TSval (mod 2^32), the same on both entries;
 * toward the backend every TSval is raised by ts_off, toward the client
 * every TSecr lowered by it, so each endpoint sees its own numbers. A
 * timestamp clock ticks at most once per millisecond (RFC 7323 §5.4), so
 * a pair's later TSvals toward the backend stay at most now_ms + 1 of the
 * moment each segment passes. A held port is reused only once the reuse
 * guard (cfg->snat_reuse_ticks, 1 s: pkg/dataplane SNATReuseGuard) has
 * passed since the old pair's last backend packet, which is after the
 * old pair's last client segment: the new SYN's TSval, now_ms + 1, is
 * then at least a second above every TSval the backend received on that
 * tuple, and strictly newer for tcp_timewait_state_process.
 *
 * The rewrite applies once the timestamps are negotiated (RFC 7323 §3.2:
 * both SYNs carried the option, XLB_F_TS), and to the handshake itself:
 * the client's SYN and its retransmissions (TSval), the backend's SYN-ACK
 * (TSecr). SACK, window scale and MSS pass unchanged; the TCP checksum is
 * updated incrementally (RFC 1624), also for an option at an odd offset
 * from the TCP header (the checksum's 16-bit words are aligned to the
 * header, so each byte is weighed by its own offset's parity).
 */
#ifndef XLB_TSOPT_H
#define XLB_TSOPT_H

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"

#define TCPOPT_EOL 0
#define TCPOPT_NOP 1
#define TCPOPT_WSCALE 3
#define TCPOLEN_WSCALE 3
#define TCPOPT_TIMESTAMP 8
#define TCPOLEN_TIMESTAMP 10

/* The TCP options area is at most 40 bytes (a 60-byte header). */
#define TCP_OPTS_MAX 40

/* Where the option walk is. */
struct opt_walk {
	struct xdp_md *ctx;
	__u32 off;   /* frame offset of the next option */
	__u32 end;   /* frame offset just past the options */
	__u32 ts;    /* frame offset of the timestamp option; 0: none */
	__u8 shift;  /* the window scale option's shift, or XLB_WSCALE_NONE */
};

/*
 * One option: kind and length are read with bpf_xdp_load_bytes, so the
 * variable offset never becomes packet pointer arithmetic (which the
 * verifier refuses without CAP_PERFMON). A malformed option ends the
 * walk; what was found before it stays.
 */
static long opt_step(__u64 i, void *arg)
{
	struct opt_walk *w = arg;
	__u8 b[2];

	if (w->off >= w->end || bpf_xdp_load_bytes(w->ctx, w->off, b, 1))
		return 1;
	if (b[0] == TCPOPT_EOL)
		return 1;
	if (b[0] == TCPOPT_NOP) {
		w->off++;
		return 0;
	}
	if (w->off + 2 > w->end || bpf_xdp_load_bytes(w->ctx, w->off, b, 2) || b[1] < 2 || w->off + b[1] > w->end)
		return 1; /* malformed */
	if (b[0] == TCPOPT_WSCALE && b[1] == TCPOLEN_WSCALE && w->shift == XLB_WSCALE_NONE) {
		if (!bpf_xdp_load_bytes(w->ctx, w->off + 2, b, 1))
			w->shift = b[0] > XLB_WSCALE_MAX ? XLB_WSCALE_MAX : b[0];
	} else if (b[0] == TCPOPT_TIMESTAMP && b[1] == TCPOLEN_TIMESTAMP && !w->ts) {
		w->ts = w->off;
	}
	w->off += b[1];
	return 0;
}

/*
 * The options of the segment whose TCP header (data offset doff) starts
 * at frame offset l4_off (behind IPv4 options, not at the plain
 * PKT_L4_PLAIN): the window scale shift (at most XLB_WSCALE_MAX, or
 * XLB_WSCALE_NONE) in the low 8 bits, the frame offset of the timestamp
 * option above them (0: none). Every option is walked (at most 40 bytes,
 * one step per option or NOP). parse() has checked that the frame holds
 * the whole TCP header. A global function, checked once by the verifier.
 */
__noinline __u32 tcp_options(struct xdp_md *ctx, __u32 l4_off, __u32 doff)
{
	struct opt_walk w;
	__u32 start = l4_off + sizeof(struct tcphdr);

	w.ctx = ctx;
	w.off = start;
	w.end = l4_off + (doff & 0xf) * 4;
	w.ts = 0;
	w.shift = XLB_WSCALE_NONE;
	if (w.end > start)
		bpf_loop(TCP_OPTS_MAX, opt_step, &w, 0);
	return w.ts << 8 | w.shift;
}

/* The frame offset of tcp_options' timestamp option (0: none). */
static __always_inline __u32 opts_ts(__u32 opts)
{
	return opts >> 8;
}

/* tcp_options' window scale shift. */
static __always_inline __u8 opts_wscale(__u32 opts)
{
	return (__u8)opts;
}

/*
 * The frame offset of the timestamp option of the segment at l4_off
 * (doff), or 0. Linux puts it first, after two NOPs, on every segment
 * but a SYN: that layout is checked first, without a walk.
 */
static __always_inline __u32 find_ts(struct xdp_md *ctx, __u32 l4_off, __u32 doff)
{
	__u32 start = l4_off + sizeof(struct tcphdr);
	__u8 b[4];

	if (doff < 8)
		return 0; /* room for no timestamp option (10 bytes) */
	if (!bpf_xdp_load_bytes(ctx, start, b, 4)) {
		if (b[0] == TCPOPT_NOP && b[1] == TCPOPT_NOP && b[2] == TCPOPT_TIMESTAMP && b[3] == TCPOLEN_TIMESTAMP)
			return start + 2;
		if (b[0] == TCPOPT_TIMESTAMP && b[1] == TCPOLEN_TIMESTAMP)
			return start;
	}
	return opts_ts(tcp_options(ctx, l4_off, doff));
}

/* The TSval of the timestamp option at frame offset ts, host order; 0 when unreadable. */
static __always_inline __u32 ts_val(struct xdp_md *ctx, __u32 ts)
{
	__be32 v = 0;

	if (bpf_xdp_load_bytes(ctx, ts + 2, &v, sizeof(v)))
		return 0;
	return bpf_ntohl(v);
}

/*
 * The checksum delta (csum.h, unfolded) of replacing the 8 bytes old by
 * new that start rel bytes into the TCP header: each byte counts in the
 * low or the high half of its 16-bit word by the parity of its offset
 * (words as they sit in memory, read as host words: csum.h).
 */
static __always_inline __u32 csum_bytes8(const __u8 *old, const __u8 *new, __u32 rel)
{
	__u32 acc = 0, sh;
	int i;

#pragma unroll
	for (i = 0; i < 8; i++) {
		sh = ((rel + i) & 1) ? 8 : 0;
		acc += 0xffff - ((__u32)old[i] << sh);
		acc += (__u32)new[i] << sh;
	}
	return acc;
}

/*
 * Rewrite the timestamp option of the segment at l4_off (doff) in the
 * frame for a pair of offset off: toward the backend (dir
 * XLB_DIR_CLIENT) TSval + off, toward the client (XLB_DIR_BACKEND)
 * TSecr - off. Returns the TCP checksum's delta (0: nothing changed, no
 * option), which the caller adds to the header's update: the option lies
 * beyond the 20 bytes a segment behind IPv4 options keeps a copy of
 * (packet.h), so it is written into the frame here, and the checksum
 * where the caller keeps it. A global function, checked once by the
 * verifier.
 */
__noinline __u32 ts_rewrite(struct xdp_md *ctx, __u32 l4_off, __u32 doff, __u32 off, __u32 dir)
{
	__u32 ts, old[2], new[2];

	ts = find_ts(ctx, l4_off, doff & 0xf);
	if (!ts || bpf_xdp_load_bytes(ctx, ts + 2, old, sizeof(old)))
		return 0;
	new[0] = old[0];
	new[1] = old[1];
	if (dir == XLB_DIR_CLIENT)
		new[0] = bpf_htonl(bpf_ntohl(old[0]) + off);
	else
		new[1] = bpf_htonl(bpf_ntohl(old[1]) - off);
	if (bpf_xdp_store_bytes(ctx, ts + 2, new, sizeof(new)))
		return 0;
	return csum_bytes8((const __u8 *)old, (const __u8 *)new, ts + 2 - l4_off);
}

#endif
