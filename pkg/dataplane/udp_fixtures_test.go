package dataplane_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/sched"
)

// UDP fixtures (issue 31; DESIGN §9): a client's datagram of no pair to a
// UDP service creates a pair as a SYN does (XLB_F_UDP on both entries),
// any datagram of a pair is forwarded both ways and refreshes the entry it
// traverses, the backend's first datagram marks the pair replied and
// takes it out of its service's unreplied count, a zero checksum stays
// zero, fragments pass untouched and are counted, and a service's
// udp_unreplied_max caps its unreplied pairs, the excess passed. Every
// output frame's IPv4 and UDP checksums are verified in full.

// udpLocal and udpRemote are the fixtures' UDP mapping: 53 -> 5353.
const (
	udpLocal  = 53
	udpRemote = 5353
)

// udpEnv is a one-arm environment whose one service is UDP 53 -> 5353
// with cap udpMax (0: dptest's default).
func udpEnv(t *testing.T, udpMax uint32) *dt.Env {
	t.Helper()
	return dt.NewEnv(t, dt.Options{Services: []dt.Service{{Proto: dataplane.ProtoUDP, UDPUnrepliedMax: udpMax,
		Ports: []dataplane.PortMap{{Local: udpLocal, Remote: udpRemote}}}}})
}

