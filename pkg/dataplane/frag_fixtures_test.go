package dataplane_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Fragment and IPv4 option fixtures (issue 27 finding 6: "Fragments or IP
// options on a live pair reset it"). A datagram's first fragment carries
// the TCP header: on a known pair it is rewritten as any segment (the TCP
// checksum's update is right for the whole datagram) and its ports are
// remembered; its later fragments follow it, their IPv4 header rewritten
// (bpf/frag.h). A fragment of no remembered datagram or of no pair passes
// to the kernel untouched and is counted; a fragment never creates a
// pair. A segment of a pair with IPv4 options is rewritten with its
// options copied unchanged. Expected frames are built by gopacket and cut
// into fragments here (fragments, as a router cuts them); every checksum
// is verified on its own, the TCP checksum over the reassembled datagram.

// fragSize is the payload bytes per fragment the fixtures cut datagrams
// into (a multiple of 8: RFC 791 fragment offsets count 8-byte units).
const fragSize = 512

// fragments cuts the IPv4 datagram of an Ethernet frame (IPv4 header
// without options) into fragments of at most size payload bytes, as a
// router does (RFC 791 §3.2): the header copied, its total length,
// more-fragments flag and fragment offset set, don't-fragment cleared and
// its checksum computed again.
func fragments(frame []byte, size int) [][]byte {
	f := dt.Unpadded(frame)
	eth, ip := f[:14], f[14:]
	if ip[0]&0x0f != 5 {
		panic("fragments: an IPv4 header with options")
	}
	payload := ip[20:]
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := min(off+size, len(payload))
		h := bytes.Clone(ip[:20])
		binary.BigEndian.PutUint16(h[2:4], uint16(20+end-off))
		fo := uint16(off / 8)
		if end < len(payload) {
			fo |= 0x2000 // more fragments
		}
		binary.BigEndian.PutUint16(h[6:8], fo)
		binary.BigEndian.PutUint16(h[10:12], 0)
		binary.BigEndian.PutUint16(h[10:12], ^internetSum(h))
		out = append(out, slices2(eth, h, payload[off:end]))
	}
	return out
}

// reassemble joins fragments (in order, one datagram) into the frame of
// the whole datagram: the first fragment's Ethernet and IPv4 header, its
// total length and fragment field set for the whole, its checksum
// computed again.
func reassemble(frags [][]byte) []byte {
	first := dt.Unpadded(frags[0])
	h := bytes.Clone(first[14:34])
	var payload []byte
	for _, f := range frags {
		f = dt.Unpadded(f)
		payload = append(payload, f[34:]...)
	}
	binary.BigEndian.PutUint16(h[2:4], uint16(20+len(payload)))
	binary.BigEndian.PutUint16(h[6:8], 0)
	binary.BigEndian.PutUint16(h[10:12], 0)
	binary.BigEndian.PutUint16(h[10:12], ^internetSum(h))
	return slices2(first[:14], h, payload)
}

// internetSum is the folded RFC 1071 one's complement sum of b (even length).
func internetSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func slices2(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// sendFragments sends the fragments of s and expects each forwarded as the
// matching fragment of want (the whole datagram XLB must send), counted;
// the reassembled output must verify (IPv4 and TCP checksums) and match
// want's segment.
func (k *tcpConn) sendFragments(what string, s dt.Segment, want []byte) {
	k.t.Helper()
	in, exp := fragments(s.Frame(), fragSize), fragments(want, fragSize)
	if len(in) < 2 {
		k.t.Fatalf("%s: %d fragments", what, len(in))
	}
	var got [][]byte
	for i := range in {
		got = append(got, step(k.t, k.e, fmt.Sprintf("%s: fragment %d of %d", what, i+1, len(in)), in[i], k.ingress(s),
			forwardAction(k.e), exp[i], counted{FragsForwarded: 1}))
	}
	whole := reassemble(got)
	if err := dt.VerifyChecksums(whole); err != nil {
		k.t.Fatalf("%s: the reassembled datagram: %v", what, err)
	}
	if w := dt.Unpadded(want); !bytes.Equal(whole[34:], w[34:]) {
		k.t.Fatalf("%s: the reassembled segment differs from the one XLB sends unfragmented", what)
	}
}

// A transfer whose segments arrive fragmented, both ways, on an
// established pair: every fragment is forwarded, the reassembled datagrams
// verify, and the pair stays as it was (never reset), ready for the next
// unfragmented segment.
func TestFragmentsFollowTheirPair(t *testing.T) {
	for _, twoArm := range []bool{false, true} {
		t.Run(fmt.Sprintf("two-arm %v", twoArm), func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{TwoArm: twoArm})
			k := dial(t, e, 33000, synOptions(7))
			k.handshake(synAckOptions(6), 1000)
			before := k.now()

			c := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, bulk[:1200])
			c.ID = 0x1234
			k.sendFragments("client data", c, k.toBackend(c))
			b := k.backend(dt.ACK|dt.PSH, isnB+1, isnC+1+1200, 2000, bulk[:1400])
			b.ID = 0x4321
			k.sendFragments("backend data", b, k.toClient(b))
			// the same IPv4 identification again, a later datagram: its own first fragment leads
			c2 := k.client(dt.ACK|dt.PSH, isnC+1+1200, isnB+1+1400, 1000, bulk[100:1100])
			c2.ID = 0x1234
			k.sendFragments("client data, the identification reused", c2, k.toBackend(c2))

			after := k.wantFlags(est, closedF|closedR|finC|finB|rstC|rstB)
			if after.Fwd.Generation != before.Fwd.Generation || after.Rev.Flags != before.Rev.Flags {
				t.Fatalf("pair after the fragments: generation %d reverse flags %#x, was %d %#x",
					after.Fwd.Generation, after.Rev.Flags, before.Fwd.Generation, before.Rev.Flags)
			}
			k.forward("unfragmented client ACK", k.client(dt.ACK, isnC+1+2200, isnB+1+1400, 1000, nil), counted{})
		})
	}
}

