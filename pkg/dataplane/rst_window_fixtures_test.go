package dataplane_test

import (
	"fmt"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// RST validation fixtures (issue 13 "RST validation", issue 27 findings 5
// and 7; bpf/layout.h struct flow_value, bpf/track.h rst_verdict; RFC 5961
// §3, nf_conntrack's TCP tracking). Only an exact RST ends its pair: its
// sequence is the receiver's RCV.NXT as the data path knows it (the
// receiver's last acknowledgement, or the end of the sender's last
// segment: its SND.NXT), or after the sender's FIN that FIN's own sequence
// (Linux's tcp_reset_check). A RST elsewhere in the
// receiver's window as the receiver last advertised it, [RCV.NXT, RCV.NXT +
// window] with the right edge included as Linux's tcp_sequence includes it,
// is forwarded and counted (Counters.RSTInexact), the pair untouched: the
// endpoint decides, and answers with a challenge ACK. Any other RST is
// dropped and counted (Counters.RSTOutOfWindow), the pair untouched. The
// window is scaled by the receiver's shift when both SYNs carried the
// option (RFC 7323 §2.2), never for the SYN-ACK's own window. Before the
// client's first ACK, a RST from the backend must acknowledge the client's
// SYN (RFC 9293 §3.10.7.3: ACK = ISN + 1).
//
// Every row opens cli:33000 with a SYN (isnC, window scale synWS), sends
// the Before segments (each must be forwarded), then the RST.
var rstWindowFixtures = []rstRow{
	// No window scaling: windows count bytes.
	{Name: "no scaling: backend RST at the client's next expected sequence ends the pair",
		SynWS: -1, SynAckWS: -1, Before: handshakeWith(1000),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1, isnC+1), Verdict: ends},
	{Name: "no scaling: backend RST at the last byte of the client's window is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: handshakeWith(1000),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+999, isnC+1), Verdict: inexact},
	// Finding 7: the right edge, RCV.NXT + RCV.WND, was dropped; Linux
	// accepts it (!after(seq, rcv_nxt + window)) and challenges it.
	{Name: "no scaling: backend RST at the client's window's right edge is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: handshakeWith(1000),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+1000, isnC+1), Verdict: inexact},
	{Name: "no scaling: backend RST one byte past the client's window's edge is dropped",
		SynWS: -1, SynAckWS: -1, Before: handshakeWith(1000),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+1001, isnC+1)},
	{Name: "no scaling: backend RST one byte before the client's window is dropped",
		SynWS: -1, SynAckWS: -1, Before: handshakeWith(1000),
		RST: rstBy(backendSide, dt.RST, isnB, 0)},
	{Name: "no scaling: client RST at the backend's next expected sequence ends the pair",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendACK(2000)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1, isnB+1), Verdict: ends},
	{Name: "no scaling: client RST one byte after the backend's next expected sequence is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendACK(2000)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+2, isnB+1), Verdict: inexact},
	{Name: "no scaling: client RST at the backend's window's right edge is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendACK(2000)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+2000, isnB+1), Verdict: inexact},
	{Name: "no scaling: client RST one byte past the backend's window's edge is dropped",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendACK(2000)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+2001, isnB+1)},

	// Both SYNs carry the option (client 7, backend 6): windows are scaled.
	{Name: "scaled: backend RST at the client's window's edge << 7 is forwarded, the pair kept",
		SynWS: 7, SynAckWS: 6, Before: handshakeWith(1000),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+1000<<7, isnC+1), Verdict: inexact},
	{Name: "scaled: backend RST one byte past the client's window's edge << 7 is dropped",
		SynWS: 7, SynAckWS: 6, Before: handshakeWith(1000),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+1000<<7+1, isnC+1)},
	{Name: "scaled: client RST at the backend's window's edge << 6 is forwarded, the pair kept",
		SynWS: 7, SynAckWS: 6, Before: append(handshakeWith(1000), backendACK(2000)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+2000<<6, isnB+1), Verdict: inexact},
	{Name: "scaled: client RST one byte past the backend's window's edge << 6 is dropped",
		SynWS: 7, SynAckWS: 6, Before: append(handshakeWith(1000), backendACK(2000)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+2000<<6+1, isnB+1)},
	{Name: "scaled: client RST at the backend's next expected sequence ends the pair",
		SynWS: 7, SynAckWS: 6, Before: append(handshakeWith(1000), backendACK(2000)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1, isnB+1), Verdict: ends},
	// RFC 7323 §2.2: the window of a segment with SYN set is never scaled.
	{Name: "scaled: the SYN-ACK's window is not scaled: client RST at its edge is forwarded, the pair kept",
		SynWS: 7, SynAckWS: 6, Before: handshakeWith(1000),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+synAckWindow, isnB+1), Verdict: inexact},
	{Name: "scaled: the SYN-ACK's window is not scaled: client RST one byte past its edge is dropped",
		SynWS: 7, SynAckWS: 6, Before: handshakeWith(1000),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+synAckWindow+1, isnB+1)},

	// Scaling needs the option in both SYNs (RFC 7323 §2.2).
	{Name: "only the SYN scales: the client's window is not scaled, a RST past its edge is dropped",
		SynWS: 7, SynAckWS: -1, Before: handshakeWith(1000),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+1001, isnC+1)},
	{Name: "only the SYN scales: a backend RST at the unscaled window's edge is forwarded, the pair kept",
		SynWS: 7, SynAckWS: -1, Before: handshakeWith(1000),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+1000, isnC+1), Verdict: inexact},
	{Name: "only the SYN-ACK scales: the backend's window is not scaled, a RST past its edge is dropped",
		SynWS: -1, SynAckWS: 6, Before: append(handshakeWith(1000), backendACK(2000)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+2001, isnB+1)},
	{Name: "only the SYN-ACK scales: a client RST at the unscaled window's edge is forwarded, the pair kept",
		SynWS: -1, SynAckWS: 6, Before: append(handshakeWith(1000), backendACK(2000)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+2000, isnB+1), Verdict: inexact},

	// The exact expected sequence always ends the pair, even into a zero window.
	{Name: "zero window: backend RST at exactly the client's next expected sequence ends the pair",
		SynWS: 7, SynAckWS: 6, Before: handshakeWith(0),
		RST: rstBy(backendSide, dt.RST, isnB+1, 0), Verdict: ends},
	{Name: "zero window: backend RST one past the next expected sequence is dropped",
		SynWS: 7, SynAckWS: 6, Before: handshakeWith(0),
		RST: rstBy(backendSide, dt.RST, isnB+2, 0)},
	{Name: "zero window: client RST at exactly the backend's next expected sequence ends the pair",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendACK(0)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1, isnB+1), Verdict: ends},

	// The window follows the receiver's newest ACK, not an older one.
	{Name: "the window moves with the client's ACK: a RST at the old next sequence is dropped",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendData(100), clientACK(isnB+1+100, 1000)),
		RST: rstBy(backendSide, dt.RST, isnB+1, 0)},
	{Name: "the window moves with the client's ACK: a RST at the new next sequence ends the pair",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendData(100), clientACK(isnB+1+100, 1000)),
		RST: rstBy(backendSide, dt.RST, isnB+1+100, 0), Verdict: ends},
	{Name: "the window moves with the client's ACK: a RST at the new window's edge is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendData(100), clientACK(isnB+1+100, 1000)),
		RST: rstBy(backendSide, dt.RST, isnB+1+100+1000, 0), Verdict: inexact},
	{Name: "a reordered older ACK does not move the window back",
		SynWS: -1, SynAckWS: -1,
		Before: append(handshakeWith(1000), backendData(100), clientACK(isnB+1+100, 1000), clientACK(isnB+1, 1000)),
		RST:    rstBy(backendSide, dt.RST, isnB+1, 0)},
	// The sender's segment end is the receiver's RCV.NXT once the
	// sender's segments arrived, before the receiver's ACK of them passes:
	// a RST right behind data the client has not acknowledged yet (as a
	// close with unread data sends it) is exact (nf_conntrack takes it too).
	{Name: "a RST right behind data the client has not acknowledged yet ends the pair",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendData(100)),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+100, isnC+1), Verdict: ends},
	{Name: "a RST one byte behind the end of the data the client has not acknowledged yet is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendData(100)),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+99, isnC+1), Verdict: inexact},
	{Name: "a retransmission of older data does not move the segment end back",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendData(100), backendData(50)),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+100, isnC+1), Verdict: ends},
	{Name: "a client RST right behind its data the backend has not acknowledged yet ends the pair",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendACK(2000), clientData(300)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+300, isnB+1), Verdict: ends},

	// After the sender's FIN, its end (the receiver's RCV.NXT once the FIN
	// arrived) and the FIN's own sequence (RCV.NXT - 1, which Linux takes
	// in CLOSE-WAIT, LAST-ACK and CLOSING) are exact.
	{Name: "after the backend's FIN: a backend RST at the FIN's end ends the pair before the client acknowledges the FIN",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendFINSeg(0)),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+2, isnC+1), Verdict: ends},
	{Name: "after the backend's FIN with data: a backend RST at the FIN's own sequence ends the pair",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendFINSeg(100)),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+100, isnC+1), Verdict: ends},
	{Name: "after the backend's FIN with data: a backend RST at the FIN's end ends the pair",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendFINSeg(100)),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+1+100+1, isnC+1), Verdict: ends},
	{Name: "after the backend's FIN: a backend RST one past the FIN's end is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendFINSeg(0)),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnB+3, isnC+1), Verdict: inexact},
	{Name: "after the client's FIN: a client RST at the FIN's end ends the pair",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendACK(2000), clientFINSeg(20)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+20+1, isnB+1), Verdict: ends},
	{Name: "after the client's FIN: a client RST one past the FIN's end is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendACK(2000), clientFINSeg(20)),
		RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1+20+2, isnB+1), Verdict: inexact},
	{Name: "the client's FIN's end is no exact point for the backend's RSTs",
		SynWS: -1, SynAckWS: -1, Before: append(handshakeWith(1000), backendACK(2000), clientFINSeg(20)),
		RST: rstBy(backendSide, dt.RST|dt.ACK, isnC+1+20+1, isnC+1+20+1)},

	// Sequence numbers wrap around 2^32.
	{Name: "the window wraps past 2^32: a RST beyond the wrap inside it is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: wrappingHandshake,
		RST: rstBy(backendSide, dt.RST, wrapNext+999, 0), Verdict: inexact},
	{Name: "the window wraps past 2^32: its edge beyond the wrap is forwarded, the pair kept",
		SynWS: -1, SynAckWS: -1, Before: wrappingHandshake,
		RST: rstBy(backendSide, dt.RST, wrapNext+1000, 0), Verdict: inexact},
	{Name: "the window wraps past 2^32: one byte past its edge is dropped",
		SynWS: -1, SynAckWS: -1, Before: wrappingHandshake,
		RST: rstBy(backendSide, dt.RST, wrapNext+1001, 0)},
	{Name: "the window wraps past 2^32: the next expected sequence ends the pair",
		SynWS: -1, SynAckWS: -1, Before: wrappingHandshake,
		RST: rstBy(backendSide, dt.RST, wrapNext, 0), Verdict: ends},

	// Before the SYN-ACK (embryonic, the client has sent no ACK).
	{Name: "a backend RST answering the SYN (ACK = ISN+1) ends the embryonic pair",
		SynWS: 7, RST: rstBy(backendSide, dt.RST|dt.ACK, 0, isnC+1), Verdict: ends},
	{Name: "a backend RST with another ACK before the SYN-ACK is dropped",
		SynWS: 7, RST: rstBy(backendSide, dt.RST|dt.ACK, 0, isnC+2)},
	{Name: "a backend RST without ACK before the SYN-ACK is dropped",
		SynWS: 7, RST: rstBy(backendSide, dt.RST, isnB+1, 0)},
	{Name: "a client RST with its SYN's sequence + 1 ends the embryonic pair",
		SynWS: 7, RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+1, 0), Verdict: ends},
	{Name: "a client RST with another sequence before the SYN-ACK is dropped",
		SynWS: 7, RST: rstBy(clientSide, dt.RST|dt.ACK, isnC+2, 0)},
}