// udpStep runs frame on ingress and checks the action, the counters' move
// (step), and when want is not nil the output frame byte for byte and its
// checksums.
func udpStep(t *testing.T, e *dt.Env, what string, frame []byte, ingress dt.Iface, act uint32, want []byte, moves counted) []byte {
	t.Helper()
	out := step(t, e, what, frame, ingress, act, nil, moves)
	if want == nil {
		return out
	}
	if !bytes.Equal(dt.Unpadded(out), dt.Unpadded(want)) {
		t.Fatalf("%s: output frame differs\n got % x\nwant % x", what, dt.Unpadded(out), dt.Unpadded(want))
	}
	if err := dt.VerifyChecksums(dt.Unpadded(out)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return out
}

// udpPair reads the UDP pair of client -> listen:53 and checks that both
// entries are there, of one generation, with FlagUDP.
func udpPair(t *testing.T, e *dt.Env, client netip.AddrPort) dt.Pair {
	t.Helper()
	p, ok, err := e.LookupUDPPair(client, udpLocal)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || p.Rev.Generation == 0 {
		t.Fatalf("no UDP pair for %v (forward entry %v)", client, ok)
	}
	if p.RevKey.Proto != dataplane.IPProtoUDP || p.Fwd.Generation != p.Rev.Generation ||
		p.Fwd.Flags&dataplane.FlagUDP == 0 || p.Rev.Flags&dataplane.FlagUDP == 0 {
		t.Fatalf("pair of %v: reverse key %v proto %d, generations %d/%d, flags %#x/%#x", client, p.RevKey, p.RevKey.Proto,
			p.Fwd.Generation, p.Rev.Generation, p.Fwd.Flags, p.Rev.Flags)
	}
	return p
}

// unreplied is service id's count of pairs without a reply.
func unreplied(t *testing.T, e *dt.Env, id uint16) uint64 {
	t.Helper()
	u, err := e.DP.UDPUnreplied()
	if err != nil {
		t.Fatal(err)
	}
	return u[id]
}

// udpOpen sends the first datagram of client and expects it to create a
// pair and go to the backend the pair names; it returns the pair.
func udpOpen(t *testing.T, e *dt.Env, client netip.AddrPort, payload []byte) dt.Pair {
	t.Helper()
	in := e.UDPFromClient(client, udpLocal, payload)
	out := udpStep(t, e, fmt.Sprintf("first datagram from %v", client), in.Frame(), e.Front, dt.XDPTX, nil, counted{UDPPairsCreated: 1})
	p := udpPair(t, e, client)
	want := e.ToBackend(in, p.Backend(), p.SNATPort()).Frame()
	if !bytes.Equal(dt.Unpadded(out), dt.Unpadded(want)) {
		t.Fatalf("first datagram from %v: output frame differs\n got % x\nwant % x", client, dt.Unpadded(out), dt.Unpadded(want))
	}
	if err := dt.VerifyChecksums(dt.Unpadded(out)); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUDPCreate(t *testing.T) {
	e := udpEnv(t, 0)
	id := e.Services[0].ID
	c := dt.Client(20000)
	p := udpOpen(t, e, c, []byte("query one"))
	if want := netip.AddrPortFrom(e.Routable[0][0].IP, udpRemote); p.Backend() != want {
		t.Fatalf("first pair went to %v, want the round robin's first backend %v", p.Backend(), want)
	}
	if p.Fwd.Flags&dataplane.FlagUDPReplied != 0 || p.Fwd.Flags&dataplane.FlagEstablished != 0 {
		t.Fatalf("new UDP pair's forward flags %#x", p.Fwd.Flags)
	}
	if n := unreplied(t, e, id); n != 1 {
		t.Fatalf("unreplied count %d after the first datagram, want 1", n)
	}
	stats, err := e.DP.AllBackendStats()
	if err != nil {
		t.Fatal(err)
	}
	if s := stats[p.Fwd.MemberId]; s.UDPOpened != 1 || s.Opened != 0 {
		t.Fatalf("member %d: UDP opened %d, TCP opened %d; want 1 and 0", p.Fwd.MemberId, s.UDPOpened, s.Opened)
	}

	// a second datagram uses the same pair
	in := e.UDPFromClient(c, udpLocal, []byte("query two"))
	udpStep(t, e, "second datagram", in.Frame(), e.Front, dt.XDPTX, e.ToBackend(in, p.Backend(), p.SNATPort()).Frame(), counted{})
	if again := udpPair(t, e, c); again.Fwd.Generation != p.Fwd.Generation {
		t.Fatalf("second datagram made generation %d, want %d", again.Fwd.Generation, p.Fwd.Generation)
	}
	// another client port: a new pair, the next backend
	q := udpOpen(t, e, dt.Client(20001), []byte("query"))
	if want := netip.AddrPortFrom(e.Routable[0][1].IP, udpRemote); q.Backend() != want {
		t.Fatalf("second pair went to %v, want %v", q.Backend(), want)
	}
	// no TCP pair on the UDP port: a TCP SYN to 53 is not a service's
	syn := e.FromClient(c, udpLocal, dt.SYN, 1, 0, nil)
	udpStep(t, e, "TCP SYN to the UDP port", syn.Frame(), e.Front, dt.XDPPass, nil, counted{})
}

func TestUDPBothDirections(t *testing.T) {
	e := udpEnv(t, 0)
	id := e.Services[0].ID
	c := dt.Client(20000)
	p := udpOpen(t, e, c, []byte("query"))

	r := e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("answer"))
	udpStep(t, e, "reply", r.Frame(), e.BackendIface(), dt.XDPTX, e.ToClient(r, c, udpLocal).Frame(), counted{})
	got := udpPair(t, e, c)
	if got.Fwd.Flags&dataplane.FlagUDPReplied == 0 || got.Rev.Flags&dataplane.FlagUDPReplied == 0 {
		t.Fatalf("after the reply: flags %#x/%#x, want FlagUDPReplied on both", got.Fwd.Flags, got.Rev.Flags)
	}
	if n := unreplied(t, e, id); n != 0 {
		t.Fatalf("unreplied count %d after the reply, want 0", n)
	}
	// a second reply and another request: forwarded, the count stays
	r2 := e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("answer two"))
	udpStep(t, e, "second reply", r2.Frame(), e.BackendIface(), dt.XDPTX, e.ToClient(r2, c, udpLocal).Frame(), counted{})
	in := e.UDPFromClient(c, udpLocal, []byte("query two"))
	udpStep(t, e, "second query", in.Frame(), e.Front, dt.XDPTX, e.ToBackend(in, p.Backend(), p.SNATPort()).Frame(), counted{})
	if n := unreplied(t, e, id); n != 0 {
		t.Fatalf("unreplied count %d, want 0", n)
	}
	// a datagram from the backend to a SNAT port of no pair passes
	stray := e.UDPFromBackend(p.Backend(), p.SNATPort()+1, []byte("stray"))
	udpStep(t, e, "backend datagram of no pair", stray.Frame(), e.BackendIface(), dt.XDPPass, nil, counted{})
}

func TestUDPRefresh(t *testing.T) {
	e := udpEnv(t, 0)
	c := dt.Client(20000)
	p := udpOpen(t, e, c, []byte("query"))
	created := p.Fwd.LastSeen
	now := waitPast(t, e, created)

	in := e.UDPFromClient(c, udpLocal, []byte("query two"))
	udpStep(t, e, "client datagram", in.Frame(), e.Front, dt.XDPTX, nil, counted{})
	got := udpPair(t, e, c)
	if int32(got.Fwd.LastSeen-now) < 0 || got.Rev.LastSeen != created {
		t.Fatalf("after the client's datagram: last seen %d/%d, want forward >= %d, reverse %d", got.Fwd.LastSeen, got.Rev.LastSeen, now, created)
	}
	fwdSeen := got.Fwd.LastSeen
	now = waitPast(t, e, fwdSeen)
	r := e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("answer"))
	udpStep(t, e, "backend datagram", r.Frame(), e.BackendIface(), dt.XDPTX, nil, counted{})
	got = udpPair(t, e, c)
	if got.Fwd.LastSeen != fwdSeen || int32(got.Rev.LastSeen-now) < 0 {
		t.Fatalf("after the backend's datagram: last seen %d/%d, want forward %d, reverse >= %d", got.Fwd.LastSeen, got.Rev.LastSeen, fwdSeen, now)
	}
}

