package dataplane_test

import (
	"net/netip"
	"testing"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Shutdown fixtures (seed "XLB shutdown behavior"): with the
// shutdown flag set, every matching non-RST packet — either direction of a
// known pair, or a new SYN to a listen port — is answered with a RST back to
// its sender following RFC 793 "Reset Generation" (seq = SEG.ACK when ACK
// was set, else 0; ack = SEG.SEQ + payload + SYN + FIN), TTL 64, payload
// and options trimmed, checksums valid. An incoming RST is never answered:
// it is forwarded on its pair or passed.

type shutdownCase struct {
	name   string
	setup  func(e *dt.Env) []dt.Segment // sent before the flag is set
	input  func(e *dt.Env) ([]byte, dt.Iface)
	action uint32
	want   func(e *dt.Env) []byte // nil: unchanged
	resets uint64                 // ShutdownResets delta
}

// rstTo is the RST XLB must send back to the sender of in.
func rstTo(e *dt.Env, in dt.Segment, ifc dt.Iface, seq, ack uint32) []byte {
	return dt.Segment{SrcMAC: ifc.MAC, DstMAC: in.SrcMAC, Src: in.Dst, Dst: in.Src,
		Seq: seq, Ack: ack, Flags: dt.RST | dt.ACK}.Unpadded()
}

func shutdownCases() []shutdownCase {
	data := []byte("some bytes in flight")
	return []shutdownCase{
		{
			name:  "client data on a known pair: RST to the client, seq = its ACK",
			setup: clientSYN,
			input: onFront(func(e *dt.Env) []byte { return cSeg(e, dt.ACK|dt.PSH, 1001, 5001, data).Frame() }),
			want: func(e *dt.Env) []byte {
				return rstTo(e, cSeg(e, dt.ACK|dt.PSH, 1001, 5001, data), e.Front, 5001, 1001+uint32(len(data)))
			},
			action: dt.XDPTX, resets: 1,
		},
		{
			name:  "new SYN to a listen port: RST|ACK with ack = seq+1",
			input: onFront(func(e *dt.Env) []byte { return synFrom(e, dt.Client(33005), 80).Frame() }),
			want: func(e *dt.Env) []byte {
				return rstTo(e, synFrom(e, dt.Client(33005), 80), e.Front, 0, 1001)
			},
			action: dt.XDPTX, resets: 1,
		},
		{
			name:  "client FIN with payload: ack counts the payload and the FIN",
			setup: clientSYN,
			input: onFront(func(e *dt.Env) []byte { return cSeg(e, dt.FIN|dt.ACK|dt.PSH, 1001, 5001, data).Frame() }),
			want: func(e *dt.Env) []byte {
				return rstTo(e, cSeg(e, dt.FIN|dt.ACK|dt.PSH, 1001, 5001, data), e.Front, 5001, 1001+uint32(len(data))+1)
			},
			action: dt.XDPTX, resets: 1,
		},
		{
			name:  "backend packet on a known pair: RST to the backend's address",
			setup: clientSYN,
			input: onFront(func(e *dt.Env) []byte { return bSeg(e, dt.ACK, 5001, 1001, data).Frame() }),
			want: func(e *dt.Env) []byte {
				return rstTo(e, bSeg(e, dt.ACK, 5001, 1001, data), e.Front, 1001, 5001+uint32(len(data)))
			},
			action: dt.XDPTX, resets: 1,
		},
		{
			name:   "client RST on a known pair is forwarded, never answered",
			setup:  clientSYN,
			input:  onFront(func(e *dt.Env) []byte { return clientRST(e).Frame() }),
			want:   func(e *dt.Env) []byte { return e.ToBackend(clientRST(e), b1, firstSNAT).Frame() },
			action: dt.XDPTX,
		},
		{
			name:   "backend RST on a known pair is forwarded to the client",
			setup:  clientSYN,
			input:  onFront(func(e *dt.Env) []byte { return backendRST(e).Frame() }),
			want:   func(e *dt.Env) []byte { return e.ToClient(backendRST(e), cli, 80).Frame() },
			action: dt.XDPTX,
		},
		{
			name:   "RST without a pair passes",
			input:  onFront(func(e *dt.Env) []byte { return clientRST(e).Frame() }),
			action: dt.XDPPass,
		},
		{
			name:   "ACK without a pair passes: nothing is sent for unknown flows",
			input:  onFront(func(e *dt.Env) []byte { return cSeg(e, dt.ACK, 1001, 5001, nil).Frame() }),
			action: dt.XDPPass,
		},
		{
			name:   "traffic to other ports still passes",
			input:  onFront(func(e *dt.Env) []byte { return synFrom(e, cli, 22).Frame() }),
			action: dt.XDPPass,
		},
	}
}

func TestShutdownFixtures(t *testing.T) {
	for _, tc := range shutdownCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{})
			if tc.setup != nil {
				for _, s := range tc.setup(e) {
					e.MustRun(t, s.Frame(), e.Front, dt.XDPTX)
				}
			}
			if err := e.DP.SetShutdown(true); err != nil {
				t.Fatal(err)
			}
			flowsBefore := len(e.Flows(t))
			before := e.Counters(t)
			in, ifc := tc.input(e)
			act, out, err := e.Run(in, ifc)
			if err != nil {
				t.Fatal(err)
			}
			if act != tc.action {
				t.Fatalf("action %s, want %s", dt.ActionName(act), dt.ActionName(tc.action))
			}
			want := in
			if tc.want != nil {
				want = tc.want(e)
				if err := dt.VerifyChecksums(out); err != nil {
					t.Fatalf("checksums: %v", err)
				}
			}
			if d := dt.Diff(out, want); d != "" {
				t.Fatalf("output differs:\n%s", d)
			}
			after := e.Counters(t)
			if got := after.ShutdownResets - before.ShutdownResets; got != tc.resets {
				t.Fatalf("shutdown resets +%d, want +%d", got, tc.resets)
			}
			if after.PairsCreated != before.PairsCreated || len(e.Flows(t)) != flowsBefore {
				t.Fatalf("the shutdown window created state: pairs +%d, entries %d -> %d",
					after.PairsCreated-before.PairsCreated, flowsBefore, len(e.Flows(t)))
			}
		})
	}
}

// Clearing the flag restores normal forwarding (used when a shutdown is
// abandoned in tests; the daemon never clears it).
func TestShutdownFlagClears(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	if err := e.DP.SetShutdown(true); err != nil {
		t.Fatal(err)
	}
	if err := e.DP.SetShutdown(false); err != nil {
		t.Fatal(err)
	}
	out := e.MustRun(t, synFrom(e, cli, 80).Frame(), e.Front, dt.XDPTX)
	if d := dt.Diff(out, e.ToBackend(synFrom(e, cli, 80), netip.AddrPortFrom(dt.OneArmBackends[0], 8080), 40000).Frame()); d != "" {
		t.Fatal(d)
	}
}
