package dataplane_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Helpers of the scenario fixtures of issue 13 (RST windows, embryonic
// pairs, SNAT ports, ICMP, TTL, next hops): one connection driven frame by
// frame through BPF_PROG_TEST_RUN, every frame checked for its action, its
// output frame and the exact change of every counter.

// The initial sequence numbers of the scenario connections: the client's
// SYN, the backend's SYN-ACK (as in fixture_table_test.go).
const (
	isnC = uint32(1000)
	isnB = uint32(5000)
)

// Windows of the handshake's SYN and SYN-ACK.
const (
	synWindow    = 64240
	synAckWindow = 65160
)

// step runs frame arriving on ingress and checks the action, the output
// frame byte for byte against want (nil: not compared), that the counters
// moved by exactly moves plus one for the action, and that nothing was
// ever XDP_ABORTED. It returns the output frame.
func step(t *testing.T, e *dt.Env, what string, frame []byte, ingress dt.Iface, act uint32, want []byte, moves counted) []byte {
	t.Helper()
	before := e.Counters(t)
	got, out, err := e.Run(frame, ingress)
	if err != nil {
		t.Fatalf("%s: run: %v", what, err)
	}
	if got != act {
		t.Fatalf("%s: action %s, want %s", what, dt.ActionName(got), dt.ActionName(act))
	}
	if want != nil {
		if d := frameDiff(out, want); d != "" {
			t.Fatalf("%s: output frame differs:\n%s", what, d)
		}
	}
	after := e.Counters(t)
	moves.Actions[act]++
	if d := minus(after, before); d != moves {
		t.Fatalf("%s: counters moved by %s, want %s", what, moved(d), moved(moves))
	}
	if after.Actions[dt.XDPAborted] != 0 {
		t.Fatalf("%s: XDP_ABORTED counted %d times", what, after.Actions[dt.XDPAborted])
	}
	return out
}

// frameDiff describes how got differs from want: field by field for TCP
// frames (dt.Diff) and ICMP frames (icmpDiff); empty when they are equal.
func frameDiff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	if _, err := dt.Decode(want); err == nil {
		return dt.Diff(got, want)
	}
	return icmpDiff(got, want)
}

// forwardAction is how the environment sends a pair's packets on: XDP_TX
// one-arm, a redirect to the other interface two-arm.
func forwardAction(e *dt.Env) uint32 {
	if e.SNAT == dt.BackIP {
		return dt.XDPRedirect
	}
	return dt.XDPTX
}

// sender is who sends a frame of a scenario: the client's side of XLB or
// the backend's.
type sender int

const (
	clientSide sender = iota
	backendSide
)

// tcpConn is one connection of a scenario: client c to listen:80, and its
// pair as the client's SYN created it.
type tcpConn struct {
	t *testing.T
	e *dt.Env
	c netip.AddrPort
	p dt.Pair
}

// dial sends the SYN of client port port (sequence isnC, window synWindow,
// options opts) and expects it to create a pair and go to the backend the
// pair names, from the SNAT address and port it names.
func dial(t *testing.T, e *dt.Env, port uint16, opts []layers.TCPOption) *tcpConn {
	t.Helper()
	return dialWith(t, e, port, opts, counted{PairsCreated: 1})
}

// dialWith is dial for a SYN that must move the counters by moves.
func dialWith(t *testing.T, e *dt.Env, port uint16, opts []layers.TCPOption, moves counted) *tcpConn {
	t.Helper()
	return connect(t, e, dt.Client(port), opts, moves)
}

// connect is dialWith for any client address and port.
func connect(t *testing.T, e *dt.Env, c netip.AddrPort, opts []layers.TCPOption, moves counted) *tcpConn {
	t.Helper()
	k := &tcpConn{t: t, e: e, c: c}
	s := k.client(dt.SYN, isnC, 0, synWindow, nil)
	s.Options = opts
	what := fmt.Sprintf("SYN from %v", c)
	out := step(t, e, what, s.Frame(), e.Front, forwardAction(e), nil, moves)
	k.p = e.MustPair(t, k.c, 80)
	if d := frameDiff(out, k.toBackend(s)); d != "" {
		t.Fatalf("%s: output frame differs:\n%s", what, d)
	}
	return k
}