// waitPast returns once the data path's clock (its low 32 bits, as flow
// entries store it) reads later than last: a datagram sent afterwards
// stamps its entry later. It polls and fails the test after 5 s.
func waitPast(t *testing.T, e *dt.Env, last uint32) uint32 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if n := uint32(e.Now(t)); int32(n-last) > 0 {
			return n
		}
		time.Sleep(200 * time.Microsecond)
	}
	t.Fatalf("data path clock stuck at %d", last)
	return 0
}

// udpCheck is the UDP checksum field of an Ethernet/IPv4 frame.
func udpCheck(frame []byte) uint16 {
	l4 := 14 + int(frame[14]&0x0f)*4
	return binary.BigEndian.Uint16(frame[l4+6:])
}

func TestUDPZeroChecksumKept(t *testing.T) {
	e := udpEnv(t, 0)
	c := dt.Client(20000)
	in := e.UDPFromClient(c, udpLocal, []byte("query"))
	in.UDPChecksumOff = true
	out := udpStep(t, e, "first datagram without a checksum", in.Frame(), e.Front, dt.XDPTX, nil, counted{UDPPairsCreated: 1})
	p := udpPair(t, e, c)
	want := e.ToBackend(in, p.Backend(), p.SNATPort())
	udpStep(t, e, "again", in.Frame(), e.Front, dt.XDPTX, want.Frame(), counted{})
	if udpCheck(dt.Unpadded(out)) != 0 {
		t.Fatalf("checksum %#04x toward the backend, want 0", udpCheck(out))
	}
	r := e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("answer"))
	r.UDPChecksumOff = true
	out = udpStep(t, e, "reply without a checksum", r.Frame(), e.BackendIface(), dt.XDPTX, e.ToClient(r, c, udpLocal).Frame(), counted{})
	if udpCheck(dt.Unpadded(out)) != 0 {
		t.Fatalf("checksum %#04x toward the client, want 0", udpCheck(out))
	}

	// a datagram whose rewritten checksum computes to 0 leaves with 0xffff
	to := netip.AddrPortFrom(e.SNAT, p.SNATPort())
	q := e.UDPFromClient(c, udpLocal, dt.ZeroSumPayload(to, p.Backend(), []byte("crafted!")))
	out = udpStep(t, e, "crafted datagram", q.Frame(), e.Front, dt.XDPTX, nil, counted{})
	if got := udpCheck(dt.Unpadded(out)); got != 0xffff {
		t.Fatalf("crafted datagram's checksum %#04x toward the backend, want 0xffff", got)
	}
	if err := dt.VerifyChecksums(dt.Unpadded(out)); err != nil {
		t.Fatal(err)
	}
	if udpCheck(q.Frame()) == 0 || udpCheck(q.Frame()) == 0xffff {
		t.Fatalf("the crafted input's own checksum is %#04x: not a test of the rewrite", udpCheck(q.Frame()))
	}
}

func TestUDPFragmentsPassed(t *testing.T) {
	e := udpEnv(t, 0)
	c := dt.Client(20000)
	p := udpOpen(t, e, c, []byte("query"))
	big := bytes.Repeat([]byte("0123456789abcdef"), 80)

	before := flowStates(t, e)
	frags := fragments(e.UDPFromClient(c, udpLocal, big).Frame(), fragSize)
	for i, f := range frags {
		step(t, e, fmt.Sprintf("fragment %d on a live pair", i), f, e.Front, dt.XDPPass, f, counted{UDPFragsPassed: 1})
	}
	frags = fragments(e.UDPFromClient(dt.Client(20001), udpLocal, big).Frame(), fragSize)
	for i, f := range frags {
		step(t, e, fmt.Sprintf("fragment %d of no pair", i), f, e.Front, dt.XDPPass, f, counted{UDPFragsPassed: 1})
	}
	frags = fragments(e.UDPFromBackend(p.Backend(), p.SNATPort(), big).Frame(), fragSize)
	for i, f := range frags {
		step(t, e, fmt.Sprintf("backend fragment %d", i), f, e.BackendIface(), dt.XDPPass, f, counted{UDPFragsPassed: 1})
	}
	if after := flowStates(t, e); len(after) != len(before) {
		t.Fatalf("fragments changed the flow map: %d entries, was %d", len(after), len(before))
	}
}

