package dataplane_test

import (
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// ICMP fixtures (issue 13 "ICMP through the NAT"; plan13 data path rule
// 5): a destination-unreachable (fragmentation needed included) or
// time-exceeded message about a packet XLB sent for a pair, from that
// packet's receiver or a router on its way, is translated for the other
// side of the pair and sent the way the pair's packets go. The outer
// source becomes XLB's address on that side (the listen address toward the
// client, the SNAT address toward the backend), the outer destination that
// side's peer, the TTL one less; the quoted packet becomes the one the
// other side sent: its addresses and ports, its IPv4 checksum and, when
// the quote reaches it, its TCP checksum; the ICMP checksum follows. Each
// expected frame is built whole by gopacket, so a byte-for-byte match
// checks every checksum; each is also recomputed on its own with gopacket
// (verifyICMPChecksums). All other ICMP passes untouched.

// icmpRow is one translated ICMP error.
type icmpRow struct {
	Name   string
	TwoArm bool
	From   sender // the side the ICMP arrives from: about a packet XLB sent to that side
	Router bool   // sent by a router on that side (else by the backend or client itself)
	Type   uint8
	Code   uint8
	Rest   uint32 // the next-hop MTU of a fragmentation-needed message
	Bulk   bool   // the quoted packet carries 1400 bytes of data (else a short request)
	Quote  int    // bytes of the packet quoted; 0: all of it
}

// linuxQuote is what Linux quotes of a datagram in an ICMP error: the
// message fills at most 576 bytes (RFC 1812 §4.3.2.3).
const linuxQuote = 576 - 20 - 8

var icmpFixtures = []icmpRow{
	// From the backend's side, toward the client.
	{Name: "fragmentation needed from a backend-side router, 548 bytes of client data quoted, reaches the client",
		From: backendSide, Router: true, Type: icmpUnreachable, Code: codeFragNeeded, Rest: 1280, Bulk: true, Quote: linuxQuote},
	{Name: "port unreachable from the backend, the client's segment quoted whole, reaches the client",
		From: backendSide, Type: icmpUnreachable, Code: codePortUnreach},
	{Name: "time exceeded from a backend-side router, RFC 792 quote (IP header and 8 bytes), reaches the client",
		From: backendSide, Router: true, Type: icmpTimeExceeded, Code: codeTTLInTransit, Quote: 20 + 8},
	{Name: "fragmentation needed quoting the TCP header up to its checksum reaches the client",
		From: backendSide, Router: true, Type: icmpUnreachable, Code: codeFragNeeded, Rest: 1400, Bulk: true, Quote: 20 + 18},
	// From the client's side, toward the backend.
	{Name: "fragmentation needed from a client-side router, 548 bytes of backend data quoted, reaches the backend",
		From: clientSide, Router: true, Type: icmpUnreachable, Code: codeFragNeeded, Rest: 1280, Bulk: true, Quote: linuxQuote},
	{Name: "administratively prohibited from the client, the backend's segment quoted whole, reaches the backend",
		From: clientSide, Type: icmpUnreachable, Code: codeAdminForbidden},
	{Name: "time exceeded from a client-side router, quoted whole, reaches the backend",
		From: clientSide, Router: true, Type: icmpTimeExceeded, Code: codeTTLInTransit},
	// Two-arm: the other interface, by redirect.
	{Name: "two-arm: fragmentation needed from a backend-side router is redirected to the client",
		TwoArm: true, From: backendSide, Router: true, Type: icmpUnreachable, Code: codeFragNeeded, Rest: 1280, Bulk: true, Quote: linuxQuote},
	{Name: "two-arm: time exceeded from a client-side router is redirected to the backend",
		TwoArm: true, From: clientSide, Router: true, Type: icmpTimeExceeded, Code: codeTTLInTransit},
}

func TestICMPFixtures(t *testing.T) {
	for _, r := range icmpFixtures {
		t.Run(r.Name, func(t *testing.T) { r.run(t) })
	}
}

// Routers on either side of XLB (documentation addresses no fixture
// interface holds).
var (
	frontRouter = testnet.RouterIP
	backRouter  = netip.MustParseAddr("198.51.100.254")
)

func (r icmpRow) run(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{TwoArm: r.TwoArm})
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(6), 1000)
	data := []byte("GET /quoted HTTP/1.1\r\n\r\n")
	if r.Bulk {
		data = bulk
	}

	// The packet XLB sends for the pair, which the ICMP quotes, and the
	// packet its sender sent (what the translated quote must read).
	var orig dt.Segment
	var in, out icmpMsg
	if r.From == backendSide {
		orig = k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, data)
		in = icmpMsg{Src: k.p.Backend().Addr(), Dst: e.SNAT, DstMAC: e.BackendIface().MAC}
		if r.Router {
			in.Src = frontRouter
			if r.TwoArm {
				in.Src = backRouter
			}
		}
		out = icmpMsg{SrcMAC: e.Front.MAC, DstMAC: dt.MAC(dt.ClientIP), Src: dt.ListenIP, Dst: dt.ClientIP}
	} else {
		orig = k.backend(dt.ACK|dt.PSH, isnB+1, isnC+1, 2000, data)
		in = icmpMsg{Src: dt.ClientIP, Dst: dt.ListenIP, DstMAC: e.Front.MAC}
		if r.Router {
			in.Src = frontRouter
		}
		out = icmpMsg{SrcMAC: e.BackendIface().MAC, DstMAC: dt.MAC(k.p.Backend().Addr()), Src: e.SNAT, Dst: k.p.Backend().Addr()}
	}
	sentFrame := k.forward("the quoted packet", orig, counted{})
	sent := orig
	sent.TTL = 63 // as XLB sent it; the translated quote keeps it
	in.SrcMAC, in.TTL, in.Type, in.Code, in.Rest = dt.MAC(in.Src), 64, r.Type, r.Code, r.Rest
	in.Quote = quoted(dt.Unpadded(sentFrame)[14:], r.Quote)
	out.TTL, out.Type, out.Code, out.Rest = 63, r.Type, r.Code, r.Rest
	out.Quote = quoted(datagram(sent), r.Quote)

	ingress, moves := e.BackendIface(), counted{ICMPToClient: 1}
	if r.From == clientSide {
		ingress, moves = e.Front, counted{ICMPToBackend: 1}
	}
	flows := flowStates(t, e)
	got := step(t, e, "ICMP", in.frame(), ingress, forwardAction(e), out.frame(), moves)
	checked, err := verifyICMPChecksums(got, datagram(sent))
	if err != nil {
		t.Fatalf("gopacket checksums of the translated frame: %v", err)
	}
	if reached := r.Quote == 0 || r.Quote >= 20+18; reached != slices.Contains(checked, "quoted TCP") {
		t.Fatalf("checksums verified %v; the quote reaches the TCP checksum: %v", checked, reached)
	}
	t.Logf("checksums verified by gopacket: %v", checked)
	if now := flowStates(t, e); !maps.Equal(now, flows) {
		t.Fatalf("flow map after the ICMP %v, before %v", now, flows)
	}
}

