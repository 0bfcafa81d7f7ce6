package dataplane_test

import (
	"testing"

	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Timestamp fixtures (issue 36; bpf/tsopt.h). A client SYN with the
// timestamp option gives its pair an offset, ts_off = (now_ms + 1) -
// TSval on the data path's millisecond clock, on both entries
// (FlagTSSyn); the SYN reaches the backend with TSval now_ms + 1, and the
// backend's SYN-ACK reaches the client with TSecr lowered by the offset.
// When the SYN-ACK carries timestamps too, the pair has FlagTS and every
// later segment is rewritten the same way; the backend's cell says
// whether its SYN-ACKs carry them. Every output frame is compared byte
// for byte with the frame gopacket builds (its own checksums), its
// checksums verified on their own (dt.VerifyChecksums), and its
// timestamps read back against numbers the test computes.

// monoMs is the data path's timestamp clock as the test reads it:
// CLOCK_MONOTONIC in milliseconds, low 32 bits (bpf/clock.h now_ms32).
func monoMs(t *testing.T) uint32 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint32(ts.Nano() / 1e6)
}

// tsOption is a timestamp option.
func tsOption(val, ecr uint32) layers.TCPOption {
	d := []byte{byte(val >> 24), byte(val >> 16), byte(val >> 8), byte(val), byte(ecr >> 24), byte(ecr >> 16), byte(ecr >> 8), byte(ecr)}
	return layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionData: d}
}

// nop is a NOP option.
var nop = layers.TCPOption{OptionType: layers.TCPOptionKindNop}

// tsSyn are a Linux SYN's options with TSval val: MSS, SACK permitted,
// timestamps, window scale 7.
func tsSyn(val uint32) []layers.TCPOption {
	return []layers.TCPOption{
		{OptionType: layers.TCPOptionKindMSS, OptionData: []byte{0x05, 0xb4}},
		{OptionType: layers.TCPOptionKindSACKPermitted},
		tsOption(val, 0),
		nop,
		{OptionType: layers.TCPOptionKindWindowScale, OptionData: []byte{7}},
	}
}

// tsSynAck are a Linux SYN-ACK's options with timestamps (val, ecr).
func tsSynAck(val, ecr uint32) []layers.TCPOption {
	return []layers.TCPOption{
		{OptionType: layers.TCPOptionKindMSS, OptionData: []byte{0x05, 0xb4}},
		{OptionType: layers.TCPOptionKindSACKPermitted},
		tsOption(val, ecr),
		nop,
		{OptionType: layers.TCPOptionKindWindowScale, OptionData: []byte{7}},
	}
}

// tsData are a data segment's options as Linux sends them: NOP, NOP,
// timestamps (the option at an even offset, found without a walk).
func tsData(val, ecr uint32) []layers.TCPOption {
	return []layers.TCPOption{nop, nop, tsOption(val, ecr)}
}

// tsOdd are options with the timestamp option at an odd offset from the
// TCP header (21): NOP, timestamps, NOP.
func tsOdd(val, ecr uint32) []layers.TCPOption {
	return []layers.TCPOption{nop, tsOption(val, ecr), nop}
}

// withOpts is s with options opts.
func withOpts(s dt.Segment, opts []layers.TCPOption) dt.Segment {
	s.Options = opts
	return s
}