func TestUDPFloodCap(t *testing.T) {
	const capN = 8
	e := udpEnv(t, capN)
	id := e.Services[0].ID
	var pairs []dt.Pair
	for i := range 20 {
		c := dt.Client(uint16(21000 + i))
		if i < capN {
			pairs = append(pairs, udpOpen(t, e, c, []byte("flood")))
			continue
		}
		in := e.UDPFromClient(c, udpLocal, []byte("flood"))
		udpStep(t, e, fmt.Sprintf("datagram %d over the cap", i), in.Frame(), e.Front, dt.XDPPass, in.Frame(), counted{UDPOverCap: 1})
		if _, ok, _ := e.LookupUDPPair(c, udpLocal); ok {
			t.Fatalf("datagram %d over the cap made a pair", i)
		}
	}
	if n := unreplied(t, e, id); n != capN {
		t.Fatalf("unreplied %d, want %d", n, capN)
	}
	sc, err := e.DP.ServiceCounters()
	if err != nil {
		t.Fatal(err)
	}
	if sc[id].UDPOverCap != 12 {
		t.Fatalf("service over-cap count %d, want 12", sc[id].UDPOverCap)
	}

	// one pair replies: one more is admitted, then the cap is full again
	p := pairs[0]
	r := e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("answer"))
	udpStep(t, e, "reply", r.Frame(), e.BackendIface(), dt.XDPTX, e.ToClient(r, p.FwdKey.Src(), udpLocal).Frame(), counted{})
	udpOpen(t, e, dt.Client(22000), []byte("admitted"))
	in := e.UDPFromClient(dt.Client(22001), udpLocal, []byte("over"))
	udpStep(t, e, "over the cap again", in.Frame(), e.Front, dt.XDPPass, nil, counted{UDPOverCap: 1})

	// the replied pair keeps working while the cap is full
	q := e.UDPFromClient(p.FwdKey.Src(), udpLocal, []byte("query two"))
	udpStep(t, e, "replied pair's query", q.Frame(), e.Front, dt.XDPTX, e.ToBackend(q, p.Backend(), p.SNATPort()).Frame(), counted{})
	r = e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("answer two"))
	udpStep(t, e, "replied pair's answer", r.Frame(), e.BackendIface(), dt.XDPTX, e.ToClient(r, p.FwdKey.Src(), udpLocal).Frame(), counted{})
	if n := unreplied(t, e, id); n != capN {
		t.Fatalf("unreplied %d at the end, want %d", n, capN)
	}
}