// Fragments XLB cannot place pass to the kernel untouched and are counted;
// those of a remembered datagram that would expire here are dropped and
// counted like any balanced packet. None changes a pair or creates one.
func TestFragmentsPassUnlessTheyFollow(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(6), 1000)
	flows := flowStates(t, e)
	pass := func(what string, f []byte, moves counted) {
		t.Helper()
		step(t, e, what, f, e.Front, dt.XDPPass, f, moves)
		if now := flowStates(t, e); !maps.Equal(now, flows) {
			t.Fatalf("%s: flow map %v, before %v", what, now, flows)
		}
	}
	data := func(id uint16) dt.Segment {
		s := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, bulk[:1200])
		s.ID = id
		return s
	}

	// A later fragment before its first one: no datagram to follow yet.
	early := data(1)
	in, want := fragments(early.Frame(), fragSize), fragments(k.toBackend(early), fragSize)
	pass("later fragment before its first", in[1], counted{FragsPassed: 1})
	step(t, e, "the first fragment", in[0], e.Front, dt.XDPTX, want[0], counted{FragsForwarded: 1})
	step(t, e, "the last fragment", in[2], e.Front, dt.XDPTX, want[2], counted{FragsForwarded: 1})

	// A datagram remembered longer than XLB_FRAG_TTL_MS ago.
	late := data(2)
	in, want = fragments(late.Frame(), fragSize), fragments(k.toBackend(late), fragSize)
	step(t, e, "the first fragment", in[0], e.Front, dt.XDPTX, want[0], counted{FragsForwarded: 1})
	if n, err := e.DP.FixtureAgeFragments(); err != nil || n != 2 {
		t.Fatalf("aged %d remembered datagrams (%v), want 2", n, err)
	}
	pass("later fragment after its datagram expired", in[1], counted{FragsPassed: 1})

	// Fragments of no pair, first and later; a SYN's first fragment.
	remembered, err := e.DP.FixtureFragments()
	if err != nil {
		t.Fatal(err)
	}
	stray := e.FromClient(dt.Client(33999), 80, dt.ACK|dt.PSH, isnC+1, isnB+1, bulk[:1200])
	stray.ID = 3
	sf := fragments(stray.Frame(), fragSize)
	pass("first fragment of no pair", sf[0], counted{FragsPassed: 1})
	pass("its later fragment", sf[1], counted{FragsPassed: 1})
	syn := e.FromClient(dt.Client(33998), 80, dt.SYN, isnC, 0, bulk[:600])
	syn.ID = 4
	pass("a SYN's first fragment", fragments(syn.Frame(), fragSize)[0], counted{FragsPassed: 1})
	retx := k.client(dt.SYN, isnC, 0, synWindow, bulk[:600])
	retx.ID = 5
	step(t, e, "the pair's own SYN again, fragmented: a retransmission on the live pair", fragments(retx.Frame(), fragSize)[0],
		e.Front, dt.XDPTX, nil, counted{SYNReused: 1, FragsForwarded: 1})
	if n, err := e.DP.FixtureFragments(); err != nil || n != remembered+1 {
		t.Fatalf("the fragment map holds %d datagrams (%v), want %d: only a forwarded first fragment is remembered", n, err, remembered+1)
	}
	// Fragments addressed to no address of XLB's are the host's, uncounted.
	other := data(6)
	other.Dst = netip.AddrPortFrom(netip.MustParseAddr("192.0.2.99"), 80)
	of := fragments(other.Frame(), fragSize)
	pass("first fragment to another address", of[0], counted{})
	pass("later fragment to another address", of[1], counted{})

	// A later fragment of a remembered datagram with TTL 1.
	ttl := data(7)
	in = fragments(ttl.Frame(), fragSize)
	step(t, e, "the first fragment", in[0], e.Front, dt.XDPTX, nil, counted{FragsForwarded: 1})
	expiring := bytes.Clone(in[1])
	expiring[14+8] = 1
	binary.BigEndian.PutUint16(expiring[14+10:], 0)
	binary.BigEndian.PutUint16(expiring[14+10:], ^internetSum(expiring[14:34]))
	step(t, e, "its later fragment with TTL 1", expiring, e.Front, dt.XDPDrop, nil, counted{TTLExceeded: 1})

	k.wantFlags(est, closedF|closedR|finC|finB|rstC|rstB)
}

