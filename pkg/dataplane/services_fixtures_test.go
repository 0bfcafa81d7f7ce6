package dataplane_test

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Many services (issue 29; layout 9): each service's SYNs land on its
// own routable set, with its own round-robin position, and the pairs
// carry the service and member ids; a backend in two services keeps one
// SNAT port space; an address and port no service has passes untouched;
// a service removed from the config drains.

// secondListen is the address of the fixtures' second service: not on any
// interface (DESIGN §9: a listen address may be routed to the host).
var secondListen = testnet.XLBExtraIP(0)

// svcConn is a connection of a services fixture: client c to the
// service address dst, and its pair once the SYN created it.
type svcConn struct {
	t   *testing.T
	e   *dt.Env
	c   netip.AddrPort
	dst netip.AddrPort
	fk  dataplane.FlowKey
	fwd dataplane.FlowValue
	rev dataplane.FlowValue
}

// seg is a segment from c to dst as it arrives on the front interface.
func (k *svcConn) seg(flags uint8, seq, ack uint32, data []byte) dt.Segment {
	return dt.Segment{SrcMAC: dt.MAC(k.c.Addr()), DstMAC: k.e.Front.MAC, Src: k.c, Dst: k.dst, Flags: flags,
		Seq: seq, Ack: ack, Payload: data, ID: 7, Window: 64240}
}

// syn is the client's SYN (MSS option only).
func (k *svcConn) syn() dt.Segment {
	s := k.seg(dt.SYN, 1000, 0, nil)
	s.Options = mss
	return s
}

// dialService sends client port port's SYN to dst and expects a pair toward
// a backend: the SYN leaves for it (XDP_TX, one-arm), rewritten.
func dialService(t *testing.T, e *dt.Env, port uint16, dst netip.AddrPort) *svcConn {
	t.Helper()
	k := &svcConn{t: t, e: e, c: dt.Client(port), dst: dst}
	k.fk = dataplane.NewFlowKey(k.c, dst, dataplane.DirClient)
	s := k.syn()
	out := step(t, e, "SYN to "+dst.String(), s.Frame(), e.Front, dt.XDPTX, nil, counted{PairsCreated: 1})
	var err error
	if k.fwd, err = e.DP.LookupFlow(k.fk); err != nil {
		t.Fatalf("SYN from %v to %v: forward entry: %v", k.c, dst, err)
	}
	if k.rev, err = e.DP.LookupFlow(k.fwd.Peer(k.fk)); err != nil {
		t.Fatalf("SYN from %v to %v: reverse entry: %v", k.c, dst, err)
	}
	if d := frameDiff(out, e.ToBackend(s, k.fwd.NewDst(), k.fwd.NewSrc().Port()).Frame()); d != "" {
		t.Fatalf("SYN from %v to %v: output frame differs:\n%s", k.c, dst, d)
	}
	return k
}

// backendID is the pair's backend id.
func (k *svcConn) backendID() int { return int(k.fwd.BackendId) }

// wantService checks that both entries carry service svc and the member
// id routable gives the pair's backend, and that the way back to the
// client leaves from the service's address and port.
func (k *svcConn) wantService(svc uint16, routable []dataplane.BackendRef) {
	k.t.Helper()
	i := slices.IndexFunc(routable, func(r dataplane.BackendRef) bool { return r.ID == uint32(k.fwd.BackendId) })
	if i < 0 {
		k.t.Fatalf("pair %v -> %v went to backend id %d, not one of service %d's %v", k.c, k.dst, k.fwd.BackendId, svc, routable)
	}
	member := uint16(routable[i].Member)
	if k.fwd.ServiceId != svc || k.rev.ServiceId != svc || k.fwd.MemberId != member || k.rev.MemberId != member {
		k.t.Fatalf("pair %v -> %v: service %d/%d, member %d/%d (forward/reverse), want service %d, member %d",
			k.c, k.dst, k.fwd.ServiceId, k.rev.ServiceId, k.fwd.MemberId, k.rev.MemberId, svc, member)
	}
	if k.rev.NewSrc() != k.dst || k.rev.NewDst() != k.c {
		k.t.Fatalf("pair %v -> %v: answers from %v to %v", k.c, k.dst, k.rev.NewSrc(), k.rev.NewDst())
	}
}