// ICMP that is not an error about a pair passes to the host untouched and
// changes nothing; one about a pair that would expire here (TTL 1) is
// dropped and counted like any balanced packet.
func TestICMPPassesUntouched(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(6), 1000)
	toBackend := k.forward("client data", k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload), counted{})
	toClient := k.forward("backend data", k.backend(dt.ACK|dt.PSH, isnB+1, isnC+1+uint32(len(payload)), 2000, payload), counted{})
	quoteB := dt.Unpadded(toBackend)[14:] // the pair's packet to the backend
	quoteC := dt.Unpadded(toClient)[14:]  // the pair's packet to the client
	backendIP := k.p.Backend().Addr()
	fromBackend := func(typ, code uint8, quote []byte) icmpMsg {
		return icmpMsg{SrcMAC: dt.MAC(backendIP), DstMAC: e.BackendIface().MAC, Src: backendIP, Dst: e.SNAT, TTL: 64,
			Type: typ, Code: code, Quote: quote}
	}
	fromClient := func(typ, code uint8, quote []byte) icmpMsg {
		return icmpMsg{SrcMAC: dt.MAC(dt.ClientIP), DstMAC: e.Front.MAC, Src: dt.ClientIP, Dst: dt.ListenIP, TTL: 64,
			Type: typ, Code: code, Quote: quote}
	}
	// a datagram of the pair's addresses and ports but another protocol
	udp := k.e.ToBackend(k.client(0, 0, 0, 0, payload), k.p.Backend(), k.p.SNATPort())
	udp.Proto = dt.UDP
	// datagrams of no pair: another SNAT port, another client port
	stray := k.e.ToBackend(k.client(dt.ACK, isnC+1, isnB+1, 1000, nil), k.p.Backend(), k.p.SNATPort()+5)
	strayC := k.e.ToClient(k.backend(dt.ACK, isnB+1, isnC+1, 2000, nil), dt.Client(33999), 80)
	elsewhere := fromBackend(icmpUnreachable, codeFragNeeded, quoteB)
	elsewhere.Dst = netip.MustParseAddr("192.0.2.99")
	echo := e.FromClient(cli, 80, 0, 0, 0, nil)
	echo.Proto = dt.ICMP

	untouched := []struct {
		name  string
		frame []byte
		in    dt.Iface
	}{
		{"destination unreachable about an unknown SNAT port", fromBackend(icmpUnreachable, codePortUnreach, datagram(stray)).frame(), e.Front},
		{"time exceeded about a packet to an unknown client port", fromClient(icmpTimeExceeded, codeTTLInTransit, datagram(strayC)).frame(), e.Front},
		{"parameter problem about the pair's packet", fromBackend(icmpParamProblem, 0, quoteB).frame(), e.Front},
		{"redirect about the pair's packet", fromClient(icmpRedirect, codeHostUnreach, quoteC).frame(), e.Front},
		{"echo request to the listen address", echo.Frame(), e.Front},
		{"echo reply to the listen address", fromClient(icmpEchoReply, 0, []byte("ping payload")).frame(), e.Front},
		{"destination unreachable quoting only 4 bytes of TCP", fromBackend(icmpUnreachable, codeFragNeeded, quoteB[:24]).frame(), e.Front},
		{"destination unreachable about a UDP datagram with the pair's ports", fromBackend(icmpUnreachable, codePortUnreach, datagram(udp)).frame(), e.Front},
		{"destination unreachable about the pair addressed to another host", elsewhere.frame(), e.Front},
	}
	flows := flowStates(t, e)
	for _, u := range untouched {
		step(t, e, u.name, u.frame, u.in, dt.XDPPass, u.frame, counted{})
		if now := flowStates(t, e); !maps.Equal(now, flows) {
			t.Fatalf("%s: flow map %v, before %v", u.name, now, flows)
		}
	}

	for _, m := range []icmpMsg{fromBackend(icmpUnreachable, codeFragNeeded, quoteB), fromClient(icmpTimeExceeded, codeTTLInTransit, quoteC)} {
		m.TTL = 1
		step(t, e, "ICMP error about the pair with TTL 1", m.frame(), e.Front, dt.XDPDrop, nil, counted{TTLExceeded: 1})
	}
}