func TestRSTWindowFixtures(t *testing.T) {
	for _, r := range rstWindowFixtures {
		t.Run(r.Name, func(t *testing.T) { r.run(t) })
	}
}

// A pair migrated from layout 2 never saw the SYNs' window scales nor
// either side's window (XLB_WSCALE_UNKNOWN, no FlagACKSeen): until the
// receiver's next ACK, any RST ends it (plan13 "RST validation").
func TestRSTWindowMigratedPair(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(6), 1000)
	k.forward("backend ACK", k.backend(dt.ACK, isnB+1, isnC+1, 2000, nil), counted{})
	p := k.now()
	for _, key := range []dataplane.FlowKey{p.FwdKey, p.RevKey} {
		v := e.DeleteFlow(t, key)
		v.Wscale = dataplane.FixtureWscaleUnknown
		v.Flags &^= dataplane.FlagACKSeen
		v.TrackSeq, v.TrackWin = 0, 0
		if err := e.DP.PutFlow(key, v); err != nil {
			t.Fatal(err)
		}
	}
	rst := k.backend(dt.RST, isnB+1+3_000_000_000, 0, 0, nil)
	k.forward("backend RST far outside any window", rst, counted{ClosedBackendRST: 1})
	k.wantFlags(rstB|closedR, 0)
}