func TestUDPNoBackendPasses(t *testing.T) {
	e := udpEnv(t, 0)
	if err := e.DP.SetRoutable(e.Services[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	in := e.UDPFromClient(dt.Client(20000), udpLocal, []byte("query"))
	udpStep(t, e, "datagram without a backend", in.Frame(), e.Front, dt.XDPPass, in.Frame(), counted{UDPNoBackend: 1})
	if n := unreplied(t, e, e.Services[0].ID); n != 0 {
		t.Fatalf("unreplied %d, want 0 (the admission is undone)", n)
	}
	if _, ok, _ := e.LookupUDPPair(dt.Client(20000), udpLocal); ok {
		t.Fatal("a pair without a backend")
	}
}

func TestUDPShutdownFlag(t *testing.T) {
	e := udpEnv(t, 0)
	c := dt.Client(20000)
	p := udpOpen(t, e, c, []byte("query"))
	if err := e.DP.SetShutdown(true); err != nil {
		t.Fatal(err)
	}
	in := e.UDPFromClient(c, udpLocal, []byte("query two"))
	udpStep(t, e, "live pair's datagram", in.Frame(), e.Front, dt.XDPTX, e.ToBackend(in, p.Backend(), p.SNATPort()).Frame(), counted{})
	r := e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("answer"))
	udpStep(t, e, "live pair's reply", r.Frame(), e.BackendIface(), dt.XDPTX, e.ToClient(r, c, udpLocal).Frame(), counted{})
	n := e.UDPFromClient(dt.Client(20001), udpLocal, []byte("new"))
	udpStep(t, e, "new datagram", n.Frame(), e.Front, dt.XDPPass, n.Frame(), counted{})
	if _, ok, _ := e.LookupUDPPair(dt.Client(20001), udpLocal); ok {
		t.Fatal("a new pair while shutting down")
	}
}

// ICMP errors about a UDP pair are translated both ways: the quoted
// datagram's addresses, ports and checksum (a zero one stays 0), and the
// pair stays until its timeout.
func TestUDPICMPTranslated(t *testing.T) {
	kinds := []struct {
		name       string
		typ, code  uint8
		rest       uint32
		zeroChecks bool
	}{
		{"port_unreachable", icmpUnreachable, codePortUnreach, 0, false},
		{"frag_needed", icmpUnreachable, codeFragNeeded, 1400, false},
		{"time_exceeded", icmpTimeExceeded, codeTTLInTransit, 0, false},
		{"port_unreachable_zero_checksum", icmpUnreachable, codePortUnreach, 0, true},
	}
	for _, k := range kinds {
		for _, from := range []sender{backendSide, clientSide} {
			name := k.name + "/backend_to_client"
			if from == clientSide {
				name = k.name + "/client_to_backend"
			}
			t.Run(name, func(t *testing.T) {
				e := udpEnv(t, 0)
				c := dt.Client(20000)
				p := udpOpen(t, e, c, []byte("query"))
				var orig dt.Segment
				var in, out icmpMsg
				ingress := e.BackendIface()
				if from == backendSide {
					orig = e.UDPFromClient(c, udpLocal, []byte("quoted query"))
					in = icmpMsg{Src: p.Backend().Addr(), Dst: e.SNAT, DstMAC: e.BackendIface().MAC}
					out = icmpMsg{SrcMAC: e.Front.MAC, DstMAC: dt.MAC(dt.ClientIP), Src: dt.ListenIP, Dst: dt.ClientIP}
				} else {
					orig = e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("quoted answer"))
					in = icmpMsg{Src: dt.ClientIP, Dst: dt.ListenIP, DstMAC: e.Front.MAC}
					out = icmpMsg{SrcMAC: e.BackendIface().MAC, DstMAC: dt.MAC(p.Backend().Addr()), Src: e.SNAT, Dst: p.Backend().Addr()}
					ingress = e.Front
				}
				orig.UDPChecksumOff = k.zeroChecks
				ing := e.Front
				if from == clientSide {
					ing = e.BackendIface()
				}
				sentFrame := udpStep(t, e, "the quoted datagram", orig.Frame(), ing, dt.XDPTX, nil, counted{})
				sent := orig
				sent.TTL = 63
				in.SrcMAC, in.TTL, in.Type, in.Code, in.Rest = dt.MAC(in.Src), 64, k.typ, k.code, k.rest
				in.Quote = quoted(dt.Unpadded(sentFrame)[14:], 0)
				out.TTL, out.Type, out.Code, out.Rest = 63, k.typ, k.code, k.rest
				out.Quote = quoted(datagram(sent), 0)
				moves := counted{ICMPToClient: 1}
				if from == clientSide {
					moves = counted{ICMPToBackend: 1}
				}
				got := step(t, e, "ICMP", in.frame(), ingress, dt.XDPTX, out.frame(), moves)
				if k.zeroChecks && udpCheck(dt.Unpadded(got)[28:]) != 0 {
					t.Fatalf("quoted checksum %#04x, want 0", udpCheck(dt.Unpadded(got)[28:]))
				}
				if after := udpPair(t, e, c); after.Fwd.Generation != p.Fwd.Generation {
					t.Fatalf("pair generation %d after the ICMP, want %d", after.Fwd.Generation, p.Fwd.Generation)
				}
			})
		}
	}
}

// A TCP pair and a UDP pair toward one backend take the same port number
// from separate bits: the UDP port space is a half of its own.
func TestUDPSNATSpaceSeparate(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Services: []dt.Service{
		{Backends: []int{0}},
		{Name: "dns", Proto: dataplane.ProtoUDP, Ports: []dataplane.PortMap{{Local: udpLocal, Remote: udpRemote}}, Backends: []int{0}},
	}})
	k := dial(t, e, 33000, nil)
	u := udpOpen(t, e, dt.Client(33000), []byte("query"))
	if u.SNATPort() != k.p.SNATPort() || u.Backend().Addr() != k.p.Backend().Addr() {
		t.Fatalf("UDP pair %v port %d, TCP pair %v port %d: want the same backend and port number",
			u.Backend(), u.SNATPort(), k.p.Backend(), k.p.SNATPort())
	}
	bid := uint32(u.Fwd.BackendId)
	for _, proto := range []uint8{dataplane.IPProtoTCP, dataplane.IPProtoUDP} {
		on, err := e.DP.FixtureSNATPortBit(bid, proto, 0, u.SNATPort())
		if err != nil {
			t.Fatal(err)
		}
		if !on {
			t.Fatalf("protocol %d: the port's bit is clear", proto)
		}
	}
	// the UDP pair's reply and the TCP pair's segments each find their own pair
	r := e.UDPFromBackend(u.Backend(), u.SNATPort(), []byte("answer"))
	udpStep(t, e, "UDP reply", r.Frame(), e.BackendIface(), dt.XDPTX, e.ToClient(r, dt.Client(33000), udpLocal).Frame(), counted{})
	k.handshake(nil, 1000)
}