// wantTimestamps decodes frame, verifies its checksums on their own and
// checks its timestamps.
func wantTimestamps(t *testing.T, what string, frame []byte, val, ecr uint32) {
	t.Helper()
	if err := dt.VerifyChecksums(dt.Unpadded(frame)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	d, err := dt.Decode(frame)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, o := range d.TCP.Options {
		if o.OptionType == layers.TCPOptionKindTimestamps && len(o.OptionData) == 8 {
			s := dt.Segment{Options: []layers.TCPOption{o}}
			gv, ge, _ := s.Timestamps()
			if gv != val || ge != ecr {
				t.Fatalf("%s: TSval %#x TSecr %#x, want %#x %#x", what, gv, ge, val, ecr)
			}
			return
		}
	}
	t.Fatalf("%s: no timestamp option in %x", what, frame)
}

// backendTS is backend id's timestamp state.
func backendTS(t *testing.T, e *dt.Env, id int) dataplane.TimestampState {
	t.Helper()
	s, err := e.DP.BackendTimestamps()
	if err != nil {
		t.Fatal(err)
	}
	return s[id]
}

// setTsOff sets both entries' timestamp offset of p to off.
func setTsOff(t *testing.T, e *dt.Env, p dt.Pair, off uint32) {
	t.Helper()
	for _, k := range []dataplane.FlowKey{p.FwdKey, p.RevKey} {
		v := e.DeleteFlow(t, k)
		v.TsOff = off
		if err := e.DP.PutFlow(k, v); err != nil {
			t.Fatal(err)
		}
	}
}

// The SYN of a client with timestamps gives its pair the offset (now_ms
// + 1) - TSval on both entries: the backend gets TSval now_ms + 1, here
// across the 2^32 wrap of the offset (the client's TSval is above the
// clock). The SYN-ACK with timestamps reaches the client with its TSecr
// lowered back to the client's own TSval, and negotiates them (FlagTS on
// both entries, the backend's cell "yes"); from then on TSvals toward the
// backend rise by the offset and TSecrs toward the client fall by it, a
// retransmitted SYN carrying the same offset, and both rewrites hold
// across the 2^32 wrap of the numbers themselves. SACK, window scale and
// MSS pass unchanged (the frames are compared byte for byte).
func TestTimestampsRewritten(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1]})
	const cval, bval = uint32(0xfffffff0), uint32(0x7000)
	if got := backendTS(t, e, 0); got != dataplane.TimestampsUnknown {
		t.Fatalf("backend timestamps before any SYN-ACK: %v, want unknown", got)
	}
	lo := monoMs(t)
	k := dial(t, e, 33000, tsSyn(cval))
	hi := monoMs(t)
	p := k.p
	sent := cval + p.Fwd.TsOff // the SYN's TSval toward the backend
	if int32(sent-(lo+1)) < 0 || int32((hi+1)-sent) < 0 {
		t.Fatalf("SYN reached the backend with TSval %d, want now_ms + 1 in %d..%d", sent, lo+1, hi+1)
	}
	if p.Fwd.Flags&dataplane.FlagTSSyn == 0 || p.Fwd.Flags&dataplane.FlagTS != 0 || p.Rev.TsOff != p.Fwd.TsOff || p.Rev.Flags&dataplane.FlagTS != 0 {
		t.Fatalf("after the SYN: flags %#x/%#x offsets %#x/%#x, want FlagTSSyn, no FlagTS, one offset", p.Fwd.Flags, p.Rev.Flags, p.Fwd.TsOff, p.Rev.TsOff)
	}

	syn := withOpts(k.client(dt.SYN, isnC, 0, synWindow, nil), tsSyn(cval))
	out := step(t, e, "SYN again", syn.Frame(), e.Front, forwardAction(e), k.toBackend(syn), counted{SYNReused: 1})
	wantTimestamps(t, "SYN again", out, sent, 0)

	sa := withOpts(k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil), tsSynAck(bval, sent))
	out = k.forward("SYN-ACK", sa, counted{})
	wantTimestamps(t, "SYN-ACK", out, bval, cval)
	p = k.now()
	if p.Fwd.Flags&dataplane.FlagTS == 0 || p.Rev.Flags&dataplane.FlagTS == 0 {
		t.Fatalf("after the SYN-ACK: flags %#x/%#x, want FlagTS on both", p.Fwd.Flags, p.Rev.Flags)
	}
	if got := backendTS(t, e, 0); got != dataplane.TimestampsYes {
		t.Fatalf("backend timestamps: %v, want yes", got)
	}

	out = k.forward("client ACK", withOpts(k.client(dt.ACK, isnC+1, isnB+1, 1000, nil), tsData(cval+3, bval)), counted{})
	wantTimestamps(t, "client ACK", out, sent+3, bval)
	out = k.forward("client data", withOpts(k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, []byte("GET /")), tsData(cval+5, bval)), counted{})
	wantTimestamps(t, "client data", out, sent+5, bval)
	out = k.forward("backend data", withOpts(k.backend(dt.ACK|dt.PSH, isnB+1, isnC+6, 2000, []byte("200")), tsData(bval+1, sent+5)), counted{})
	wantTimestamps(t, "backend data", out, bval+1, cval+5)

	// The numbers themselves across 2^32: the client's 0xfffffff6
	// reaches the backend as 0x100, the backend's echo of 0x100 the
	// client as 0xfffffff6.
	const off = uint32(0x10a)
	setTsOff(t, e, p, off)
	k.p = k.now()
	out = k.forward("client data across the wrap", withOpts(k.client(dt.ACK|dt.PSH, isnC+6, isnB+4, 1000, []byte("x")), tsData(0xfffffff6, bval+1)), counted{})
	wantTimestamps(t, "client data across the wrap", out, 0x100, bval+1)
	out = k.forward("backend ACK across the wrap", withOpts(k.backend(dt.ACK, isnB+4, isnC+7, 2000, nil), tsData(bval+2, 0x100)), counted{})
	wantTimestamps(t, "backend ACK across the wrap", out, bval+2, 0xfffffff6)
}

