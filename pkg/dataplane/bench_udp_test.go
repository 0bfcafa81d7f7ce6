package dataplane_test

import (
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// UDP benchmarks (issue 31), measured as the TCP ones are (bench_test.go
// run): one BPF_PROG_TEST_RUN per datagram, interleaved with the floor
// balancer on the TCP pair's segment of the same direction and the null
// program, and reported as net ns per packet and the ratio to the floor.
// BenchmarkUDPNew creates a pair per run (a client address and port not
// seen before: its unreplied-count atomic included; up to benchMaxPairs
// runs), BenchmarkUDPEstablished forwards a client's datagram on a live
// pair, BenchmarkUDPReply a backend's on a replied one.

// udpBenchEnv is the TCP bench env with a UDP service 53 -> 5353 beside
// its TCP one, room for pairs UDP pairs, and a cap that never refuses.
func udpBenchEnv(b *testing.B, pairs uint32) *benchEnv {
	b.Helper()
	return newBenchEnvWith(b, pairs+16, 0, 0, func(o *dt.Options) {
		o.Services = []dt.Service{{}, {Name: "dns", Proto: dataplane.ProtoUDP, UDPUnrepliedMax: pairs + 16,
			Ports: []dataplane.PortMap{{Local: udpLocal, Remote: udpRemote}}}}
	}, nil)
}

var udpBenchPayload = []byte("0123456789abcdef")

func BenchmarkUDPNew(b *testing.B) {
	if b.N > benchMaxPairs {
		b.Fatalf("run with -benchtime up to %dx", benchMaxPairs)
	}
	be := udpBenchEnv(b, uint32(b.N))
	frames := make([][]byte, b.N)
	for i := range frames {
		c := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i%100)}), uint16(1024+i/100))
		frames[i] = be.e.UDPFromClient(c, udpLocal, udpBenchPayload).Frame()
	}
	be.run(b, func(i int) []byte { return frames[i] }, be.toBack, be.e.Front)
}

func BenchmarkUDPEstablished(b *testing.B) {
	be := udpBenchEnv(b, 64)
	in := be.e.UDPFromClient(dt.Client(20000), udpLocal, udpBenchPayload).Frame()
	be.e.MustRun(b, in, be.e.Front, dt.XDPTX)
	be.run(b, func(int) []byte { return in }, be.toBack, be.e.Front)
}

func BenchmarkUDPReply(b *testing.B) {
	be := udpBenchEnv(b, 64)
	c := dt.Client(20000)
	be.e.MustRun(b, be.e.UDPFromClient(c, udpLocal, udpBenchPayload).Frame(), be.e.Front, dt.XDPTX)
	p, ok, err := be.e.LookupUDPPair(c, udpLocal)
	if err != nil || !ok {
		b.Fatalf("no pair: %v", err)
	}
	r := be.e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("fedcba9876543210")).Frame()
	be.e.MustRun(b, r, be.e.BackendIface(), dt.XDPTX) // the first reply marks the pair replied
	be.run(b, func(int) []byte { return r }, be.toCli, be.e.BackendIface())
}