// Once the receiver of such a pair ACKs again, its RCV.NXT is known but
// its window scale is not (XLB_WSCALE_UNKNOWN: any sequence is in its
// window): only the exact RST ends the pair, any other is forwarded.
func TestRSTWindowMigratedPairAfterACK(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(6), 1000)
	p := k.now()
	v := e.DeleteFlow(t, p.FwdKey)
	v.Wscale = dataplane.FixtureWscaleUnknown
	v.Flags &^= dataplane.FlagACKSeen
	v.TrackSeq, v.TrackWin = 0, 0
	if err := e.DP.PutFlow(p.FwdKey, v); err != nil {
		t.Fatal(err)
	}
	k.forward("client ACK", k.client(dt.ACK, isnC+1, isnB+1, 1000, nil), counted{})
	k.forward("backend RST far from the client's next sequence", k.backend(dt.RST, isnB+1+3_000_000_000, 0, 0, nil), counted{RSTInexact: 1})
	k.wantFlags(0, rstB|closedR)
	k.forward("backend RST at the client's next sequence", k.backend(dt.RST, isnB+1, 0, 0, nil), counted{ClosedBackendRST: 1})
	k.wantFlags(rstB|closedR, 0)
}

// An inexact RST leaves the pair as it was, and a later exact one still
// ends it: here a RST in the client's window from a blind sender, then
// the backend's own RST right behind the data it sent (the client has not
// acknowledged it yet: exact by the backend's segment end).
func TestRSTInexactThenExact(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	data := make([]byte, 100)
	k.forward("backend data", k.backend(dt.ACK|dt.PSH, isnB+1, isnC+1, 2000, data), counted{})
	before := k.now()
	k.forward("RST inside the client's window", k.backend(dt.RST|dt.ACK, isnB+1+500, isnC+1, 0, nil), counted{RSTInexact: 1})
	after := k.now()
	if after.Fwd.Generation != before.Fwd.Generation || after.Fwd.Flags != before.Fwd.Flags || after.Rev.Flags != before.Rev.Flags {
		t.Fatalf("pair after the inexact RST: generation %d flags %#x/%#x, was %d %#x/%#x",
			after.Fwd.Generation, after.Fwd.Flags, after.Rev.Flags, before.Fwd.Generation, before.Fwd.Flags, before.Rev.Flags)
	}
	k.forward("client data", k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, data), counted{})
	k.forward("backend RST right behind its data", k.backend(dt.RST|dt.ACK, isnB+1+100, isnC+1+100, 0, nil), counted{ClosedBackendRST: 1})
	k.wantFlags(rstB|closedR, 0)
}