// reply sends the backend's segment of the pair and expects it toward the
// client, from the service's address and port.
func (k *svcConn) reply(flags uint8, seq, ack uint32, data []byte) {
	k.t.Helper()
	s := k.e.FromBackend(k.fwd.NewDst(), k.fwd.NewSrc().Port(), flags, seq, ack, data)
	want := s
	want.SrcMAC, want.DstMAC = k.e.Front.MAC, dt.MAC(k.c.Addr())
	want.Src, want.Dst = k.dst, k.c
	want.TTL = 63
	step(k.t, k.e, "backend segment of "+k.c.String(), s.Frame(), k.e.BackendIface(), dt.XDPTX, want.Frame(), counted{})
}

// send sends the client's segment of the pair and expects it toward the
// backend.
func (k *svcConn) send(flags uint8, seq, ack uint32, data []byte) {
	k.t.Helper()
	s := k.seg(flags, seq, ack, data)
	want := k.e.ToBackend(s, k.fwd.NewDst(), k.fwd.NewSrc().Port())
	step(k.t, k.e, "client segment of "+k.c.String(), s.Frame(), k.e.Front, dt.XDPTX, want.Frame(), counted{})
}

// passesUntouched runs s and expects XDP_PASS with the frame as it came
// and no pair for it.
func passesUntouched(t *testing.T, e *dt.Env, what string, s dt.Segment) {
	t.Helper()
	in := s.Frame()
	out := step(t, e, what, in, e.Front, dt.XDPPass, nil, counted{})
	if !bytes.Equal(out, in) {
		t.Fatalf("%s: the frame was changed:\n%s", what, dt.Diff(out, in))
	}
	if _, err := e.DP.LookupFlow(dataplane.NewFlowKey(s.Src, s.Dst, dataplane.DirClient)); err != dataplane.ErrNotFound {
		t.Fatalf("%s: a flow entry for it (%v)", what, err)
	}
}

// Two services on two addresses, each with its own backends: every SYN
// lands on its service's backends, on its mapping's remote port, and the
// pair carries the service id and the member id of its backend there.
func TestServicesTwoAddresses(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Services: []dt.Service{
		{Name: "web", Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}, Backends: []int{0}},
		{Name: "api", Listen: secondListen, Ports: []dataplane.PortMap{{Local: 80, Remote: 9090}}, Backends: []int{1, 2}},
	}})
	web, api := e.ServiceID(t, "web"), e.ServiceID(t, "api")
	if web == api {
		t.Fatalf("both services have id %d", web)
	}
	perMember := map[uint32]uint64{}
	for i := range 4 {
		k := dialService(t, e, uint16(33000+i), netip.AddrPortFrom(dt.ListenIP, 80))
		k.wantService(web, e.Routable[0])
		if k.backendID() != 0 || k.fwd.NewDst().Port() != 8080 {
			t.Fatalf("web's pair %d went to backend id %d port %d, want 0 port 8080", i, k.backendID(), k.fwd.NewDst().Port())
		}
		k.reply(dt.SYN|dt.ACK, 5000, 1001, nil)
		perMember[uint32(k.fwd.MemberId)]++

		k = dialService(t, e, uint16(34000+i), netip.AddrPortFrom(secondListen, 80))
		k.wantService(api, e.Routable[1])
		if (k.backendID() != 1 && k.backendID() != 2) || k.fwd.NewDst().Port() != 9090 {
			t.Fatalf("api's pair %d went to backend id %d port %d, want 1 or 2, port 9090", i, k.backendID(), k.fwd.NewDst().Port())
		}
		k.reply(dt.SYN|dt.ACK, 5000, 1001, nil)
		perMember[uint32(k.fwd.MemberId)]++
	}
	stats, err := e.DP.AllBackendStats()
	if err != nil {
		t.Fatal(err)
	}
	for _, refs := range e.Routable {
		for _, r := range refs {
			if stats[r.Member].Opened != perMember[r.Member] || stats[r.Member].ReceivedPackets != perMember[r.Member] {
				t.Errorf("member %d (backend id %d): opened %d, received %d; want %d each", r.Member, r.ID, stats[r.Member].Opened, stats[r.Member].ReceivedPackets, perMember[r.Member])
			}
		}
	}
	if perMember[e.Routable[1][0].Member] != 2 || perMember[e.Routable[1][1].Member] != 2 {
		t.Errorf("api's pairs per member %v, want 2 each (round robin)", perMember)
	}
}

