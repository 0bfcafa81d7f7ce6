package dataplane_test

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Next-hop fixtures (issue 13 "Next hops that follow the network"; plan13
// data path rule 4): a pair's entries name slots of xlb_nexthops, which
// the daemon rewrites when a neighbour's or an interface's MAC changes,
// so the next packet of an established flow leaves with the new MAC. A
// packet whose slot was freed meanwhile looks its next hop up again
// (Counters.NextHopRefreshes) and names the new slot from then on.

// MACs the fixtures move the next hops to (locally administered).
var (
	newBackendMAC = net.HardwareAddr{0x02, 0xbe, 0, 0, 0, 0x01}
	newClientMAC  = net.HardwareAddr{0x02, 0xc1, 0, 0, 0, 0x01}
	newOwnMAC     = net.HardwareAddr{0x02, 0x10, 0, 0, 0, 0x01}
)

// The slots a pair names are the next hops its SYN resolved, where the Go
// twin of the slot hash says they are.
func TestNextHopSlotsOfAPair(t *testing.T) {
	for _, twoArm := range []bool{false, true} {
		t.Run(map[bool]string{false: "one-arm", true: "two-arm"}[twoArm], func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{TwoArm: twoArm})
			k := dial(t, e, 33000, synOptions(-1))
			backend := k.p.Backend().Addr()
			wantNextHop(t, e, k.p.Fwd.Nexthop, e.BackendIface(), backend, dt.MAC(backend))
			wantNextHop(t, e, k.p.Rev.Nexthop, e.Front, dt.ClientIP, dt.MAC(dt.ClientIP))
		})
	}
}

// A neighbour's new MAC (UpdateNeighbour) and the interface's new MAC
// (UpdateInterfaceMAC) reach the next packet of an established flow, both
// ways; the pair itself is not touched.
func TestNextHopMACUpdate(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	backend := k.p.Backend().Addr()
	data := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload)
	reply := k.backend(dt.ACK, isnB+1, isnC+1+uint32(len(payload)), 2000, nil)

	mustUpdate(t, "backend neighbour", 1)(e.DP.UpdateNeighbour(e.BackendIface().Index, backend, newBackendMAC))
	want := k.e.ToBackend(data, k.p.Backend(), k.p.SNATPort())
	want.DstMAC = newBackendMAC
	step(t, e, "client data after the backend's MAC changed", data.Frame(), e.Front, dt.XDPTX, want.Frame(), counted{})
	k.forward("backend reply, client MAC unchanged", reply, counted{})

	mustUpdate(t, "client neighbour", 1)(e.DP.UpdateNeighbour(e.Front.Index, dt.ClientIP, newClientMAC))
	back := k.e.ToClient(reply, k.c, 80)
	back.DstMAC = newClientMAC
	step(t, e, "backend reply after the client's MAC changed", reply.Frame(), e.Front, dt.XDPTX, back.Frame(), counted{})

	// One-arm: both next hops leave through the front interface, and
	// frames now arrive addressed to its new MAC (the old one is another
	// host's from now on: ours_fixtures_test.go).
	mustUpdate(t, "front interface", 2)(e.DP.UpdateInterfaceMAC(e.Front.Index, newOwnMAC))
	want.SrcMAC, back.SrcMAC = newOwnMAC, newOwnMAC
	data.DstMAC, reply.DstMAC = newOwnMAC, newOwnMAC
	step(t, e, "client data after XLB's MAC changed", data.Frame(), e.Front, dt.XDPTX, want.Frame(), counted{})
	step(t, e, "backend reply after XLB's MAC changed", reply.Frame(), e.Front, dt.XDPTX, back.Frame(), counted{})

	if p := k.now(); p.Fwd.Nexthop != k.p.Fwd.Nexthop || p.Rev.Nexthop != k.p.Rev.Nexthop || p.Fwd.Generation != k.p.Fwd.Generation {
		t.Fatalf("pair after MAC updates names slots %d/%d generation %d, was %d/%d %d",
			p.Fwd.Nexthop, p.Rev.Nexthop, p.Fwd.Generation, k.p.Fwd.Nexthop, k.p.Rev.Nexthop, k.p.Fwd.Generation)
	}
}