// reapUDP sends one request about key (of generation gen) to the reaper
// at now with timeouts of 30 and 120 ticks, and returns its answer.
func reapUDP(t *testing.T, e *dt.Env, op dataplane.ReapOp, key dataplane.FlowKey, gen uint32, now uint32) dataplane.ReapRequest {
	t.Helper()
	reqs := []dataplane.ReapRequest{{Key: key, Generation: gen, Op: op}}
	c := dataplane.ReapClock{Now: dataplane.Jiffies(now), TimeWait: 1000, OrphanTTL: 1000, EmbryonicTTL: 1000, SNATHold: 1000,
		UDPTimeout: 30, UDPStreamTimeout: 120}
	if err := e.DP.Reap(reqs, c); err != nil {
		t.Fatal(err)
	}
	return reqs[0]
}

// reapedOf is member mid's reaper counts.
func reapedOf(t *testing.T, e *dt.Env, mid uint16) dataplane.ReapedCounts {
	t.Helper()
	r, err := e.DP.AllReapedCounts()
	if err != nil {
		t.Fatal(err)
	}
	return r[mid]
}

func TestReapUDP(t *testing.T) {
	e := udpEnv(t, 0)
	id := e.Services[0].ID

	t.Run("unreplied", func(t *testing.T) {
		c := dt.Client(20000)
		p := udpOpen(t, e, c, []byte("query"))
		last := p.Fwd.LastSeen
		if q := reapUDP(t, e, dataplane.ReapOrphan, p.FwdKey, p.Fwd.Generation, last+5000); q.Result != dataplane.ReapKept {
			t.Fatalf("orphan request on a UDP pair: %v, want kept", q.Result)
		}
		q := reapUDP(t, e, dataplane.ReapUDP, p.FwdKey, p.Fwd.Generation, last+29)
		if q.Result != dataplane.ReapKept || q.Next != last+30 {
			t.Fatalf("at +29: %v next %d, want kept next %d", q.Result, q.Next, last+30)
		}
		if q := reapUDP(t, e, dataplane.ReapUDP, p.RevKey, p.Rev.Generation, last+500); q.Result != dataplane.ReapKept {
			t.Fatalf("UDP request on the reverse key: %v, want kept", q.Result)
		}
		q = reapUDP(t, e, dataplane.ReapUDP, p.FwdKey, p.Fwd.Generation, last+30)
		if q.Result != dataplane.Reaped {
			t.Fatalf("at +30: %v, want reaped", q.Result)
		}
		if _, ok, _ := e.LookupUDPPair(c, udpLocal); ok {
			t.Fatal("the pair is still there")
		}
		if _, err := e.DP.LookupFlow(p.RevKey); err != dataplane.ErrNotFound {
			t.Fatalf("reverse entry: %v, want gone", err)
		}
		if on, err := e.DP.FixtureSNATPortBit(uint32(p.Fwd.BackendId), dataplane.IPProtoUDP, 0, p.SNATPort()); err != nil || on {
			t.Fatalf("the port's bit after the expiry: %v %v, want clear", on, err)
		}
		if n := unreplied(t, e, id); n != 0 {
			t.Fatalf("unreplied %d, want 0", n)
		}
		if r := reapedOf(t, e, p.Fwd.MemberId); r.UDPUnreplied != 1 || r.UDPReplied != 0 {
			t.Fatalf("reaped counts %+v, want one unreplied", r)
		}
		// the same client port again: a fresh pair
		again := udpOpen(t, e, c, []byte("query again"))
		if again.Fwd.Generation == p.Fwd.Generation {
			t.Fatal("the same generation after the expiry")
		}
	})

	t.Run("replied", func(t *testing.T) {
		c := dt.Client(20001)
		p := udpOpen(t, e, c, []byte("query"))
		waitPast(t, e, p.Fwd.LastSeen)
		r := e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("answer"))
		udpStep(t, e, "reply", r.Frame(), e.BackendIface(), dt.XDPTX, nil, counted{})
		got := udpPair(t, e, c)
		later := got.Rev.LastSeen
		if int32(later-got.Fwd.LastSeen) <= 0 {
			t.Fatalf("reverse last seen %d not after forward %d", later, got.Fwd.LastSeen)
		}
		// idle from the later entry's datagram, for the stream timeout
		q := reapUDP(t, e, dataplane.ReapUDP, p.FwdKey, p.Fwd.Generation, got.Fwd.LastSeen+30)
		if q.Result != dataplane.ReapKept || q.Next != later+120 {
			t.Fatalf("replied pair at forward +30: %v next %d, want kept next %d", q.Result, q.Next, later+120)
		}
		q = reapUDP(t, e, dataplane.ReapUDP, p.FwdKey, p.Fwd.Generation, later+120)
		if q.Result != dataplane.Reaped {
			t.Fatalf("at +120: %v, want reaped", q.Result)
		}
		if rc := reapedOf(t, e, p.Fwd.MemberId); rc.UDPReplied != 1 {
			t.Fatalf("reaped counts %+v, want one replied", rc)
		}
		if n := unreplied(t, e, id); n != 1 {
			t.Fatalf("unreplied %d, want 1 (the first subtest's new pair)", n)
		}
	})

	t.Run("refreshed after the decision", func(t *testing.T) {
		c := dt.Client(20002)
		p := udpOpen(t, e, c, []byte("query"))
		waitPast(t, e, p.Fwd.LastSeen)
		in := e.UDPFromClient(c, udpLocal, []byte("query two"))
		udpStep(t, e, "refresh", in.Frame(), e.Front, dt.XDPTX, nil, counted{})
		now := udpPair(t, e, c).Fwd.LastSeen
		q := reapUDP(t, e, dataplane.ReapUDP, p.FwdKey, p.Fwd.Generation, p.Fwd.LastSeen+30)
		if q.Result != dataplane.ReapKept || q.Next != now+30 {
			t.Fatalf("refreshed pair: %v next %d, want kept next %d", q.Result, q.Next, now+30)
		}
	})

	t.Run("lone reverse", func(t *testing.T) {
		c := dt.Client(20003)
		p := udpOpen(t, e, c, []byte("query"))
		before := unreplied(t, e, id)
		e.DeleteFlow(t, p.FwdKey) // lost outside XLB, unclaimed
		if q := reapUDP(t, e, dataplane.ReapCheck, p.RevKey, p.Rev.Generation, p.Rev.LastSeen); q.Result != dataplane.ReapLoneFound {
			t.Fatalf("check: %v, want lone found", q.Result)
		}
		if q := reapUDP(t, e, dataplane.ReapLone, p.RevKey, p.Rev.Generation, p.Rev.LastSeen); q.Result != dataplane.Reaped {
			t.Fatalf("lone: %v, want reaped", q.Result)
		}
		if n := unreplied(t, e, id); n != before-1 {
			t.Fatalf("unreplied %d, want %d", n, before-1)
		}
		if r := reapedOf(t, e, p.Fwd.MemberId); r.LoneUDP != 1 {
			t.Fatalf("reaped counts %+v, want one lone UDP entry", r)
		}
		if on, err := e.DP.FixtureSNATPortBit(uint32(p.Fwd.BackendId), dataplane.IPProtoUDP, 0, p.SNATPort()); err != nil || on {
			t.Fatalf("the port's bit: %v %v, want clear", on, err)
		}
	})
}