// client is a segment from the connection's client.
func (k *tcpConn) client(flags uint8, seq, ack uint32, win uint16, data []byte) dt.Segment {
	s := k.e.FromClient(k.c, 80, flags, seq, ack, data)
	s.Window = win
	return s
}

// backend is a segment from the pair's backend to its SNAT address and port.
func (k *tcpConn) backend(flags uint8, seq, ack uint32, win uint16, data []byte) dt.Segment {
	s := k.e.FromBackend(k.p.Backend(), k.p.SNATPort(), flags, seq, ack, data)
	s.Dst, s.Window = k.p.Fwd.NewSrc(), win
	return s
}

// id is the pair's backend id.
func (k *tcpConn) id() int { return int(k.p.Fwd.BackendId) }

// fromClient reports whether s comes from the connection's client.
func (k *tcpConn) fromClient(s dt.Segment) bool { return s.Src == k.c }

// toBackend is the frame XLB sends the backend for the client's s: from
// the pair's SNAT address and port, its TSval raised by the pair's
// offset on a SYN or once timestamps are negotiated (bpf/tsopt.h).
func (k *tcpConn) toBackend(s dt.Segment) []byte {
	o := k.e.ToBackend(s, k.p.Backend(), k.p.SNATPort())
	o.Src = k.p.Fwd.NewSrc()
	if s.Flags&dt.SYN != 0 || k.negotiated() {
		o = o.ShiftTimestamps(k.p.Fwd.TsOff, true)
	}
	return o.Frame()
}

// toClient is the frame XLB sends the client for the backend's s: its
// TSecr lowered by the pair's offset on a SYN-ACK or once timestamps are
// negotiated.
func (k *tcpConn) toClient(s dt.Segment) []byte {
	o := k.e.ToClient(s, k.c, 80)
	if s.Flags&dt.SYN != 0 || k.negotiated() {
		o = o.ShiftTimestamps(k.p.Rev.TsOff, false)
	}
	return o.Frame()
}

// negotiated reports whether the pair (as the map holds it now, else as
// it was created) has its timestamps rewritten (FlagTS).
func (k *tcpConn) negotiated() bool {
	p, ok := k.e.LookupPair(k.t, k.c, 80)
	if !ok || p.Fwd.Generation != k.p.Fwd.Generation {
		p = k.p
	}
	return p.Fwd.Flags&dataplane.FlagTS != 0
}

// ingress is the interface s arrives on.
func (k *tcpConn) ingress(s dt.Segment) dt.Iface {
	if k.fromClient(s) {
		return k.e.Front
	}
	return k.e.BackendIface()
}

// forward sends s and expects it rewritten toward the other side.
func (k *tcpConn) forward(what string, s dt.Segment, moves counted) []byte {
	k.t.Helper()
	want := k.toClient(s)
	if k.fromClient(s) {
		want = k.toBackend(s)
	}
	return step(k.t, k.e, what, s.Frame(), k.ingress(s), forwardAction(k.e), want, moves)
}

// drop sends s and expects it dropped.
func (k *tcpConn) drop(what string, s dt.Segment, moves counted) {
	k.t.Helper()
	step(k.t, k.e, what, s.Frame(), k.ingress(s), dt.XDPDrop, nil, moves)
}

// now reads the pair as the map holds it now; it must still be linked.
func (k *tcpConn) now() dt.Pair {
	k.t.Helper()
	return k.e.MustPair(k.t, k.c, 80)
}

// handshake completes the connection: the backend's SYN-ACK (options
// synAckOpts) and the client's ACK advertising clientWin.
func (k *tcpConn) handshake(synAckOpts []layers.TCPOption, clientWin uint16) {
	k.t.Helper()
	sa := k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil)
	sa.Options = synAckOpts
	k.forward("SYN-ACK", sa, counted{})
	k.forward("client ACK", k.client(dt.ACK, isnC+1, isnB+1, clientWin, nil), counted{})
}

// wantFlags checks the forward entry's flags: all of set, none of clear.
func (k *tcpConn) wantFlags(set, clear uint32) dt.Pair {
	k.t.Helper()
	p := k.now()
	if p.Fwd.Flags&set != set || p.Fwd.Flags&clear != 0 {
		k.t.Fatalf("forward flags %#x, want %#x set and %#x clear", p.Fwd.Flags, set, clear)
	}
	return p
}

