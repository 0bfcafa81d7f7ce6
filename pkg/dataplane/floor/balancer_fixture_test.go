package floor_test

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/internal/testnet"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/dataplane/floor"
)

// The floor balancer's fixtures run bpf/floor_lb.c with BPF_PROG_TEST_RUN
// (it calls no helper that depends on a namespace) on frames built with
// dptest's Segment (gopacket: canonical lengths and checksums), shaped like
// the one-arm lab: VIP 192.0.2.10:80, one client, three backends on the
// same segment.

// lbFixture is a loaded balancer and the configuration it was loaded with.
type lbFixture struct {
	cfg floor.BalancerConfig
	bal *floor.Balancer
}

// newLB loads a balancer whose SNAT address is snat (the VIP itself in the
// one-arm lab) and backends listen on 8080, 8081, 8082.
func newLB(t testing.TB, snat netip.Addr) *lbFixture {
	t.Helper()
	testnet.RequireRoot(t)
	cfg := floor.BalancerConfig{VIP: dt.ListenIP, SNAT: snat, Client: dt.ClientIP, Port: 80,
		SelfMAC: dt.MAC(dt.ListenIP), ClientMAC: dt.MAC(dt.ClientIP)}
	for i, ip := range dt.OneArmBackends {
		cfg.Backends = append(cfg.Backends, floor.BalancerBackend{IP: ip, Port: uint16(8080 + i), MAC: dt.MAC(ip)})
	}
	b, err := floor.LoadBalancer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &lbFixture{cfg: cfg, bal: b}
}

// backendOf is the backend a client port goes to and its address.
func (f *lbFixture) backendOf(cport uint16) (floor.BalancerBackend, netip.AddrPort) {
	b := f.cfg.Backends[f.cfg.BackendIndex(cport)]
	return b, netip.AddrPortFrom(b.IP, b.Port)
}

// fromClient is a segment from the client's port cport to VIP:port.
func (f *lbFixture) fromClient(cport uint16, flags uint8, seq, ack uint32, payload []byte) dt.Segment {
	return dt.Segment{SrcMAC: f.cfg.ClientMAC, DstMAC: f.cfg.SelfMAC, Src: netip.AddrPortFrom(f.cfg.Client, cport),
		Dst: netip.AddrPortFrom(f.cfg.VIP, f.cfg.Port), Flags: flags, Seq: seq, Ack: ack, Payload: payload, ID: 7, Window: 64240}
}

// toBackend is what the balancer must send for seg from the client: SNAT
// source keeping the client's port, the picked backend, its MAC, TTL-1.
func (f *lbFixture) toBackend(seg dt.Segment) dt.Segment {
	b, dst := f.backendOf(seg.Src.Port())
	out := seg
	out.SrcMAC, out.DstMAC = f.cfg.SelfMAC, b.MAC
	out.Src, out.Dst = netip.AddrPortFrom(f.cfg.SNAT, seg.Src.Port()), dst
	out.TTL = ttl(seg) - 1
	return out
}

// fromBackend is a segment from the backend cport goes to, to SNAT:cport.
func (f *lbFixture) fromBackend(cport uint16, flags uint8, seq, ack uint32, payload []byte) dt.Segment {
	b, src := f.backendOf(cport)
	return dt.Segment{SrcMAC: b.MAC, DstMAC: f.cfg.SelfMAC, Src: src, Dst: netip.AddrPortFrom(f.cfg.SNAT, cport),
		Flags: flags, Seq: seq, Ack: ack, Payload: payload, ID: 9, Window: 65160}
}

// toClient is what the balancer must send for seg from a backend: from
// VIP:port to the client, toward ClientMAC, TTL-1.
func (f *lbFixture) toClient(seg dt.Segment) dt.Segment {
	out := seg
	out.SrcMAC, out.DstMAC = f.cfg.SelfMAC, f.cfg.ClientMAC
	out.Src, out.Dst = netip.AddrPortFrom(f.cfg.VIP, f.cfg.Port), netip.AddrPortFrom(f.cfg.Client, seg.Dst.Port())
	out.TTL = ttl(seg) - 1
	return out
}

func ttl(s dt.Segment) uint8 {
	if s.TTL == 0 {
		return 64
	}
	return s.TTL
}

// runLB runs prog once on frame and returns the action and the frame as
// the program left it.
func runLB(t testing.TB, prog *ebpf.Program, frame []byte) (uint32, []byte) {
	t.Helper()
	opts := ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256), Repeat: 1}
	act, err := prog.Run(&opts)
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return act, opts.DataOut
}

// expectTX runs in and requires XDP_TX with exactly want's frame, whose
// checksums also verify independently of gopacket.
func (f *lbFixture) expectTX(t *testing.T, what string, in, want dt.Segment) []byte {
	t.Helper()
	act, out := runLB(t, f.bal.Program(), in.Frame())
	if act != dt.XDPTX {
		t.Fatalf("%s: %s, want XDP_TX", what, dt.ActionName(act))
	}
	if d := dt.Diff(out, want.Frame()); d != "" {
		t.Fatalf("%s: output differs:\n%s", what, d)
	}
	if err := dt.VerifyChecksums(out); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return out
}

// TestBalancerBothDirections: a whole connection's segments (SYN, SYN-ACK,
// data both ways, FIN, RST) for 300 client ports, with SNAT equal to the
// VIP (one-arm lab) and a separate SNAT address: every output frame is
// exactly the expected one, and every backend gets connections.
func TestBalancerBothDirections(t *testing.T) {
	for _, snat := range []netip.Addr{dt.ListenIP, testnet.XLBExtraIP(0)} {
		t.Run("snat="+snat.String(), func(t *testing.T) {
			f := newLB(t, snat)
			data := []byte("GET / HTTP/1.1\r\nHost: floor\r\n\r\n")
			perBackend := make([]int, len(f.cfg.Backends))
			for cport := uint16(32768); cport < 32768+300; cport++ {
				perBackend[f.cfg.BackendIndex(cport)]++
				for _, c := range []dt.Segment{
					f.fromClient(cport, dt.SYN, 1000, 0, nil),
					f.fromClient(cport, dt.ACK|dt.PSH, 1001, 5001, data),
					f.fromClient(cport, dt.FIN|dt.ACK, 1001+uint32(len(data)), 5001, nil),
					f.fromClient(cport, dt.RST, 1002+uint32(len(data)), 0, nil),
				} {
					f.expectTX(t, "client "+c.Src.String(), c, f.toBackend(c))
				}
				for _, b := range []dt.Segment{
					f.fromBackend(cport, dt.SYN|dt.ACK, 5000, 1001, nil),
					f.fromBackend(cport, dt.ACK|dt.PSH, 5001, 1001+uint32(len(data)), data),
					f.fromBackend(cport, dt.FIN|dt.ACK, 5001+uint32(len(data)), 1002+uint32(len(data)), nil),
				} {
					f.expectTX(t, "backend to "+b.Dst.String(), b, f.toClient(b))
				}
			}
			for i, n := range perBackend {
				if n < 300/len(perBackend)/2 {
					t.Errorf("backend %d got %d of 300 client ports: %v", i, n, perBackend)
				}
			}
		})
	}
}
