/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * track.h — what the data path follows of each TCP connection beyond its
 * addresses: the handshake (embryonic until the client ACKs the backend's
 * SYN-ACK; DESIGN §6b) and each side's receive window, against which a
 * RST is checked before it may end a pair (RFC 5961 §3; the window check
 * of nf_conntrack's TCP tracking), and how far each side has sent. layout.h
 * struct flow_value describes the fields.
 */
#ifndef XLB_TRACK_H
#define XLB_TRACK_H

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "flow.h"
#include "packet.h"
#include "tsopt.h"

/* A window as its sender meant it: scaled by the sender's shift. */
static __always_inline __u32 scaled_window(__u16 window_be, __u8 wscale)
{
	__u32 win = bpf_ntohs(window_be);

	if (wscale == XLB_WSCALE_UNKNOWN)
		return ~0U; /* not seen: any sequence is in the window */
	if (wscale > XLB_WSCALE_MAX)
		return win; /* XLB_WSCALE_NONE */
	return win << wscale;
}

/*
 * Follow a segment's ACK on its sender's entry v (of pair gen: flow.h,
 * stale pointers): the newest acknowledgement and the window advertised
 * with it. A SYN-ACK's window is never scaled (RFC 7323 §2.2).
 */
static __always_inline void track_ack(struct pkt *p, struct flow_value *v, __u32 gen)
{
	__u32 ack = bpf_ntohl(p->tcp->ack_seq), win;

	if (!(p->flags & TCP_FL_ACK))
		return;
	win = p->flags & TCP_FL_SYN ? bpf_ntohs(p->tcp->window) : scaled_window(p->tcp->window, v->wscale);
	if (!(v->flags & XLB_F_ACK_SEEN)) {
		if (!flow_is(v, gen))
			return;
		v->track_seq = ack;
		v->track_win = win;
		flow_set(v, gen, XLB_F_ACK_SEEN);
		return;
	}
	if ((__s32)(ack - v->track_seq) < 0)
		return; /* an older segment, reordered */
	if (!flow_is(v, gen))
		return;
	v->track_seq = ack;
	v->track_win = win;
}

/*
 * Where the segment in p ends: its sequence plus its length, the SYN and
 * the FIN counting one each (RFC 9293 §3.4). parse() has checked that the
 * datagram holds the IPv4 header (with its options: the TCP header is at
 * l4_off) and the TCP header. Not for a first fragment, whose datagram is
 * longer than its tot_len says.
 */
static __always_inline __u32 seg_end(struct pkt *p)
{
	__u32 len = p->tot_len - (p->l4_off - sizeof(struct ethhdr)) - p->tcp->doff * 4;

	if (p->flags & TCP_FL_SYN)
		len++;
	if (p->flags & TCP_FL_FIN)
		len++;
	return bpf_ntohl(p->tcp->seq) + len;
}

/*
 * Follow the sender's SND.NXT on its entry v (layout.h flow_value,
 * "the sender's segment end", in syn_us): the end of the newest segment it
 * sent, moved forward only (a retransmission or a reordered segment
 * leaves it). The forward entry's syn_us holds the SYN's time until the
 * pair is established (track_handshake clears it there); 0: not known
 * yet, taken as it comes. Called for every segment but RSTs, before a FIN
 * is recorded (note_close), so that a CPU that sees the FIN's bit also
 * sees the FIN's end.
 */
static __always_inline void track_send(struct pkt *p, struct flow_value *v, __u32 dir, __u32 gen)
{
	__u32 end, cur = v->syn_us;

	if (dir == XLB_DIR_CLIENT && !(v->flags & XLB_F_ESTABLISHED))
		return;
	if (p->shape & PKT_FRAGMENT)
		return; /* the datagram's end is not in its first fragment: left as it was (a RST there is inexact, a FIN's port held) */
	end = seg_end(p);
	if (cur && (__s32)(end - cur) <= 0)
		return;
	if (flow_is(v, gen))
		v->syn_us = end;
}

/*
 * Whether the backend's FIN in p acknowledges the client's FIN: its ACK is
 * the client's segment end (fwd, the forward entry: after the client's FIN,
 * that FIN's end). Then the backend received the client's FIN before it
 * sent its own (CLOSE-WAIT, LAST-ACK) and closes without TIME_WAIT. A
 * backend FIN that does not is a simultaneous close: the backend sent it
 * from FIN-WAIT-1 and goes through CLOSING to TIME-WAIT (RFC 9293 §3.6,
 * figure 13). An unknown end (0) counts as not acknowledged: the port
 * stays held, never freed too early.
 */
static __always_inline int fin_acks_client_fin(struct pkt *p, const struct flow_value *fwd)
{
	__u32 end = fwd->syn_us;

	return end && (p->flags & TCP_FL_ACK) && bpf_ntohl(p->tcp->ack_seq) == end;
}

/* What a RST does to its pair (rst_verdict). */
enum rst_verdict {
	RST_ENDS = 0,    /* exact: ends the pair; forwarded */
	RST_INEXACT = 1, /* in the receiver's window, not exact: forwarded, the pair kept */
	RST_OUTSIDE = 2, /* outside the receiver's window: dropped */
};

/*
 * What a RST does to its pair (RFC 5961 §3; nf_conntrack's TCP tracking
 * does the same). v is the entry the RST matched (its sender's), recv its
 * counterpart (the receiver's; NULL when missing), fwd the forward entry.
 *
 * With the receiver's window known, only an exact RST ends the pair: its
 * sequence is the receiver's next expected one (RCV.NXT), as the
 * receiver's last acknowledgement gives it (track_seq) or as the sender's
 * segment end gives it (syn_us, track_send: the receiver's RCV.NXT once
 * the sender's segments arrived, as nf_conntrack takes a RST right behind
 * the sender's last segment), or, after the sender's FIN, the FIN's own
 * sequence (RCV.NXT - 1, which Linux takes in CLOSE-WAIT, LAST-ACK and
 * CLOSING: tcp_reset_check). A RST up to the window's right edge
 * inclusive, track_seq + track_win (Linux's tcp_sequence: !after(seq,
 * rcv_nxt + window)), is forwarded without ending the pair: the endpoint
 * decides, and answers one that is not exact for it with a challenge ACK.
 * Any other RST is dropped: a blind reset must guess one of two exact
 * sequences, not one in the window.
 *
 * The data path's view can still lag the endpoint's: a RST whose sender
 * numbers it otherwise (Linux uses the window's end when SND.NXT lies
 * beyond it) is inexact here though exact for the receiver, which ends
 * its side. The pair then outlives both sockets until a RST the data path
 * finds exact (a closed endpoint answers a later segment with a RST whose
 * sequence is that segment's acknowledgement, RFC 9293 §3.10.7.1) or, with
 * no such segment, until the orphan TTL removes it; its SNAT port stays
 * taken until then.
 *
 * While the pair is embryonic, a RST from the backend must acknowledge
 * the client's SYN and one from the client must carry its SYN's sequence
 * + 1 (RFC 9293 §3.10.7.3); any other is dropped. A pair whose windows
 * were never seen (migrated from layout 2) takes any RST, as does a lone
 * entry.
 */
static __always_inline int rst_verdict(struct pkt *p, struct flow_value *v, struct flow_value *recv,
				       struct flow_value *fwd, __u32 dir)
{
	__u32 seq = bpf_ntohl(p->tcp->seq), fin, end;

	if (!recv || !fwd)
		return RST_ENDS;
	if (recv->flags & XLB_F_ACK_SEEN) {
		if (seq == recv->track_seq)
			return RST_ENDS;
		end = v->syn_us;
		if (end && (dir == XLB_DIR_BACKEND || (fwd->flags & XLB_F_ESTABLISHED))) {
			fin = dir == XLB_DIR_CLIENT ? XLB_F_FIN_CLIENT : XLB_F_FIN_BACKEND;
			if (seq == end || (seq == end - 1 && (fwd->flags & fin)))
				return RST_ENDS;
		}
		return seq - recv->track_seq <= recv->track_win ? RST_INEXACT : RST_OUTSIDE;
	}
	if (fwd->flags & XLB_F_ESTABLISHED)
		return RST_ENDS;
	if (dir == XLB_DIR_BACKEND)
		return (p->flags & TCP_FL_ACK) && bpf_ntohl(p->tcp->ack_seq) == recv->track_seq ? RST_ENDS : RST_OUTSIDE;
	return seq == v->track_seq ? RST_ENDS : RST_OUTSIDE;
}

#endif
