package dataplane_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// runFixtures runs every row of a packet-fixture table as a subtest, each
// in a fresh environment: the Given frames, the shutdown flag and the map
// surgery, then the input through BPF_PROG_TEST_RUN; it compares the
// action, the output frame (byte for byte with the frame gopacket builds
// for the expected fields; checksums verified independently unless the
// frame must come back unchanged) and the state: counters, closures, flow
// map entries and the pair cli:33000 -> listen:80.
func runFixtures(t *testing.T, rows []fixture) {
	for _, f := range rows {
		t.Run(f.Name, func(t *testing.T) { f.run(t) })
	}
}

func (f fixture) run(t *testing.T) {
	e := dt.NewEnv(t, f.Env)
	for _, g := range f.Given {
		s := g.segment(e)
		act, _, err := e.Run(s.Frame(), g.ingress(e))
		if err != nil || (act != dt.XDPTX && act != dt.XDPRedirect) {
			t.Fatalf("given frame %+v: action %s err %v", s, dt.ActionName(act), err)
		}
	}
	f.setShutdown(t, e)
	f.breakPair(t, e)
	old, hadPair := e.LookupPair(t, cli, 80)
	if f.Pair.Frozen {
		if !dataplane.Terminal(old.Fwd.Flags) {
			t.Fatalf("given frames left the pair open (flags %#x)", old.Fwd.Flags)
		}
		e.WaitTick(t, e.Now(t))
	}
	before := e.Counters(t)

	in := f.In.segment(e)
	frame := f.In.frame(in)
	ingress := f.In.ingress(e)
	act, got, err := e.Run(frame, ingress)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if act != f.Action {
		t.Fatalf("action %s, want %s", dt.ActionName(act), dt.ActionName(f.Action))
	}
	if d := dt.Diff(got, f.Out.frame(e, in, frame, ingress)); d != "" {
		t.Fatalf("output frame differs:\n%s", d)
	}
	if f.Out.To != unchanged {
		if err := dt.VerifyChecksums(got); err != nil {
			t.Fatalf("checksums: %v", err)
		}
	}

	after := e.Counters(t)
	f.checkCounters(t, before, after)
	if n := len(e.Flows(t)); n != f.Entries {
		t.Fatalf("flow map has %d entries, want %d", n, f.Entries)
	}
	f.checkPair(t, e, old, hadPair)
}

// segment is the dptest segment the row describes.
func (s seg) segment(e *dt.Env) dt.Segment {
	var d dt.Segment
	if s.From == backend {
		d = e.FromBackend(netip.AddrPortFrom(e.Backends[0], 8080), orDefault(s.SNAT, 40000), s.Flags, s.Seq, s.Ack, s.Data)
	} else {
		d = e.FromClient(dt.Client(orDefault(s.CPort, 33000)), orDefault(s.LPort, 80), s.Flags, s.Seq, s.Ack, s.Data)
	}
	if s.MSS {
		d.Options = mss
	}
	d.TTL, d.Proto, d.MoreFragments, d.FragOffset = s.TTL, s.Proto, s.MF, s.FragOffset
	if s.Dst.IsValid() {
		d.Dst = netip.AddrPortFrom(s.Dst, d.Dst.Port())
	}
	if s.DstMAC != nil {
		d.DstMAC = s.DstMAC
	}
	if s.IPv6 {
		d.Src = netip.AddrPortFrom(netip.MustParseAddr("2001:db8::20"), d.Src.Port())
		d.Dst = netip.AddrPortFrom(netip.MustParseAddr("2001:db8::10"), d.Dst.Port())
	}
	if s.IPOptions {
		d.IPOptions = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
	}
	return d
}

// frame builds d (gopacket, through dptest) and damages it as the row says.
func (s seg) frame(d dt.Segment) []byte {
	f := d.Frame()
	const doff = 14 + 20 + 12 // TCP data offset byte behind a bare IPv4 header
	if s.DataOffset != 0 {
		f[doff] = s.DataOffset<<4 | f[doff]&0x0f
	}
	if s.CutTo != 0 {
		f = f[:s.CutTo]
	}
	return f[:len(f)-s.CutTail]
}

// ingress is the interface the frame arrives on.
func (s seg) ingress(e *dt.Env) dt.Iface {
	if s.From == backend {
		return e.BackendIface()
	}
	return e.Front
}

func orDefault(v, def uint16) uint16 {
	if v == 0 {
		return def
	}
	return v
}

// frame is the output frame the row expects for input segment in, sent as
// frame on ingress.
func (o out) frame(e *dt.Env, in dt.Segment, frame []byte, ingress dt.Iface) []byte {
	switch o.To {
	case toBackend:
		return e.ToBackend(in, netip.AddrPortFrom(e.Backends[o.Backend], o.Port), o.SNAT).Frame()
	case toClient:
		return e.ToClient(in, cli, o.Port).Frame()
	case reset:
		return dt.Segment{SrcMAC: ingress.MAC, DstMAC: in.SrcMAC, Src: in.Dst, Dst: in.Src,
			Seq: o.Seq, Ack: o.Ack, Flags: dt.RST | dt.ACK}.Unpadded()
	}
	return frame
}

