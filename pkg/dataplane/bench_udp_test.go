package dataplane_test

import (
	"net/netip"
	"sort"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// UDP benchmarks (issue 31): one BPF_PROG_TEST_RUN per datagram, the
// kernel-measured time of each; reported: the median ns per datagram.
// BenchmarkUDPNew creates a pair per run (a client port not seen before:
// its unreplied-count atomic included), BenchmarkUDPEstablished forwards
// a client's datagram on a live pair, BenchmarkUDPReply a backend's on a
// replied one. Run with -benchtime=Nx, N <= 60,000 for BenchmarkUDPNew.

// udpBenchEnv is a one-arm env with a UDP service 53 -> 5353, room for
// pairs pairs, and a cap that never refuses.
func udpBenchEnv(b *testing.B, pairs uint32) *dt.Env {
	b.Helper()
	return dt.NewEnv(b, dt.Options{MaxConnections: pairs + 16, SNATPortLo: 1024, SNATPortHi: 65535,
		Services: []dt.Service{{Proto: dataplane.ProtoUDP, UDPUnrepliedMax: pairs + 16,
			Ports: []dataplane.PortMap{{Local: udpLocal, Remote: udpRemote}}}}})
}

// udpBenchMedian runs frames[i % len(frames)] b.N times and reports the
// median ns per run.
func udpBenchMedian(b *testing.B, e *dt.Env, frames [][]byte, ingress dt.Iface, want uint32) {
	b.Helper()
	times := make([]float64, 0, b.N)
	b.ResetTimer()
	err := e.Do(func() error {
		for i := range b.N {
			ns, act, err := e.BenchHere(e.DP.Program(), frames[i%len(frames)], ingress, 1)
			if err != nil {
				return err
			}
			if act != want {
				b.Fatalf("run %d: %s, want %s", i, dt.ActionName(act), dt.ActionName(want))
			}
			times = append(times, ns)
		}
		return nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	sort.Float64s(times)
	b.ReportMetric(times[len(times)/2], "ns/datagram")
}

func BenchmarkUDPNew(b *testing.B) {
	if b.N > 60000 {
		b.Fatalf("-benchtime=%dx: at most 60000 new pairs", b.N)
	}
	e := udpBenchEnv(b, uint32(b.N))
	frames := make([][]byte, b.N)
	for i := range frames {
		c := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 20}), uint16(1024+i))
		frames[i] = e.UDPFromClient(c, udpLocal, []byte("0123456789abcdef")).Frame()
	}
	udpBenchMedian(b, e, frames, e.Front, dt.XDPTX)
}

func BenchmarkUDPEstablished(b *testing.B) {
	e := udpBenchEnv(b, 64)
	c := dt.Client(20000)
	in := e.UDPFromClient(c, udpLocal, []byte("0123456789abcdef"))
	if act, _, err := e.Run(in.Frame(), e.Front); err != nil || act != dt.XDPTX {
		b.Fatalf("first datagram: %s %v", dt.ActionName(act), err)
	}
	udpBenchMedian(b, e, [][]byte{in.Frame()}, e.Front, dt.XDPTX)
}

func BenchmarkUDPReply(b *testing.B) {
	e := udpBenchEnv(b, 64)
	c := dt.Client(20000)
	in := e.UDPFromClient(c, udpLocal, []byte("0123456789abcdef"))
	if act, _, err := e.Run(in.Frame(), e.Front); err != nil || act != dt.XDPTX {
		b.Fatalf("first datagram: %s %v", dt.ActionName(act), err)
	}
	p, ok, err := e.LookupUDPPair(c, udpLocal)
	if err != nil || !ok {
		b.Fatalf("no pair: %v", err)
	}
	r := e.UDPFromBackend(p.Backend(), p.SNATPort(), []byte("fedcba9876543210")).Frame()
	udpBenchMedian(b, e, [][]byte{r}, e.BackendIface(), dt.XDPTX)
}
