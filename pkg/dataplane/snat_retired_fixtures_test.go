package dataplane_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Retired SNAT spaces (issue 27 finding 3: "a reload keeps recognising the
// SNAT addresses and ports that live pairs hold until they end"): a reload
// that changes snat.ip and snat.port_range retires the old addresses and
// range; the backend's packets of a pair created before it are still
// forwarded, new pairs take ports of the new space only, a packet to a
// retired port without an entry passes as before, releasing a retired
// port touches no bitmap, and the maintenance walk shrinks the retired set
// to what reverse entries still hold, then drops it.
func TestSNATRetiredByReload(t *testing.T) {
	extra := testnet.XLBExtraIP(0)
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40009, ExtraSNAT: []netip.Addr{extra}})
	a := dial(t, e, 33000, synOptions(-1))
	if got := a.p.Fwd.NewSrc(); got != netip.AddrPortFrom(e.SNAT, 40000) {
		t.Fatalf("first pair from %v, want %v:40000", got, e.SNAT)
	}
	a.handshake(synAckOptions(-1), 1000)

	// The reload: another address only, another range (the same size).
	s := e.Settings
	s.SNAT, s.SNATPortLo, s.SNATPortHi = []netip.Addr{extra}, 41000, 41009
	if err := e.DP.FixtureReload(s); err != nil {
		t.Fatal(err)
	}
	wantRetired(t, e, dataplane.RetiredSNAT{Addr: e.SNAT, PortLo: 40000, PortHi: 40009},
		dataplane.RetiredSNAT{Addr: extra, PortLo: 40000, PortHi: 40009})

	// The live pair goes on both ways.
	a.forward("backend data after the reload", a.backend(dt.ACK|dt.PSH, isnB+1, isnC+1, 1000, []byte("reply")), counted{})
	more := a.client(dt.ACK|dt.PSH, isnC+1, isnB+6, 1000, []byte("more"))
	sentFrame := a.forward("client data after the reload", more, counted{})

	// An ICMP error about it from the backend's side, addressed to the
	// retired address, reaches the client (icmp.h).
	backend := a.p.Backend().Addr()
	in := icmpMsg{SrcMAC: dt.MAC(backend), DstMAC: e.BackendIface().MAC, Src: backend, Dst: e.SNAT, TTL: 64,
		Type: icmpUnreachable, Code: codePortUnreach, Quote: quoted(dt.Unpadded(sentFrame)[14:], 0)}
	more.TTL = 63 // as XLB sent it; the translated quote keeps it
	out := icmpMsg{SrcMAC: e.Front.MAC, DstMAC: dt.MAC(dt.ClientIP), Src: dt.ListenIP, Dst: dt.ClientIP, TTL: 63,
		Type: icmpUnreachable, Code: codePortUnreach, Quote: quoted(datagram(more), 0)}
	step(t, e, "ICMP error about the pair to its retired SNAT address", in.frame(), e.BackendIface(), dt.XDPTX, out.frame(), counted{ICMPToClient: 1})

	// A new pair: the new address and range.
	b := dial(t, e, 33001, synOptions(-1))
	bp := b.p.SNATPort()
	if got := b.p.Fwd.NewSrc(); got.Addr() != extra || bp < 41000 || bp > 41009 {
		t.Fatalf("pair after the reload from %v, want %v:41000-41009", got, extra)
	}
	wantTaken(t, e, 0, bp) // SNAT address 0 is extra now

	// A retired port nobody holds: the host's, as before.
	stray := a.backend(dt.ACK, isnB+1, isnC+1, 1000, nil)
	stray.Dst = netip.AddrPortFrom(e.SNAT, 40005)
	step(t, e, "backend packet to a retired port without a pair", stray.Frame(), e.BackendIface(), dt.XDPPass, nil, counted{})

	// A walk pass begun before a config write decides nothing.
	u := retiredUse(t, e)
	if err := e.DP.FixtureReload(s); err != nil {
		t.Fatal(err)
	}
	if released, err := e.DP.ShrinkRetiredSNAT(u); err != nil || len(released) != 0 {
		t.Fatalf("shrink after a config write: released %v, %v; want nothing", released, err)
	}

	// The pass: only the first address's port 40000 is still held.
	released := shrinkRetired(t, e)
	wantSpaces(t, "released", released, dataplane.RetiredSNAT{Addr: e.SNAT, PortLo: 40000, PortHi: 40009},
		dataplane.RetiredSNAT{Addr: extra, PortLo: 40000, PortHi: 40009})
	wantRetired(t, e, dataplane.RetiredSNAT{Addr: e.SNAT, PortLo: 40000, PortHi: 40000})
	a.forward("backend data after the shrink", a.backend(dt.ACK|dt.PSH, isnB+6, isnC+5, 1000, []byte("again")), counted{})

	// The pair ends: its retired port has no bit to clear.
	a.forward("client RST", a.client(dt.RST|dt.ACK, isnC+5, isnB+11, 0, nil), counted{ClosedClientRST: 1})
	wantTaken(t, e, 0, bp)
	reapWant(t, e, reapClock(e.Now(t)), fwdReq(a.now(), dataplane.ReapReset), dataplane.Reaped)
	wantTaken(t, e, 0, bp)
	if released := shrinkRetired(t, e); !slices.Equal(released, []dataplane.RetiredSNAT{{Addr: e.SNAT, PortLo: 40000, PortHi: 40000}}) {
		t.Fatalf("released %v, want %v:40000", released, e.SNAT)
	}
	wantRetired(t, e)
	if u := e.DP.BeginRetiredSNATUse(); u != nil {
		t.Fatal("a walk collects retired SNAT ports with none retired")
	}
	step(t, e, "backend packet to the dropped retired port", a.backend(dt.ACK, isnB+11, isnC+5, 1000, nil).Frame(), e.BackendIface(), dt.XDPPass, nil, counted{})
}

