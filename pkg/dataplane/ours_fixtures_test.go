package dataplane_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Frames for another host (bpf/ours.h): on a shared L2 segment a switch
// or bridge floods unknown-unicast frames to every port, so XLB's
// interface also receives frames addressed to other hosts' MACs, the
// VIP's among them. The data path balances only frames addressed to the
// ingress interface's own MAC; any other frame it would have balanced
// passes to the kernel untouched (which drops it as PACKET_OTHERHOST),
// counted as NotOurs. It never opens a pair, answers with a RST or
// forwards on an existing pair for such a frame.

var (
	// otherHostMAC is another host's interface on the segment (the
	// lab's MAC of 192.0.2.11: another XLB host of the fleet).
	otherHostMAC = dt.MAC(netip.MustParseAddr("192.0.2.11"))
	// ipv4MulticastMAC is the group address of 224.0.0.1 (RFC 1112 §6.4).
	ipv4MulticastMAC = net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}
	// notOurs is the counter move of a frame for another host.
	notOurs = counted{NotOurs: 1}
)

var oursFixtures = []fixture{
	{Name: "SYN to the VIP addressed to another host's MAC passes untouched and opens no pair",
		In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, DstMAC: otherHostMAC}, Action: dt.XDPPass, Counted: notOurs},
	{Name: "SYN to the VIP addressed to the broadcast MAC passes",
		In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, DstMAC: layers.EthernetBroadcast}, Action: dt.XDPPass, Counted: notOurs},
	{Name: "SYN to the VIP addressed to a multicast MAC passes",
		In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, DstMAC: ipv4MulticastMAC}, Action: dt.XDPPass, Counted: notOurs},
	{Name: "client data of a pair addressed to another host's MAC passes, the pair untouched",
		Given: established, In: seg{Flags: dt.ACK | dt.PSH, Seq: 1001, Ack: 5001, Data: payload, DstMAC: otherHostMAC},
		Action: dt.XDPPass, Counted: notOurs, Entries: 2, Pair: openPair},
	{Name: "backend reply to a SNAT port addressed to another host's MAC passes, the pair untouched",
		Given: established, In: seg{From: backend, Flags: dt.ACK, Seq: 5001, Ack: 1001, DstMAC: otherHostMAC},
		Action: dt.XDPPass, Counted: notOurs, Entries: 2, Pair: openPair},
	{Name: "client FIN addressed to another host's MAC does not close the pair",
		Given: established, In: seg{Flags: dt.FIN | dt.ACK, Seq: 1001, Ack: 5001, DstMAC: otherHostMAC},
		Action: dt.XDPPass, Counted: notOurs, Entries: 2, Pair: openPair},
	{Name: "retransmitted SYN of a pair addressed to another host's MAC is not forwarded",
		Given: embryonic, In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, DstMAC: otherHostMAC},
		Action: dt.XDPPass, Counted: notOurs, Entries: 2, Pair: embryonicPair},
	{Name: "while shutting down, a SYN for another host's MAC is not answered with a RST",
		Shutdown: shutdownSet, In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, DstMAC: otherHostMAC},
		Action: dt.XDPPass, Counted: notOurs},
	{Name: "two-arm: a SYN on the front interface addressed to the back interface's MAC passes",
		Env: dt.Options{TwoArm: true}, In: seg{Flags: dt.SYN, Seq: 1000, MSS: true, DstMAC: dt.MAC(dt.BackIP)},
		Action: dt.XDPPass, Counted: notOurs},
	// The listen prefilter knows addresses, not ports (layout 9): a
	// frame to a listen address is another host's before its port is
	// looked at.
	{Name: "another host's frame to a port of no service passes, counted",
		In: seg{LPort: 22, Flags: dt.SYN, Seq: 1000, MSS: true, DstMAC: otherHostMAC}, Action: dt.XDPPass, Counted: notOurs},
}

func TestOursFixtures(t *testing.T) { runFixtures(t, oursFixtures) }

// Attach records each interface's own MAC, the one the fixtures' frames
// are addressed to.
func TestInterfaceMACRecordedAtAttach(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{TwoArm: true})
	for _, ifc := range []dt.Iface{e.Front, e.Back} {
		mac, err := e.DP.InterfaceMAC(ifc.Index)
		if err != nil || mac.String() != ifc.MAC.String() {
			t.Errorf("%s: recorded MAC %v (err %v), want %v", ifc.Name, mac, err, ifc.MAC)
		}
	}
}