// Two services on the same address, one port each: the port decides.
func TestServicesSameAddressTwoPorts(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Services: []dt.Service{
		{Name: "http", Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}, Backends: []int{0}},
		{Name: "https", Ports: []dataplane.PortMap{{Local: 443, Remote: 8443}}, Backends: []int{1}},
	}})
	for i := range 2 {
		k := dialService(t, e, uint16(33000+i), netip.AddrPortFrom(dt.ListenIP, 80))
		k.wantService(e.ServiceID(t, "http"), e.Routable[0])
		if k.fwd.NewDst() != netip.AddrPortFrom(e.Backends[0], 8080) {
			t.Fatalf("a pair of port 80 went to %v", k.fwd.NewDst())
		}
		k = dialService(t, e, uint16(34000+i), netip.AddrPortFrom(dt.ListenIP, 443))
		k.wantService(e.ServiceID(t, "https"), e.Routable[1])
		if k.fwd.NewDst() != netip.AddrPortFrom(e.Backends[1], 8443) {
			t.Fatalf("a pair of port 443 went to %v", k.fwd.NewDst())
		}
	}
	k := &svcConn{t: t, e: e, c: dt.Client(35000), dst: netip.AddrPortFrom(dt.ListenIP, 8000)}
	passesUntouched(t, e, "SYN to a port of neither service", k.syn())
}

// A backend in two services has one SNAT port space (its backend id's):
// with two SNAT ports, the third SYN to either service finds none; each
// service's pairs count in its own member's cells.
func TestServicesSharedBackend(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{SNATPortLo: 40000, SNATPortHi: 40001, Services: []dt.Service{
		{Name: "a", Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}, Backends: []int{0}},
		{Name: "b", Listen: secondListen, Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}, Backends: []int{0}},
	}})
	a, b := netip.AddrPortFrom(dt.ListenIP, 80), netip.AddrPortFrom(secondListen, 80)
	ka := dialService(t, e, 33000, a)
	kb := dialService(t, e, 33001, b)
	ka.wantService(e.ServiceID(t, "a"), e.Routable[0])
	kb.wantService(e.ServiceID(t, "b"), e.Routable[1])
	if ka.fwd.BackendId != kb.fwd.BackendId || ka.fwd.NewDst() != kb.fwd.NewDst() {
		t.Fatalf("the pairs went to backend id %d %v and %d %v, want the one shared backend", ka.fwd.BackendId, ka.fwd.NewDst(), kb.fwd.BackendId, kb.fwd.NewDst())
	}
	if ports := []uint16{ka.fwd.NewSrc().Port(), kb.fwd.NewSrc().Port()}; ports[0] == ports[1] {
		t.Fatalf("both services' pairs took SNAT port %d toward the same backend", ports[0])
	}
	if ka.fwd.MemberId == kb.fwd.MemberId {
		t.Fatalf("both services' pairs count in member %d", ka.fwd.MemberId)
	}
	for _, dst := range []netip.AddrPort{a, b} {
		k := &svcConn{t: t, e: e, c: dt.Client(33002), dst: dst}
		act, _, err := e.Run(k.syn().Frame(), e.Front)
		if err != nil {
			t.Fatal(err)
		}
		if act != dt.XDPTX {
			t.Fatalf("a third SYN to %v: %s, want the RST of an exhausted SNAT space (XDP_TX)", dst, dt.ActionName(act))
		}
	}
	if c := e.Counters(t); c.SNATExhausted != 2 || c.PairsCreated != 2 {
		t.Fatalf("SNAT exhausted %d, pairs created %d; want 2 and 2", c.SNATExhausted, c.PairsCreated)
	}
	stats, err := e.DP.AllBackendStats()
	if err != nil {
		t.Fatal(err)
	}
	if stats[ka.fwd.MemberId].Opened != 1 || stats[kb.fwd.MemberId].Opened != 1 {
		t.Fatalf("opened by member: a's %d, b's %d; want 1 each", stats[ka.fwd.MemberId].Opened, stats[kb.fwd.MemberId].Opened)
	}
}