// A segment end not known (0: cleared, as a migration from an earlier
// layout may leave it) is taken from the sender's next segment as it
// comes; exact RSTs then follow it.
func TestRSTSegmentEndLearned(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	k.forward("backend ACK", k.backend(dt.ACK, isnB+1, isnC+1, 2000, nil), counted{})
	setSynUs(t, e, k.p.FwdKey, 0)
	data := make([]byte, 300)
	k.forward("client data", k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, data), counted{})
	if got := k.now().Fwd.SynUs; got != isnC+1+300 {
		t.Fatalf("client segment end %d after its data, want %d", got, isnC+1+300)
	}
	k.forward("client RST right behind its data", k.client(dt.RST|dt.ACK, isnC+1+300, isnB+1, 0, nil), counted{ClosedClientRST: 1})
	k.wantFlags(rstC|closedR, 0)
}

// While the shutdown flag is set every other packet is answered with a
// RST, but an incoming RST is still judged as at any other time: an
// out-of-window one is dropped and counted, an inexact one in the window
// forwarded and counted with the pair kept, an exact one forwarded and
// ends the pair.
func TestRSTWindowDuringShutdown(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(6), 1000)
	if err := e.DP.SetShutdown(true); err != nil {
		t.Fatal(err)
	}
	k.drop("backend RST past the client's window", k.backend(dt.RST, isnB+1+1000<<7+1, 0, 0, nil), counted{RSTOutOfWindow: 1})
	k.wantFlags(0, rstB|closedR)
	k.forward("backend RST in the client's window", k.backend(dt.RST, isnB+1+1000, 0, 0, nil), counted{RSTInexact: 1})
	k.wantFlags(0, rstB|closedR)
	k.forward("backend RST at the client's next sequence", k.backend(dt.RST, isnB+1, 0, 0, nil), counted{ClosedBackendRST: 1})
	k.wantFlags(rstB|closedR, 0)
}

