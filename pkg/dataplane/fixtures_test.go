package dataplane_test

import (
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Packet fixtures for new connections and forwarding (seed "New
// connections"): a client SYN opens a pair, embryonic until the client
// ACKs the backend's SYN-ACK (DESIGN §6b), both directions of a pair are
// rewritten and sent back out, everything XLB does not own passes to the
// stack untouched, and a SYN that finds no room is answered with a RST.
// The row words are in fixture_table_test.go.
var packetFixtures = []fixture{
	// A pair opens and forwards both ways.
	{Name: "first SYN creates a pair and goes to backend 1 from the SNAT address",
		In: syn, Action: dt.XDPTX, Out: toB1,
		Counted: counted{PairsCreated: 1}, Entries: 2, Pair: pair{Is: opened}},
	{Name: "backend SYN-ACK to the SNAT port goes back to the client from listen:80",
		Given: embryonic, In: synAck, Action: dt.XDPTX, Out: toCli,
		Entries: 2, Pair: pair{Is: kept, Flags: dataplane.FlagSYNACK, Rev: dataplane.FlagACKSeen}},
	{Name: "client ACK of the SYN-ACK establishes the pair",
		Given: []seg{syn, synAck}, In: handshakeACK, Action: dt.XDPTX, Out: toB1,
		Entries: 2, Pair: openPair},
	{Name: "client data after the handshake is rewritten with its payload",
		Given: established, In: seg{Flags: dt.ACK | dt.PSH, Seq: 1001, Ack: 5001, Data: payload}, Action: dt.XDPTX, Out: toB1,
		Entries: 2, Pair: openPair},
	{Name: "retransmitted SYN reuses backend and SNAT port and adds no entry",
		Given: embryonic, In: syn, Action: dt.XDPTX, Out: toB1,
		Counted: counted{SYNReused: 1}, Entries: 2, Pair: embryonicPair},
	// round robin: the second pair goes to backend 2, on remote port 8443
	{Name: "same client address and port to a second local port is a distinct pair",
		Given: established, In: seg{LPort: 443, Flags: dt.SYN, Seq: 1000, MSS: true},
		Action: dt.XDPTX, Out: out{To: toBackend, Backend: 1, Port: 8443, SNAT: 40000},
		Counted: counted{PairsCreated: 1}, Entries: 4, Pair: openPair},

	// Only a client SYN opens a pair.
	{Name: "client SYN|ACK without a pair passes and creates nothing",
		In: seg{Flags: dt.SYN | dt.ACK, Seq: 1000, Ack: 1}, Action: dt.XDPPass},
	{Name: "bare ACK without a pair passes and creates nothing",
		In: seg{Flags: dt.ACK, Seq: 1001, Ack: 1}, Action: dt.XDPPass},

	// Frames XLB does not own pass untouched.
	{Name: "ARP passes", In: seg{Proto: dt.ARP}, Action: dt.XDPPass},
	{Name: "IPv6 TCP SYN passes", In: seg{IPv6: true, Flags: dt.SYN, Seq: 1000}, Action: dt.XDPPass},
	{Name: "UDP to listen:80 passes", In: seg{Proto: dt.UDP, Data: payload}, Action: dt.XDPPass},
	{Name: "ICMP echo passes", In: seg{Proto: dt.ICMP}, Action: dt.XDPPass},
	{Name: "SYN with IPv4 options creates a pair and goes to backend 1, the options copied",
		In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, IPOptions: true}, Action: dt.XDPTX, Out: toB1,
		Counted: counted{PairsCreated: 1, IPOptionsForwarded: 1}, Entries: 2, Pair: pair{Is: opened}},
	{Name: "SYN in a first fragment (MF) passes, counted: a fragment never creates a pair",
		In: seg{Flags: dt.SYN, Seq: 1000, MF: true, Data: payload}, Action: dt.XDPPass, Counted: counted{FragsPassed: 1}},
	{Name: "later fragment of no datagram remembered passes, counted",
		In: seg{Flags: dt.SYN, Seq: 1000, FragOffset: 8}, Action: dt.XDPPass, Counted: counted{FragsPassed: 1}},
	{Name: "truncated TCP header passes", In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, CutTo: 14 + 20 + 12}, Action: dt.XDPPass},
	{Name: "frame shorter than its IPv4 total length passes", In: seg{Flags: dt.SYN, Seq: 1000, Data: payload, CutTail: 4}, Action: dt.XDPPass},
	{Name: "TCP data offset beyond the frame passes", In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, DataOffset: 15}, Action: dt.XDPPass},
	{Name: "bare Ethernet header of type IPv4 passes", In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, CutTo: 14}, Action: dt.XDPPass},
	{Name: "other destination port passes", In: seg{LPort: 22, Flags: dt.SYN, Seq: 1000, MSS: true}, Action: dt.XDPPass},
	{Name: "other destination address passes",
		In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, Dst: netip.MustParseAddr("192.0.2.99")}, Action: dt.XDPPass},
	{Name: "SNAT-range port without an entry passes",
		In: seg{From: backend, SNAT: 40005, Flags: dt.ACK, Seq: 1, Ack: 1}, Action: dt.XDPPass},
	{Name: "TTL 1 on a pair is dropped and counted, never forwarded",
		Given: established, In: seg{Flags: dt.ACK, Seq: 1001, Ack: 5001, TTL: 1}, Action: dt.XDPDrop,
		Counted: counted{TTLExceeded: 1}, Entries: 2, Pair: openPair},

	// No room for a pair: the SYN is refused with a RST|ACK.
	// Two ports, one backend: two pairs fit, the third SYN is refused.
	{Name: "SNAT exhaustion answers the SYN with RST|ACK via XDP_TX",
		Env:   dt.Options{SNATPortLo: 40000, SNATPortHi: 40001, Backends: dt.OneArmBackends[:1]},
		Given: []seg{syn, {CPort: 33001, Flags: dt.SYN, Seq: 1000, MSS: true}},
		In:    seg{CPort: 33002, Flags: dt.SYN, Seq: 1000, MSS: true}, Action: dt.XDPTX, Out: out{To: reset, Seq: 0, Ack: 1001},
		Counted: counted{SNATExhausted: 1}, Entries: 4, Pair: embryonicPair},
	{Name: "full flow table answers the SYN with RST|ACK",
		Env:   dt.Options{MaxConnections: 1},
		Given: established,
		In:    seg{CPort: 33001, Flags: dt.SYN, Seq: 1000, MSS: true}, Action: dt.XDPTX, Out: out{To: reset, Seq: 0, Ack: 1001},
		Counted: counted{TableFull: 1}, Entries: 2, Pair: openPair},

	// Two-arm: backends sit behind the second interface.
	{Name: "two-arm SYN is redirected to the backend-side interface",
		Env: dt.Options{TwoArm: true}, In: syn, Action: dt.XDPRedirect, Out: toB1,
		Counted: counted{PairsCreated: 1}, Entries: 2, Pair: pair{Is: opened}},
	{Name: "two-arm backend reply is redirected to the client-side interface",
		Env: dt.Options{TwoArm: true}, Given: embryonic, In: synAck, Action: dt.XDPRedirect, Out: toCli,
		Entries: 2, Pair: pair{Is: kept, Flags: dataplane.FlagSYNACK, Rev: dataplane.FlagACKSeen}},
}

func TestPacketFixtures(t *testing.T) { runFixtures(t, packetFixtures) }