// The interface's new address (UpdateInterfaceMAC, from the next-hop
// watcher) is the one frames must carry from then on; the old one is
// another host's.
func TestNotOursFollowsInterfaceMAC(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	mustUpdate(t, "front interface", 0)(e.DP.UpdateInterfaceMAC(e.Front.Index, newOwnMAC))
	if mac, err := e.DP.InterfaceMAC(e.Front.Index); err != nil || mac.String() != newOwnMAC.String() {
		t.Fatalf("recorded MAC %v (err %v), want %v", mac, err, newOwnMAC)
	}
	old := synFrom(e, dt.Client(33000), 80)
	step(t, e, "SYN to the old MAC", old.Frame(), e.Front, dt.XDPPass, old.Frame(), notOurs)
	moved := old
	moved.DstMAC = newOwnMAC
	// The new pair's next hop comes from the kernel (bpf_fib_lookup),
	// whose veth kept its address: the source MAC is that one.
	want := e.ToBackend(moved, netip.AddrPortFrom(e.Backends[0], 8080), 40000)
	step(t, e, "SYN to the new MAC", moved.Frame(), e.Front, dt.XDPTX, want.Frame(), counted{PairsCreated: 1})
}

// An interface without a recorded MAC (Detach forgets it) takes every
// unicast frame, as before the check, never fewer; a group address is
// still never ours.
func TestNotOursWithoutInterfaceMAC(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	if err := e.DP.Detach(e.Front.Name); err != nil {
		t.Fatal(err)
	}
	if mac, err := e.DP.InterfaceMAC(e.Front.Index); err != nil || mac != nil {
		t.Fatalf("recorded MAC after Detach %v (err %v), want none", mac, err)
	}
	bcast := synFrom(e, dt.Client(33001), 80)
	bcast.DstMAC = layers.EthernetBroadcast
	step(t, e, "SYN to the broadcast MAC", bcast.Frame(), e.Front, dt.XDPPass, bcast.Frame(), notOurs)
	other := synFrom(e, dt.Client(33000), 80)
	other.DstMAC = otherHostMAC
	step(t, e, "SYN to another unicast MAC", other.Frame(), e.Front, dt.XDPTX, nil, counted{PairsCreated: 1})
}

// The fleet's case: a drained host (no routable backend) answered other
// hosts' client SYNs with RSTs. A SYN for another host's MAC now passes;
// one for this host's own MAC is still refused.
func TestNotOursWithoutRoutableBackend(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	if err := e.DP.SetRoutable(0, nil); err != nil {
		t.Fatal(err)
	}
	other := synFrom(e, dt.Client(33000), 80)
	other.DstMAC = otherHostMAC
	step(t, e, "SYN for another host", other.Frame(), e.Front, dt.XDPPass, other.Frame(), notOurs)
	own := synFrom(e, dt.Client(33000), 80)
	rst := dt.Segment{SrcMAC: e.Front.MAC, DstMAC: own.SrcMAC, Src: own.Dst, Dst: own.Src, Ack: 1001, Flags: dt.RST | dt.ACK}
	step(t, e, "SYN for this host", own.Frame(), e.Front, dt.XDPTX, rst.Unpadded(), counted{NoBackend: 1})
}

// An ICMP error about a pair addressed to another host's MAC (or a group
// address) passes untouched, counted, and changes nothing.
func TestICMPNotOurs(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(6), 1000)
	toBackend := k.forward("client data", k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload), counted{})
	backendIP := k.p.Backend().Addr()
	for _, mac := range []net.HardwareAddr{otherHostMAC, layers.EthernetBroadcast} {
		m := icmpMsg{SrcMAC: dt.MAC(backendIP), DstMAC: mac, Src: backendIP, Dst: e.SNAT, TTL: 64,
			Type: icmpUnreachable, Code: codeFragNeeded, Rest: 1280, Quote: dt.Unpadded(toBackend)[14:]}
		step(t, e, "fragmentation needed to "+mac.String(), m.frame(), e.BackendIface(), dt.XDPPass, m.frame(), notOurs)
	}
}