// A packet for an address and port no service has passes to the kernel
// as it came: a SYN or another segment to a listen address on another
// port, a SYN to a port of another service's address, and to an address
// of no service.
func TestServicesUnknownPassesUntouched(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Services: []dt.Service{
		{Name: "web", Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}},
		{Name: "ssh", Listen: secondListen, Ports: []dataplane.PortMap{{Local: 22, Remote: 22}}},
	}})
	for _, c := range []struct {
		what  string
		dst   netip.AddrPort
		flags uint8
	}{
		{"SYN to the first address, port 8000", netip.AddrPortFrom(dt.ListenIP, 8000), dt.SYN},
		{"ACK to the first address, port 8000", netip.AddrPortFrom(dt.ListenIP, 8000), dt.ACK},
		{"SYN to the first address, the second service's port 22", netip.AddrPortFrom(dt.ListenIP, 22), dt.SYN},
		{"SYN to the second address, the first service's port 80", netip.AddrPortFrom(secondListen, 80), dt.SYN},
		{"SYN to an address of no service", netip.AddrPortFrom(testnet.XLBExtraIP(1), 80), dt.SYN},
	} {
		k := &svcConn{t: t, e: e, c: dt.Client(33000), dst: c.dst}
		s := k.syn()
		s.Flags = c.flags
		passesUntouched(t, e, c.what, s)
	}
	if n := len(e.Flows(t)); n != 0 {
		t.Fatalf("%d flow entries after packets of no service", n)
	}
}

// A service left out of the config drains (DESIGN §9): its pairs flow on
// both ways, its new SYNs pass to the kernel untouched, the other
// service is unaffected; its id is freed once its pairs are gone.
func TestServicesRemovedDrains(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Services: []dt.Service{
		{Name: "a", Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}, Backends: []int{0}},
		{Name: "b", Listen: secondListen, Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}, Backends: []int{1}},
	}})
	a, b := e.ServiceID(t, "a"), e.ServiceID(t, "b")
	aDst, bDst := netip.AddrPortFrom(dt.ListenIP, 80), netip.AddrPortFrom(secondListen, 80)
	kb := dialService(t, e, 33000, bDst)
	kb.reply(dt.SYN|dt.ACK, 5000, 1001, nil)
	kb.send(dt.ACK, 1001, 5001, nil)

	s := e.Settings
	s.Services = s.Services[:1]
	refs, err := e.DP.Configure(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[0].ID != a || refs[0].State != dataplane.ServiceServing || refs[1].ID != b || refs[1].State != dataplane.ServiceDraining || refs[1].Name != "b" {
		t.Fatalf("Configure without b: %+v, want a serving, then b draining", refs)
	}

	kb.send(dt.ACK|dt.PSH, 1001, 5001, []byte("GET / HTTP/1.0\r\n\r\n"))
	kb.reply(dt.ACK|dt.PSH, 5001, 1019, []byte("HTTP/1.0 200 OK\r\n\r\n"))
	k := &svcConn{t: t, e: e, c: dt.Client(33001), dst: bDst}
	passesUntouched(t, e, "a new SYN to the draining service", k.syn())
	ka := dialService(t, e, 33002, aDst)
	ka.wantService(a, e.Routable[0])

	if err := e.DP.FreeService(a); err == nil {
		t.Fatal("FreeService of a serving service succeeded")
	}
	e.DeleteFlow(t, kb.fk)
	e.DeleteFlow(t, kb.fwd.Peer(kb.fk))
	if err := e.DP.FreeService(b); err != nil {
		t.Fatal(err)
	}
	svcs, err := e.DP.Services()
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs) != 1 || svcs[0].ID != a {
		t.Fatalf("services after b's id was freed: %+v, want a alone", svcs)
	}
	if _, err := e.DP.Routable(b); err == nil {
		t.Fatal("Routable of a freed service succeeded")
	}
	// The id is free for the next new service.
	s.Services = append(s.Services, dataplane.ServiceSettings{Name: "c", Listen: secondListen, Proto: dataplane.ProtoTCP, Ports: []dataplane.PortMap{{Local: 81, Remote: 8080}}})
	if refs, err = e.DP.Configure(s); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[1].Name != "c" || refs[1].ID != b {
		t.Fatalf("Configure with c: %+v, want c on b's freed id %d", refs, b)
	}
	if got, err := e.DP.Routable(b); err != nil || len(got) != 0 {
		t.Fatalf("c's routable set: %v %v, want empty (b's was cleared)", got, err)
	}
}