// TCP options as Linux sends them. wscale < 0 leaves the window scale
// option out.
func synOptions(wscale int) []layers.TCPOption {
	o := []layers.TCPOption{
		{OptionType: layers.TCPOptionKindMSS, OptionData: []byte{0x05, 0xb4}},
		{OptionType: layers.TCPOptionKindSACKPermitted},
		{OptionType: layers.TCPOptionKindTimestamps, OptionData: []byte{0, 0, 0x30, 0x39, 0, 0, 0, 0}},
	}
	if wscale >= 0 {
		o = append(o, layers.TCPOption{OptionType: layers.TCPOptionKindNop},
			layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionData: []byte{byte(wscale)}})
	}
	return o
}

// synAckOptions are a SYN-ACK's options without timestamps, the window
// scale (if any) last after NOP padding.
func synAckOptions(wscale int) []layers.TCPOption {
	o := []layers.TCPOption{
		{OptionType: layers.TCPOptionKindMSS, OptionData: []byte{0x05, 0xb4}},
		{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
		{OptionType: layers.TCPOptionKindSACKPermitted},
	}
	if wscale >= 0 {
		o = append(o, layers.TCPOption{OptionType: layers.TCPOptionKindNop},
			layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionData: []byte{byte(wscale)}})
	}
	return o
}

// reapClock is a reaper clock reading now with every rule's duration.
func reapClock(now dataplane.Jiffies) dataplane.ReapClock {
	return dataplane.ReapClock{Now: now, TimeWait: timeWait, OrphanTTL: orphanTTL, EmbryonicTTL: embryonicTTL, SNATHold: snatHold}
}

// embryonicTTL and snatHold are the reaper clock's embryonic TTL and SNAT
// hold (timeWait and orphanTTL are in reap_test.go). The hold is longer
// than the time-wait, as maintenance.SNATHold is.
const (
	embryonicTTL = dataplane.Jiffies(300)
	snatHold     = dataplane.Jiffies(700)
)

// waitClock returns once the data path's clock reads at least j, polling;
// it fails the test when the clock does not get there within a generous
// bound (j is never more than a few hundred ticks away).
func waitClock(t *testing.T, e *dt.Env, j dataplane.Jiffies) dataplane.Jiffies {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n := e.Now(t); n >= j {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("data path clock did not reach %d (now %d)", j, e.Now(t))
	return 0
}

// closeEvents starts reading the data path's close events, whichever path
// the host allows (events_test.go checks both paths).
func closeEvents(t *testing.T, e *dt.Env) *dataplane.CloseEvents {
	t.Helper()
	ev, err := e.DP.OpenCloseEvents()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	return ev
}

// takenPorts is the SNAT ports held taken toward backend id (the first SNAT
// address).
func takenPorts(t *testing.T, e *dt.Env, id int) []uint16 {
	t.Helper()
	ports, err := e.DP.FixtureTakenSNATPorts(uint32(id), 0)
	if err != nil {
		t.Fatalf("SNAT bitmap of backend %d: %v", id, err)
	}
	return ports
}

// wantTaken checks the SNAT ports held taken toward backend id.
func wantTaken(t *testing.T, e *dt.Env, id int, want ...uint16) {
	t.Helper()
	if got := takenPorts(t, e, id); !slices.Equal(got, want) {
		t.Fatalf("SNAT ports taken toward backend %d: %v, want %v", id, got, want)
	}
}

// flowState is an entry without its last-seen time and tracking: what a
// frame that only passes through must leave alone.
type flowState struct {
	Generation uint32
	Flags      uint32
	Nexthop    uint32
}

// flowStates reads the whole flow map as flowStates.
func flowStates(t *testing.T, e *dt.Env) map[dataplane.FlowKey]flowState {
	t.Helper()
	out := map[dataplane.FlowKey]flowState{}
	for k, v := range e.Flows(t) {
		out[k] = flowState{Generation: v.Generation, Flags: v.Flags, Nexthop: v.Nexthop}
	}
	return out
}