// A reload that retires nothing (the same SNAT space, or a range that
// covers the old one) writes no retired space.
func TestSNATRetiredNothing(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1], SNATPortLo: 40000, SNATPortHi: 40009})
	if err := e.DP.FixtureReload(e.Settings); err != nil {
		t.Fatal(err)
	}
	wantRetired(t, e)
	s := e.Settings
	s.SNATPortLo, s.SNATPortHi = 39995, 40004
	if err := e.DP.FixtureReload(s); err != nil {
		t.Fatal(err)
	}
	// only the ports the new range left out
	wantRetired(t, e, dataplane.RetiredSNAT{Addr: e.SNAT, PortLo: 40005, PortHi: 40009})
}

// retiredUse collects the retired SNAT ports the flow map's reverse
// entries hold, as one maintenance walk pass does.
func retiredUse(t *testing.T, e *dt.Env) *dataplane.RetiredSNATUse {
	t.Helper()
	u := e.DP.BeginRetiredSNATUse()
	if u == nil {
		t.Fatal("no retired SNAT space to collect")
	}
	for k, v := range e.Flows(t) {
		u.Visit(&k, &v)
	}
	return u
}

// shrinkRetired runs one walk pass's collection and shrink, returning the
// spaces it released.
func shrinkRetired(t *testing.T, e *dt.Env) []dataplane.RetiredSNAT {
	t.Helper()
	released, err := e.DP.ShrinkRetiredSNAT(retiredUse(t, e))
	if err != nil {
		t.Fatal(err)
	}
	return released
}

// wantRetired checks the retired SNAT spaces, in address order.
func wantRetired(t *testing.T, e *dt.Env, want ...dataplane.RetiredSNAT) {
	t.Helper()
	wantSpaces(t, "retired", e.DP.RetiredSNAT(), want...)
}

func wantSpaces(t *testing.T, what string, got []dataplane.RetiredSNAT, want ...dataplane.RetiredSNAT) {
	t.Helper()
	slices.SortFunc(want, func(x, y dataplane.RetiredSNAT) int { return x.Addr.Compare(y.Addr) })
	if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
		t.Fatalf("%s SNAT spaces %v, want %v", what, got, want)
	}
}