// Each service has its own round-robin position: SYNs to two services
// over the same backends, interleaved, go round each service's set on
// their own.
func TestServicesRoundRobinPerService(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Services: []dt.Service{
		{Name: "a", Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}},
		{Name: "b", Listen: secondListen, Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}},
	}})
	dsts := map[string]netip.AddrPort{"a": netip.AddrPortFrom(dt.ListenIP, 80), "b": netip.AddrPortFrom(secondListen, 80)}
	got := map[string][]int{}
	for i, name := range []string{"a", "a", "b", "a", "b", "b", "a", "b"} {
		k := dialService(t, e, uint16(33000+i), dsts[name])
		got[name] = append(got[name], k.backendID())
	}
	want := []int{0, 1, 2, 0}
	if !slices.Equal(got["a"], want) || !slices.Equal(got["b"], want) {
		t.Fatalf("backend ids in SYN order: a %v, b %v; want %v each", got["a"], got["b"], want)
	}
}

// A service that keeps its name but moves to another address keeps its
// pairs to the former one (the prefilter's bits are only added): they
// forward both ways, while a new SYN to the former address passes
// untouched and one to the new address is balanced on the same id.
func TestServicesMovedAddressKeepsPairs(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Services: []dt.Service{
		{Name: "a", Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}, Backends: []int{0}},
		{Name: "b", Listen: secondListen, Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}, Backends: []int{1}},
	}})
	b := e.ServiceID(t, "b")
	oldDst := netip.AddrPortFrom(secondListen, 80)
	kb := dialService(t, e, 33000, oldDst)
	kb.reply(dt.SYN|dt.ACK, 5000, 1001, nil)
	kb.send(dt.ACK, 1001, 5001, nil)

	moved := testnet.XLBExtraIP(1)
	s := e.Settings
	s.Services = slices.Clone(s.Services)
	s.Services[1].Listen = moved
	refs, err := e.DP.Configure(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[1].ID != b || refs[1].State != dataplane.ServiceServing || refs[1].Listen != moved {
		t.Fatalf("Configure with b moved: %+v, want b serving on %s with id %d", refs, moved, b)
	}
	kb.send(dt.ACK|dt.PSH, 1001, 5001, []byte("GET / HTTP/1.0\r\n\r\n"))
	kb.reply(dt.ACK|dt.PSH, 5001, 1019, []byte("HTTP/1.0 200 OK\r\n\r\n"))
	k := &svcConn{t: t, e: e, c: dt.Client(33001), dst: oldDst}
	passesUntouched(t, e, "a new SYN to b's former address", k.syn())
	kn := dialService(t, e, 33002, netip.AddrPortFrom(moved, 80))
	kn.wantService(b, e.Routable[1])
}