// IPv4 options: four bytes of NOPs and an end of list, and a timestamp
// option (RFC 791 "Internet Timestamp": pointer 5, two empty slots).
var (
	nopOptions = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
	tsOptions  = []layers.IPv4Option{{OptionType: 68, OptionLength: 12, OptionData: []byte{5, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
)

// A connection whose every segment carries IPv4 options, both ways: the
// SYN creates the pair (its window scale read behind the options), every
// segment is forwarded with its options as they came and every checksum
// right, and the close goes as without options.
func TestIPOptionsOnAPair(t *testing.T) {
	for _, twoArm := range []bool{false, true} {
		t.Run(fmt.Sprintf("two-arm %v", twoArm), func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{TwoArm: twoArm})
			k := &tcpConn{t: t, e: e, c: dt.Client(33000)}
			send := func(what string, s dt.Segment, opts []layers.IPv4Option, moves counted) {
				t.Helper()
				s.IPOptions = opts
				var want []byte
				if k.fromClient(s) {
					want = k.toBackend(s)
				} else {
					want = k.toClient(s)
				}
				got := step(t, e, what, s.Frame(), k.ingress(s), forwardAction(e), want, moves)
				if err := dt.VerifyChecksums(got); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				ihl := int(got[14]&0x0f) * 4
				if ihl == 20 || !bytes.Equal(got[34:14+ihl], s.Frame()[34:14+ihl]) {
					t.Fatalf("%s: options % x, sent % x", what, got[34:14+ihl], s.Frame()[34:14+ihl])
				}
			}

			syn := k.client(dt.SYN, isnC, 0, synWindow, nil)
			syn.Options, syn.IPOptions = synOptions(7), tsOptions
			got := step(t, e, "SYN with IPv4 options", syn.Frame(), e.Front, forwardAction(e), nil,
				counted{PairsCreated: 1, IPOptionsForwarded: 1})
			k.p = e.MustPair(t, k.c, 80)
			if d := frameDiff(got, k.toBackend(syn)); d != "" {
				t.Fatalf("SYN: output frame differs:\n%s", d)
			}
			if k.p.Fwd.Wscale != 7 {
				t.Fatalf("the SYN's window scale read as %d, want 7", k.p.Fwd.Wscale)
			}
			sa := k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil)
			sa.Options = synAckOptions(6)
			send("SYN-ACK with IPv4 options", sa, nopOptions, counted{IPOptionsForwarded: 1})
			if w := k.now().Rev.Wscale; w != 6 {
				t.Fatalf("the SYN-ACK's window scale read as %d, want 6", w)
			}
			send("client ACK", k.client(dt.ACK, isnC+1, isnB+1, 1000, nil), nopOptions, counted{IPOptionsForwarded: 1})
			k.wantFlags(est, 0)
			send("client data", k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, bulk), tsOptions, counted{IPOptionsForwarded: 1})
			send("backend data", k.backend(dt.ACK|dt.PSH, isnB+1, isnC+1+1400, 2000, bulk), nopOptions, counted{IPOptionsForwarded: 1})
			send("client FIN", k.client(dt.FIN|dt.ACK, isnC+1+1400, isnB+1+1400, 1000, nil), tsOptions, counted{IPOptionsForwarded: 1})
			send("backend FIN", k.backend(dt.FIN|dt.ACK, isnB+1+1400, isnC+2+1400, 2000, nil), nopOptions,
				counted{IPOptionsForwarded: 1, ClosedClientFIN: 1})
			k.wantFlags(est|finC|finB|closedF, closedR)
		})
	}
}