// A UDP service's Maglev pick is the table's entry at pkg/sched's
// five-tuple hash with protocol 17.
func TestUDPMaglevHash(t *testing.T) {
	var backends []netip.Addr
	for i := range 7 {
		backends = append(backends, testnet.OneArmBackendIP(i))
	}
	e := dt.NewEnv(t, dt.Options{Backends: backends, MaxConnections: 8192, SNATPortLo: 20000, SNATPortHi: 29999,
		Services: []dt.Service{{Proto: dataplane.ProtoUDP, UDPUnrepliedMax: 8192, Ports: []dataplane.PortMap{{Local: 80, Remote: 8080}}}}})
	s := &schedEnv{Env: e, svc: e.Services[0].ID}
	s.configure(t, dataplane.SchedulerMaglev, dataplane.MaglevHashFiveTuple)
	refs := slices.Clone(e.Routable[0])
	for i := range refs {
		refs[i].Name, refs[i].Weight = fmt.Sprintf("backend-%d", refs[i].ID), []uint16{1, 2, 3, 4, 1, 2, 3}[i]
	}
	s.publish(t, refs)
	tbl := s.table(t, sched.Maglev)
	tcpDiffers := 0
	for i := range 300 {
		c := schedClient(i)
		in := dt.Segment{Proto: dt.UDP, SrcMAC: dt.MAC(dt.ClientIP), DstMAC: e.Front.MAC, Src: c, Dst: schedListen, ID: 7, Payload: []byte("q")}
		if act, _, err := e.Run(in.Frame(), e.Front); err != nil || act != dt.XDPTX {
			t.Fatalf("datagram from %v: %s %v", c, dt.ActionName(act), err)
		}
		fwd, err := e.DP.LookupFlow(dataplane.NewUDPFlowKey(c, schedListen, dataplane.DirClient))
		if err != nil {
			t.Fatalf("datagram from %v: forward entry: %v", c, err)
		}
		h := sched.HashFiveTuple(c.Addr(), schedListen.Addr(), c.Port(), schedListen.Port(), 17)
		if want := s.at(tbl, uint64(h)); int(fwd.BackendId) != want {
			t.Fatalf("datagram %d from %v (hash %#x): backend id %d, the table names %d", i, c, h, fwd.BackendId, want)
		}
		if s.at(tbl, uint64(sched.HashFiveTuple(c.Addr(), schedListen.Addr(), c.Port(), schedListen.Port(), 6))) != int(fwd.BackendId) {
			tcpDiffers++
		}
	}
	if tcpDiffers == 0 {
		t.Fatal("every pick equals TCP's hash too: the protocol is not in the hash")
	}
}