func (f fixture) setShutdown(t *testing.T, e *dt.Env) {
	t.Helper()
	if f.Shutdown == running {
		return
	}
	if err := e.DP.SetShutdown(true); err != nil {
		t.Fatal(err)
	}
	if f.Shutdown == shutdownCleared {
		if err := e.DP.SetShutdown(false); err != nil {
			t.Fatal(err)
		}
	}
}

func (f fixture) breakPair(t *testing.T, e *dt.Env) {
	t.Helper()
	switch f.Break {
	case dropReverse:
		e.DeleteFlow(t, e.MustPair(t, cli, 80).RevKey)
	case dropForward:
		e.DeleteFlow(t, dt.ForwardKey(cli, 80))
	case otherReverse:
		p := e.MustPair(t, cli, 80)
		v := e.DeleteFlow(t, p.RevKey)
		v.Generation += 1000
		if err := e.DP.PutFlow(p.RevKey, v); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCounters compares the change of every counter with Counted plus the
// action's +1, the absolute closure counters with Closed, and fails on any
// XDP_ABORTED since load.
func (f fixture) checkCounters(t *testing.T, before, after dataplane.Counters) {
	t.Helper()
	want := f.Counted
	want.Actions[f.Action]++
	if d := minus(after, before); d != want {
		t.Fatalf("counters moved by %s, want %s", moved(d), moved(want))
	}
	if got := (closures{after.ClosedClientFIN, after.ClosedBackendFIN, after.ClosedClientRST, after.ClosedBackendRST}); got != f.Closed {
		t.Fatalf("closures since load %+v, want %+v", got, f.Closed)
	}
	if after.Actions[dt.XDPAborted] != 0 {
		t.Fatalf("XDP_ABORTED counted %d times", after.Actions[dt.XDPAborted])
	}
}

// minus is a - b field by field (every field of Counters is a uint64 or an
// array of them).
func minus(a, b dataplane.Counters) dataplane.Counters {
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(b)
	for i := range va.NumField() {
		fa, fb := va.Field(i), vb.Field(i)
		if fa.Kind() == reflect.Array {
			for j := range fa.Len() {
				fa.Index(j).SetUint(fa.Index(j).Uint() - fb.Index(j).Uint())
			}
			continue
		}
		fa.SetUint(fa.Uint() - fb.Uint())
	}
	return a
}

// moved names the non-zero counters of c, "nothing" when all are zero.
func moved(c dataplane.Counters) string {
	var parts []string
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		name, f := v.Type().Field(i).Name, v.Field(i)
		if f.Kind() == reflect.Array {
			for j := range f.Len() {
				if n := f.Index(j).Uint(); n != 0 {
					parts = append(parts, fmt.Sprintf("%s[%s]+%d", name, dt.ActionName(uint32(j)), n))
				}
			}
		} else if n := f.Uint(); n != 0 {
			parts = append(parts, fmt.Sprintf("%s+%d", name, n))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " ")
}

// checkPair compares the pair cli:33000 -> listen:80 with f.Pair; old is
// the pair as it was just before the input.
func (f fixture) checkPair(t *testing.T, e *dt.Env, old dt.Pair, hadPair bool) {
	t.Helper()
	w := f.Pair
	p, ok := e.LookupPair(t, cli, 80)
	switch {
	case w.Is == none:
		if ok {
			t.Fatalf("pair %+v present, want none", p)
		}
		return
	case !ok:
		t.Fatalf("no forward entry %v, want one", dt.ForwardKey(cli, 80))
	case w.Is == lone:
		if p.Fwd.Flags != w.Flags {
			t.Fatalf("forward flags %#x, want %#x", p.Fwd.Flags, w.Flags)
		}
		return
	case w.Is == opened && hadPair:
		t.Fatalf("a pair of generation %d was there before the input", old.Fwd.Generation)
	case w.Is != opened && !hadPair:
		t.Fatalf("no pair before the input to keep or replace")
	case w.Is == kept && p.Fwd.Generation != old.Fwd.Generation:
		t.Fatalf("generation %d, was %d: want the pair kept", p.Fwd.Generation, old.Fwd.Generation)
	case w.Is == replaced:
		f.checkReplaced(t, e, old, p)
	}
	checkLinked(t, e, w, p)
	if w.Frozen {
		checkFrozen(t, e, f.In.From, old, p)
	}
}

func (f fixture) checkReplaced(t *testing.T, e *dt.Env, old, p dt.Pair) {
	t.Helper()
	if p.Fwd.Generation == old.Fwd.Generation || p.RevKey == old.RevKey {
		t.Fatalf("generation %d reverse %v; old pair %d reverse %v: want a fresh pair", p.Fwd.Generation, p.RevKey, old.Fwd.Generation, old.RevKey)
	}
	v, err := e.DP.LookupFlow(old.RevKey)
	switch {
	case f.Break == otherReverse && (err != nil || v.Generation != old.Fwd.Generation+1000):
		t.Fatalf("the other pair's entry at the old reverse key: %+v, %v; want it left alone", v, err)
	case f.Pair.Held && (err != nil || v.Generation != old.Rev.Generation || v.Flags != old.Rev.Flags|dataplane.FlagHold ||
		v.LastSeen != old.Fwd.LastSeen):
		t.Fatalf("old reverse entry %v: %+v (err %v); want it held: generation %d, flags %#x, last_seen %d (the close)",
			old.RevKey, v, err, old.Rev.Generation, old.Rev.Flags|dataplane.FlagHold, old.Fwd.LastSeen)
	case f.Break != otherReverse && !f.Pair.Held && err != dataplane.ErrNotFound:
		t.Fatalf("old reverse entry %v still present (err %v)", old.RevKey, err)
	}
}

// checkLinked checks a whole pair against w.
func checkLinked(t *testing.T, e *dt.Env, w pair, p dt.Pair) {
	t.Helper()
	backend := netip.AddrPortFrom(e.Backends[w.Backend], remotePort(e, 80))
	snat := netip.AddrPortFrom(e.SNAT, orDefault(w.SNAT, 40000))
	if rk := dataplane.NewFlowKey(backend, snat, dataplane.DirBackend); p.RevKey != rk || p.Rev.Peer(p.RevKey) != p.FwdKey {
		t.Fatalf("forward %v peers with %v (its peer %v), want reverse %v", p.FwdKey, p.RevKey, p.Rev.Peer(p.RevKey), rk)
	}
	if p.Fwd.Generation == 0 || p.Fwd.Generation != p.Rev.Generation {
		t.Fatalf("generations %d/%d, want equal and non-zero", p.Fwd.Generation, p.Rev.Generation)
	}
	if id := uint16(w.Backend); p.Fwd.BackendId != id || p.Rev.BackendId != id {
		t.Fatalf("backend ids %d/%d, want %d", p.Fwd.BackendId, p.Rev.BackendId, id)
	}
	if p.Fwd.NewSrc() != snat || p.Fwd.NewDst() != backend || p.Rev.NewSrc() != netip.AddrPortFrom(dt.ListenIP, 80) || p.Rev.NewDst() != cli {
		t.Fatalf("recipes %v->%v and %v->%v, want %v->%v and %v->%v", p.Fwd.NewSrc(), p.Fwd.NewDst(), p.Rev.NewSrc(), p.Rev.NewDst(),
			snat, backend, netip.AddrPortFrom(dt.ListenIP, 80), cli)
	}
	if p.Fwd.Flags != w.Flags || p.Rev.Flags != w.Rev {
		t.Fatalf("flags %#x/%#x, want %#x on the forward entry and %#x on the reverse", p.Fwd.Flags, p.Rev.Flags, w.Flags, w.Rev)
	}
	if got := dataplane.Terminal(p.Fwd.Flags); got != w.Terminal {
		t.Fatalf("Terminal(%#x) = %v, want %v", p.Fwd.Flags, got, w.Terminal)
	}
	if now := e.Now(t); dataplane.Widen(now, p.Fwd.LastSeen) > now {
		t.Fatalf("forward last_seen %d is after the clock %d (low 32 bits %d)", p.Fwd.LastSeen, now, now.Low32())
	}
}

// checkFrozen checks last_seen of a pair that was terminal before the input.
func checkFrozen(t *testing.T, e *dt.Env, from side, old, p dt.Pair) {
	t.Helper()
	if p.Fwd.LastSeen != old.Fwd.LastSeen {
		t.Fatalf("forward last_seen moved from %d to %d on a terminal pair", old.Fwd.LastSeen, p.Fwd.LastSeen)
	}
	now := e.Now(t)
	switch {
	case from == client && p.Rev.LastSeen != old.Rev.LastSeen:
		t.Fatalf("reverse last_seen moved from %d to %d without a packet from the backend", old.Rev.LastSeen, p.Rev.LastSeen)
	case from == backend && dataplane.Widen(now, p.Rev.LastSeen) <= dataplane.Widen(now, old.Rev.LastSeen):
		t.Fatalf("reverse last_seen %d, was %d: want it moved on by the backend's packet", p.Rev.LastSeen, old.Rev.LastSeen)
	}
}

// remotePort is the backend port the environment maps a listen port to.
func remotePort(e *dt.Env, local uint16) uint16 {
	for _, m := range e.Settings.Ports() {
		if m.Local == local {
			return m.Remote
		}
	}
	return 0
}