// rstRow is one row of rstWindowFixtures.
type rstRow struct {
	Name     string
	SynWS    int // the SYN's window scale option; -1: none
	SynAckWS int // the SYN-ACK's (when Before sends one); -1: none
	Before   []rstSeg
	RST      rstSeg
	Verdict  rstVerdict
}

// rstVerdict is what a RST does to its pair (bpf/track.h rst_verdict).
type rstVerdict int

const (
	// dropped: outside the receiver's window; dropped and counted
	// (RSTOutOfWindow), the pair untouched.
	dropped rstVerdict = iota
	// inexact: in the receiver's window but not exact; forwarded and
	// counted (RSTInexact), the pair untouched.
	inexact
	// ends: exact; forwarded, and it ends the pair (counted as a closure
	// by its sender).
	ends
)

// rstSeg is a segment of an rstRow.
type rstSeg struct {
	From     sender
	Flags    uint8
	Seq, Ack uint32
	Window   uint16
	Data     int // payload bytes
}

// rstBy is a RST (or any segment) from s without data or window.
func rstBy(s sender, flags uint8, seq, ack uint32) rstSeg {
	return rstSeg{From: s, Flags: flags, Seq: seq, Ack: ack}
}

// handshakeWith is the backend's SYN-ACK and the client's ACK advertising
// window win.
func handshakeWith(win uint16) []rstSeg {
	return []rstSeg{
		{From: backendSide, Flags: dt.SYN | dt.ACK, Seq: isnB, Ack: isnC + 1, Window: synAckWindow},
		clientACK(isnB+1, win),
	}
}