// A service that turns UDP under its name keeps its id and its TCP pairs,
// which drain; its listen keys are the UDP ones from then on.
func TestServiceProtoChange(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Services: []dt.Service{
		{},
		{Name: "dns", Proto: dataplane.ProtoUDP, Ports: []dataplane.PortMap{{Local: udpLocal, Remote: udpRemote}}},
	}})
	k := dial(t, e, 33000, nil)
	settings := e.Settings
	settings.Services = slices.Clone(settings.Services)
	settings.Services[0].Proto, settings.Services[0].UDPUnrepliedMax = dataplane.ProtoUDP, 16
	refs, err := e.DP.Configure(settings)
	if err != nil {
		t.Fatal(err)
	}
	if refs[0].ID != e.Services[0].ID || refs[0].Proto != dataplane.ProtoUDP {
		t.Fatalf("the service after the change: %+v, want id %d, udp", refs[0], e.Services[0].ID)
	}
	// the TCP pair still forwards
	k.handshake(nil, 1000)
	// a new SYN to the port is not a service's any more
	syn := e.FromClient(dt.Client(33001), 80, dt.SYN, 1, 0, nil)
	udpStep(t, e, "TCP SYN after the change", syn.Frame(), e.Front, dt.XDPPass, nil, counted{})
	// a datagram to it creates a UDP pair
	c := dt.Client(33002)
	in := e.UDPFromClient(c, 80, []byte("query"))
	udpStep(t, e, "datagram after the change", in.Frame(), e.Front, dt.XDPTX, nil, counted{UDPPairsCreated: 1})
	p, ok, err := e.LookupUDPPair(c, 80)
	if err != nil || !ok || p.Fwd.ServiceId != e.Services[0].ID {
		t.Fatalf("UDP pair after the change: %v %v, service %d", ok, err, p.Fwd.ServiceId)
	}
}

// Freeing a UDP service's id zeroes its unreplied count and its counters,
// so the id's next service starts at 0.
func TestUDPFreeServiceZeroesItsCounts(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Services: []dt.Service{
		{},
		{Name: "dns", Proto: dataplane.ProtoUDP, UDPUnrepliedMax: 1, Ports: []dataplane.PortMap{{Local: udpLocal, Remote: udpRemote}}},
	}})
	id := e.Services[1].ID
	udpOpen(t, e, dt.Client(20000), []byte("query"))
	over := e.UDPFromClient(dt.Client(20001), udpLocal, []byte("over"))
	udpStep(t, e, "over the cap", over.Frame(), e.Front, dt.XDPPass, nil, counted{UDPOverCap: 1})
	s := e.Settings
	s.Services = s.Services[:1]
	if _, err := e.DP.Configure(s); err != nil {
		t.Fatal(err)
	}
	p, _, err := e.LookupUDPPair(dt.Client(20000), udpLocal)
	if err != nil {
		t.Fatal(err)
	}
	e.DeleteFlow(t, p.FwdKey)
	e.DeleteFlow(t, p.RevKey)
	if err := e.DP.FreeService(id); err != nil {
		t.Fatal(err)
	}
	if n := unreplied(t, e, id); n != 0 {
		t.Fatalf("unreplied %d after FreeService, want 0", n)
	}
	sc, err := e.DP.ServiceCounters()
	if err != nil {
		t.Fatal(err)
	}
	if sc[id].UDPOverCap != 0 {
		t.Fatalf("over-cap count %d after FreeService, want 0", sc[id].UDPOverCap)
	}
}

// A UDP service on bitmaps loaded without a UDP half takes a reload (a new
// process sizes them): Configure refuses it.
func TestUDPServiceNeedsTheUDPHalf(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	s := e.Settings
	s.Services = append(slices.Clone(s.Services), dataplane.ServiceSettings{Name: "dns", Listen: dt.ListenIP,
		Proto: dataplane.ProtoUDP, UDPUnrepliedMax: 8, Ports: []dataplane.PortMap{{Local: udpLocal, Remote: udpRemote}}})
	if _, err := e.DP.Configure(s); err == nil {
		t.Fatal("a UDP service configured on bitmaps without a UDP half")
	}
}