// The option at an odd offset from the TCP header (its checksum words
// straddle the option's fields), and behind IPv4 options (the TCP header
// a copy, the option in the frame): every rewrite's checksum still
// verifies.
func TestTimestampsOddOffsetAndIPOptions(t *testing.T) {
	ipOpts := []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
	for _, c := range []struct {
		name  string
		ip    bool
		place func(val, ecr uint32) []layers.TCPOption
	}{
		{"odd offset", false, tsOdd},
		{"IPv4 options", true, tsData},
		{"IPv4 options, odd offset", true, tsOdd},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1]})
			k := &tcpConn{t: t, e: e, c: dt.Client(33000)}
			moves := counted{}
			shape := func(s dt.Segment) dt.Segment {
				if c.ip {
					s.IPOptions = ipOpts
				}
				return s
			}
			if c.ip {
				moves.IPOptionsForwarded = 1
			}
			const cval = uint32(1_000_000)
			bval := uint32(0xfffffff0) // the backend's numbers wrap past 2^32 below
			syn := shape(withOpts(k.client(dt.SYN, isnC, 0, synWindow, nil), append(c.place(cval, 0), layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionData: []byte{0x05, 0xb4}})))
			synMoves := moves
			synMoves.PairsCreated = 1
			out := step(t, e, "SYN", syn.Frame(), e.Front, forwardAction(e), nil, synMoves)
			k.p = e.MustPair(t, k.c, 80)
			if d := frameDiff(out, k.toBackend(syn)); d != "" {
				t.Fatalf("SYN: output frame differs:\n%s", d)
			}
			sent := cval + k.p.Fwd.TsOff
			wantTimestamps(t, "SYN", out, sent, 0)

			sa := shape(withOpts(k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil), c.place(bval, sent)))
			wantTimestamps(t, "SYN-ACK", k.forward("SYN-ACK", sa, moves), bval, cval)
			data := shape(withOpts(k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, []byte("GET /")), c.place(cval+7, bval)))
			wantTimestamps(t, "client data", k.forward("client data", data, moves), sent+7, bval)
			back := shape(withOpts(k.backend(dt.ACK, isnB+1, isnC+6, 2000, nil), c.place(bval+20, sent+7)))
			wantTimestamps(t, "backend ACK", k.forward("backend ACK", back, moves), bval+20, cval+7)
		})
	}
}

// A backend that answers a SYN with timestamps without them (its
// net.ipv4.tcp_timestamps=0) does not negotiate them: the pair gets no
// FlagTS, the SYN-ACK passes unchanged, later segments are not rewritten
// (a timestamp option the client sends anyway passes as it came), and
// the backend's cell says "no" until a SYN-ACK with timestamps says
// "yes" again.
func TestTimestampsBackendWithout(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1]})
	k := dial(t, e, 33000, tsSyn(5000))
	k.forward("SYN-ACK without timestamps", k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil), counted{})
	p := k.now()
	if p.Fwd.Flags&dataplane.FlagTS != 0 || p.Rev.Flags&dataplane.FlagTS != 0 {
		t.Fatalf("flags %#x/%#x: FlagTS without the backend's timestamps", p.Fwd.Flags, p.Rev.Flags)
	}
	if got := backendTS(t, e, 0); got != dataplane.TimestampsNo {
		t.Fatalf("backend timestamps: %v, want no", got)
	}
	out := k.forward("client data with timestamps", withOpts(k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, []byte("x")), tsData(5005, 77)), counted{})
	wantTimestamps(t, "client data with timestamps", out, 5005, 77)

	k2 := dial(t, e, 33001, tsSyn(9000))
	sent := 9000 + k2.p.Fwd.TsOff
	k2.forward("SYN-ACK with timestamps", withOpts(k2.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil), tsSynAck(1, sent)), counted{})
	if got := backendTS(t, e, 0); got != dataplane.TimestampsYes {
		t.Fatalf("backend timestamps after a SYN-ACK with them: %v, want yes", got)
	}
}