// wrappingHandshake is a handshake whose backend ISN is 256 below 2^32:
// the client's window (1000 from wrapNext) wraps past 0.
var (
	wrapNext          = uint32(0xffffff01)
	wrappingHandshake = []rstSeg{
		{From: backendSide, Flags: dt.SYN | dt.ACK, Seq: wrapNext - 1, Ack: isnC + 1, Window: synAckWindow},
		clientACK(wrapNext, 1000),
	}
)

// backendACK is the backend's first ACK after the handshake, advertising win.
func backendACK(win uint16) rstSeg {
	return rstSeg{From: backendSide, Flags: dt.ACK, Seq: isnB + 1, Ack: isnC + 1, Window: win}
}

// clientACK is a client ACK of ack advertising win.
func clientACK(ack uint32, win uint16) rstSeg {
	return rstSeg{From: clientSide, Flags: dt.ACK, Seq: isnC + 1, Ack: ack, Window: win}
}

// backendFINSeg is the backend's FIN right after its SYN-ACK, with n bytes
// of data before it: the FIN's own sequence is isnB+1+n, its end
// isnB+1+n+1.
func backendFINSeg(n int) rstSeg {
	return rstSeg{From: backendSide, Flags: dt.FIN | dt.ACK, Seq: isnB + 1, Ack: isnC + 1, Window: 2000, Data: n}
}

// clientData is n bytes from the client right after the handshake.
func clientData(n int) rstSeg {
	return rstSeg{From: clientSide, Flags: dt.ACK | dt.PSH, Seq: isnC + 1, Ack: isnB + 1, Window: 1000, Data: n}
}

// clientFINSeg is the client's FIN right after the handshake, with n bytes
// of data before it: its end is isnC+1+n+1.
func clientFINSeg(n int) rstSeg {
	return rstSeg{From: clientSide, Flags: dt.FIN | dt.ACK, Seq: isnC + 1, Ack: isnB + 1, Window: 1000, Data: n}
}

// backendData is n bytes from the backend right after its SYN-ACK.
func backendData(n int) rstSeg {
	return rstSeg{From: backendSide, Flags: dt.ACK | dt.PSH, Seq: isnB + 1, Ack: isnC + 1, Window: 2000, Data: n}
}

func (r rstRow) run(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(r.SynWS))
	for i, s := range r.Before {
		seg := r.segment(k, s)
		if s.Flags&dt.SYN != 0 {
			seg.Options = synAckOptions(r.SynAckWS)
		}
		k.forward(fmt.Sprintf("segment %d before the RST", i), seg, counted{})
	}
	before := k.now()
	rst := r.segment(k, r.RST)
	if r.Verdict != ends {
		if r.Verdict == inexact {
			k.forward("RST", rst, counted{RSTInexact: 1})
		} else {
			k.drop("RST", rst, counted{RSTOutOfWindow: 1})
		}
		after := k.now()
		if after.Fwd.Generation != before.Fwd.Generation || after.Fwd.Flags != before.Fwd.Flags || after.Rev.Flags != before.Rev.Flags {
			t.Fatalf("pair after the RST: generation %d flags %#x/%#x, was %d %#x/%#x",
				after.Fwd.Generation, after.Fwd.Flags, after.Rev.Flags, before.Fwd.Generation, before.Fwd.Flags, before.Rev.Flags)
		}
		return
	}
	if r.RST.From == clientSide {
		k.forward("RST", rst, counted{ClosedClientRST: 1})
		k.wantFlags(rstC|closedR, 0)
		return
	}
	k.forward("RST", rst, counted{ClosedBackendRST: 1})
	k.wantFlags(rstB|closedR, 0)
}

// segment builds s on k.
func (r rstRow) segment(k *tcpConn, s rstSeg) dt.Segment {
	data := make([]byte, s.Data)
	for i := range data {
		data[i] = byte(i)
	}
	if s.From == clientSide {
		return k.client(s.Flags, s.Seq, s.Ack, s.Window, data)
	}
	return k.backend(s.Flags, s.Seq, s.Ack, s.Window, data)
}