// A packet whose next-hop slot was freed resolves its next hop again,
// once, and its entry names the new slot.
func TestNextHopRefreshAfterFree(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	backend := k.p.Backend().Addr()

	// No entry referenced, nothing stamped since now+1: every slot goes.
	freed, err := e.DP.FreeNextHops(make([]uint64, dataplane.NextHopWords), e.Now(t).Low32()+1)
	if err != nil || freed < 2 {
		t.Fatalf("FreeNextHops freed %d slots (err %v), want both of the pair's", freed, err)
	}
	for _, id := range []uint32{k.p.Fwd.Nexthop, k.p.Rev.Nexthop} {
		if h, err := e.DP.NextHop(id); err != nil || !h.Free() {
			t.Fatalf("slot %d after FreeNextHops: %v (err %v), want free", id, h, err)
		}
	}

	data := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload)
	k.forward("client data on a freed slot", data, counted{NextHopRefreshes: 1})
	k.forward("client data again", data, counted{})
	p := k.now()
	wantNextHop(t, e, p.Fwd.Nexthop, e.BackendIface(), backend, dt.MAC(backend))

	reply := k.backend(dt.ACK, isnB+1, isnC+1+uint32(len(payload)), 2000, nil)
	k.forward("backend reply on a freed slot", reply, counted{NextHopRefreshes: 1})
	k.forward("backend reply again", reply, counted{})
	wantNextHop(t, e, k.now().Rev.Nexthop, e.Front, dt.ClientIP, dt.MAC(dt.ClientIP))
}

// wantNextHop checks that slot id holds the next hop (ifc, ip) with the
// interface's MAC and mac, and is one of the slots the hash names for it.
func wantNextHop(t *testing.T, e *dt.Env, id uint32, ifc dt.Iface, ip netip.Addr, mac net.HardwareAddr) {
	t.Helper()
	h, err := e.DP.NextHop(id)
	if err != nil {
		t.Fatal(err)
	}
	if h.Ifindex != ifc.Index || h.IP != ip || h.SrcMAC.String() != ifc.MAC.String() || h.DstMAC.String() != mac.String() {
		t.Fatalf("slot %d: %v, want ifindex %d via %s %s->%s", id, h, ifc.Index, ip, ifc.MAC, mac)
	}
	if slots := dataplane.NextHopSlots(ifc.Index, ip); !slices.Contains(slots[:], id) {
		t.Fatalf("slot %d is not among the slots %v the hash names for %s on ifindex %d", id, slots, ip, ifc.Index)
	}
}

// mustUpdate checks the result of a next-hop update: want slots changed.
func mustUpdate(t *testing.T, what string, want int) func(int, error) {
	return func(n int, err error) {
		t.Helper()
		if err != nil || n != want {
			t.Fatalf("%s: %d slots updated (err %v), want %d", what, n, err, want)
		}
	}
}

// A client the FIB cannot route is answered through the L2 sender of its
// SYN: an L2-sender slot (no neighbour address) on the ingress interface
// with the SYN's MACs swapped, which the backend's replies then take.
func TestNextHopL2Sender(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	far := netip.AddrPortFrom(testnet.OuterClientIP, 33000) // no route to it in the fixture namespace
	k := connect(t, e, far, synOptions(-1), counted{PairsCreated: 1})
	h, err := e.DP.NextHop(k.p.Rev.Nexthop)
	if err != nil {
		t.Fatal(err)
	}
	if h.Ifindex != e.Front.Index || h.IP.IsValid() || h.SrcMAC.String() != e.Front.MAC.String() || h.DstMAC.String() != dt.MAC(far.Addr()).String() {
		t.Fatalf("reverse slot %d: %v, want ifindex %d via l2-sender %s->%s", k.p.Rev.Nexthop, h, e.Front.Index, e.Front.MAC, dt.MAC(far.Addr()))
	}
	sa := k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil)
	k.forward("SYN-ACK toward the L2 sender", sa, counted{})
}

// Two-arm: each interface's MAC is its own next hops' source MAC.
func TestNextHopInterfaceMACTwoArm(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{TwoArm: true})
	k := dial(t, e, 33000, synOptions(-1))
	mustUpdate(t, "back interface", 1)(e.DP.UpdateInterfaceMAC(e.Back.Index, newOwnMAC))
	syn := k.client(dt.SYN, isnC, 0, synWindow, nil)
	want := k.e.ToBackend(syn, k.p.Backend(), k.p.SNATPort())
	want.SrcMAC = newOwnMAC
	step(t, e, "retransmitted SYN after the back interface's MAC changed", syn.Frame(), e.Front, dt.XDPRedirect, want.Frame(), counted{SYNReused: 1})
	synAck := k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil)
	synAck.DstMAC = newOwnMAC // to the back interface's new MAC
	k.forward("SYN-ACK: the front interface keeps its MAC", synAck, counted{})
}