// A SYN without timestamps gives its pair no offset and no FlagTSSyn; a
// SYN-ACK that carries timestamps anyway negotiates nothing (RFC 7323
// §3.2: both SYNs must carry them), passes unchanged, and leaves the
// backend's cell as it was.
func TestTimestampsClientWithout(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1]})
	k := dial(t, e, 33000, synOptions(7)[:2])
	if k.p.Fwd.Flags&dataplane.FlagTSSyn != 0 || k.p.Fwd.TsOff != 0 || k.p.Rev.TsOff != 0 {
		t.Fatalf("pair of a SYN without timestamps: flags %#x offsets %#x/%#x", k.p.Fwd.Flags, k.p.Fwd.TsOff, k.p.Rev.TsOff)
	}
	out := k.forward("SYN-ACK with timestamps", withOpts(k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil), tsSynAck(1, 2)), counted{})
	wantTimestamps(t, "SYN-ACK with timestamps", out, 1, 2)
	if p := k.now(); p.Fwd.Flags&dataplane.FlagTS != 0 {
		t.Fatalf("flags %#x: FlagTS without the client's timestamps", p.Fwd.Flags)
	}
	if got := backendTS(t, e, 0); got != dataplane.TimestampsUnknown {
		t.Fatalf("backend timestamps: %v, want unknown", got)
	}
}

// On a pair whose timestamps are rewritten, the RST window checks work on
// the sequence numbers as before (the rewrite leaves them alone): a RST
// outside the receiver's window is dropped, one in it but not exact is
// forwarded with the pair kept, and the exact one ends the pair.
func TestTimestampsRSTWindow(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1]})
	const cval, bval = uint32(77_000), uint32(0x7000)
	k := dial(t, e, 33000, tsSyn(cval))
	sent := cval + k.p.Fwd.TsOff
	k.forward("SYN-ACK", withOpts(k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil), tsSynAck(bval, sent)), counted{})
	k.forward("client ACK", withOpts(k.client(dt.ACK, isnC+1, isnB+1, 1000, nil), tsData(cval+1, bval)), counted{})
	out := k.forward("backend data", withOpts(k.backend(dt.ACK|dt.PSH, isnB+1, isnC+1, 2000, []byte("hello")), tsData(bval+1, sent+1)), counted{})
	wantTimestamps(t, "backend data", out, bval+1, cval+1)
	if p := k.now(); p.Fwd.Flags&dataplane.FlagTS == 0 {
		t.Fatalf("flags %#x: timestamps not negotiated", p.Fwd.Flags)
	}
	// The backend's receive window: its last ACK isnC+1, window 2000 << 7 (both SYNs scale by 7).
	k.drop("client RST beyond the window", k.client(dt.RST, isnC+1+1<<20, 0, 0, nil), counted{RSTOutOfWindow: 1})
	k.forward("client RST in the window", k.client(dt.RST, isnC+1+100, 0, 0, nil), counted{RSTInexact: 1})
	k.wantFlags(0, closedF)
	k.forward("exact client RST", k.client(dt.RST, isnC+1, 0, 0, nil), counted{ClosedClientRST: 1})
	k.wantFlags(dataplane.FlagClosedRST, 0)
}

// A segment that arrives fragmented on a pair whose timestamps are
// rewritten: the option is in the first fragment, rewritten there, and
// the TCP checksum (over the whole datagram) still verifies once the
// fragments are put together, both ways.
func TestTimestampsFirstFragment(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Backends: dt.OneArmBackends[:1]})
	const bval = uint32(0x7000)
	cval := uint32(0xfffffff0) // the client's numbers wrap past 2^32 below
	k := dial(t, e, 33000, tsSyn(cval))
	sent := cval + k.p.Fwd.TsOff
	k.forward("SYN-ACK", withOpts(k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil), tsSynAck(bval, sent)), counted{})
	k.forward("client ACK", withOpts(k.client(dt.ACK, isnC+1, isnB+1, 1000, nil), tsData(cval+1, bval)), counted{})

	c := withOpts(k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, bulk[:1200]), tsData(cval+30, bval))
	c.ID = 0x1234
	k.sendFragments("client data", c, k.toBackend(c))
	b := withOpts(k.backend(dt.ACK|dt.PSH, isnB+1, isnC+1+1200, 2000, bulk[:1400]), tsData(bval+9, sent+30))
	b.ID = 0x4321
	k.sendFragments("backend data", b, k.toClient(b))
}
