package dataplane_test

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/dataplane/floor"
)

// The XDP test runner repeats a program on the same buffer, so a rewriting
// program sees its own output from the second repetition on. Every
// measurement here is therefore one BPF_PROG_TEST_RUN per packet, timed by
// the kernel. Each iteration runs XLB, the floor and a null program
// (XDP_PASS) back to back on the same thread; the null program's time is the
// runner's own overhead and is subtracted from both, and the ratio compares
// what is left. Interleaving makes machine noise hit all three alike.

type benchEnv struct {
	e      *dt.Env
	floor  *floor.Floor
	null   *ebpf.Program
	dst    netip.AddrPort // the measured service's address and port
	toBack []byte         // client data frame of the established pair
	toCli  []byte         // backend data frame of the established pair
}

func newBenchEnv(b *testing.B, maxConn uint32) *benchEnv {
	b.Helper()
	return newBenchEnvServices(b, maxConn, 0, 0)
}

// Many services (issue 29): 64 services of 16 backends each, on 16
// addresses with 4 ports each; the measured one is in the middle.
const (
	benchServices        = 64
	benchServiceBackends = 16
	benchServicePorts    = 4
	benchMeasured        = 37
)

// newBenchEnvServices is newBenchEnv with services services of backends
// backends each (0: the fixtures' one service), all of them over the
// same backend addresses (a member id each), on testnet.XLBExtraIP
// addresses with benchServicePorts ports each. The measured pair is of
// service benchMeasured.
func newBenchEnvServices(b *testing.B, maxConn uint32, services, backends int) *benchEnv {
	b.Helper()
	return newBenchEnvWith(b, maxConn, services, backends, nil, nil)
}

// newBenchEnvWith is newBenchEnvServices with opt applied to the Env's
// options (more services) and setup run on the Env before the measured
// pair's handshake (a scheduler, another routable set); either may be nil.
func newBenchEnvWith(b *testing.B, maxConn uint32, services, backends int, opt func(o *dt.Options), setup func(e *dt.Env)) *benchEnv {
	b.Helper()
	o := dt.Options{MaxConnections: maxConn, SNATPortLo: 1024, SNATPortHi: 65535}
	dst := netip.AddrPortFrom(dt.ListenIP, 80)
	for i := range backends {
		o.Backends = append(o.Backends, testnet.OneArmBackendIP(i))
	}
	if services > 0 {
		for i := range services {
			addr, port := testnet.XLBExtraIP(i/benchServicePorts), uint16(80+i%benchServicePorts)
			o.Services = append(o.Services, dt.Service{Name: fmt.Sprintf("s%d", i), Listen: addr,
				Ports: []dataplane.PortMap{{Local: port, Remote: 8080}}})
			if i == benchMeasured {
				dst = netip.AddrPortFrom(addr, port)
			}
		}
	}
	if opt != nil {
		opt(&o)
	}
	e := dt.NewEnv(b, o)
	if setup != nil {
		setup(e)
	}
	// A whole handshake: the pair is established, as a real flow's is
	// (an embryonic pair takes the handshake's slower path per packet).
	e.MustRun(b, benchSYN(e, cli, dst).Frame(), e.Front, dt.XDPTX)
	var snat uint16
	var be netip.AddrPort
	for k := range e.Flows(b) {
		if k.Direction() == dataplane.DirBackend {
			be, snat = k.Src(), k.Dst().Port()
		}
	}
	e.MustRun(b, e.FromBackend(be, snat, dt.SYN|dt.ACK, 5000, 1001, nil).Frame(), e.BackendIface(), dt.XDPTX)
	e.MustRun(b, benchSeg(e, cli, dst, dt.ACK, 1001, 5001, nil).Frame(), e.Front, dt.XDPTX)
	f, err := floor.Load()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	null, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, dt.XDPPass), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { null.Close() })
	attachDirect(b, e, "xcmp", f.Program(), null)
	for k, v := range e.Flows(b) {
		nh, err := e.DP.NextHop(v.Nexthop)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Put(k, v, [6]byte(nh.SrcMAC), [6]byte(nh.DstMAC)); err != nil {
			b.Fatal(err)
		}
	}
	data := make([]byte, 1400)
	return &benchEnv{
		e: e, floor: f, null: null, dst: dst,
		toBack: benchSeg(e, cli, dst, dt.ACK|dt.PSH, 1001, 5001, data).Frame(),
		toCli:  e.FromBackend(be, snat, dt.ACK|dt.PSH, 5001, 2401, data).Frame(),
	}
}

// benchSeg is a segment from client c to the service address dst.
func benchSeg(e *dt.Env, c, dst netip.AddrPort, flags uint8, seq, ack uint32, data []byte) dt.Segment {
	s := e.FromClient(c, dst.Port(), flags, seq, ack, data)
	s.Dst = dst
	return s
}

// benchSYN is synFrom toward the service address dst.
func benchSYN(e *dt.Env, c, dst netip.AddrPort) dt.Segment {
	s := synFrom(e, c, dst.Port())
	s.Dst = dst
	return s
}

// attachDirect attaches each of progs (generic mode) to a veth of its own
// in e's namespace (prefix0, prefix1, ...; down), where no frame ever arrives. The kernel
// runs an attached XDP program, in BPF_PROG_TEST_RUN too, through the XDP
// dispatcher's direct call, and any other one through an indirect call (a
// retpoline on this kind of machine, 5-12 ns more per run): XLB is attached
// by the instance, so the programs it is compared with must be too, or the
// ratio flatters XLB.
func attachDirect(b *testing.B, e *dt.Env, prefix string, progs ...*ebpf.Program) {
	b.Helper()
	for i, p := range progs {
		name := fmt.Sprintf("%s%d", prefix, i)
		err := e.Do(func() error {
			err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"})
			if err != nil {
				return err
			}
			ifc, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			l, err := link.AttachXDP(link.XDPOptions{Program: p, Interface: ifc.Index, Flags: link.XDPGenericMode})
			if err != nil {
				return err
			}
			b.Cleanup(func() { l.Close() })
			return nil
		})
		if err != nil {
			b.Fatalf("attach a compared program to %s: %v", name, err)
		}
	}
}

// run interleaves xlb (on xlbFrame(i)), the floor (on floorFrame) and the
// null program b.N times and reports net ns/packet and the ratio. The
// figures are medians of the per-run times (the null program's median
// subtracted from the others'): on a loaded machine a few runs are
// preempted or meet a cold cache, and the mean follows them; mean-ratio is
// the ratio of the means, as this benchmark reported before.
func (be *benchEnv) run(b *testing.B, xlbFrame func(i int) []byte, floorFrame []byte, ifc dt.Iface) {
	b.Helper()
	tx, tf, tn := make([]float64, 0, b.N), make([]float64, 0, b.N), make([]float64, 0, b.N)
	b.ResetTimer()
	err := be.e.Do(func() error {
		for i := 0; i < b.N; i++ {
			ns, act, err := be.e.BenchHere(be.e.DP.Program(), xlbFrame(i), ifc, 1)
			if err != nil {
				return err
			}
			if act != dt.XDPTX {
				return fmt.Errorf("xlb run %d: %s", i, dt.ActionName(act))
			}
			tx = append(tx, ns)
			if ns, act, err = be.e.BenchHere(be.floor.Program(), floorFrame, ifc, 1); err != nil || act != dt.XDPTX {
				return fmt.Errorf("floor: %s %v", dt.ActionName(act), err)
			}
			tf = append(tf, ns)
			if ns, _, err = be.e.BenchHere(be.null, floorFrame, ifc, 1); err != nil {
				return err
			}
			tn = append(tn, ns)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	null := benchMedian(tn)
	xlb, floor := benchMedian(tx)-null, benchMedian(tf)-null
	b.ReportMetric(xlb, "xlb-ns/pkt")
	b.ReportMetric(floor, "floor-ns/pkt")
	b.ReportMetric(null, "runner-ns")
	if floor > 0 {
		b.ReportMetric(xlb/floor, "ratio")
	}
	if mf := benchMean(tf) - benchMean(tn); mf > 0 {
		b.ReportMetric((benchMean(tx)-benchMean(tn))/mf, "mean-ratio")
	}
}

// benchMedian is the median of xs (sorts xs).
func benchMedian(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// benchMean is the mean of xs.
func benchMean(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(max(len(xs), 1))
}

// BenchmarkEstablishedClientToBackend: a 1,400-byte data segment of a live pair, client side.
func BenchmarkEstablishedClientToBackend(b *testing.B) {
	be := newBenchEnv(b, 1024)
	be.run(b, func(int) []byte { return be.toBack }, be.toBack, be.e.Front)
}

// BenchmarkEstablishedBackendToClient: the same for the backend's direction.
func BenchmarkEstablishedBackendToClient(b *testing.B) {
	be := newBenchEnv(b, 1024)
	be.run(b, func(int) []byte { return be.toCli }, be.toCli, be.e.BackendIface())
}

// BenchmarkEstablishedClientToBackend64Services is
// BenchmarkEstablishedClientToBackend with 64 services of 16 backends
// each (issue 29: aim at most 1.1 times the one-service figure).
func BenchmarkEstablishedClientToBackend64Services(b *testing.B) {
	be := newBenchEnvServices(b, 1024, benchServices, benchServiceBackends)
	be.run(b, func(int) []byte { return be.toBack }, be.toBack, be.e.Front)
}

// BenchmarkEstablishedBackendToClient64Services: the same for the backend's direction.
func BenchmarkEstablishedBackendToClient64Services(b *testing.B) {
	be := newBenchEnvServices(b, 1024, benchServices, benchServiceBackends)
	be.run(b, func(int) []byte { return be.toCli }, be.toCli, be.e.BackendIface())
}

// BenchmarkNewConnectionSYN: every XLB run is a SYN from a fresh client
// address and port, so every run creates a pair (round robin, SNAT probe,
// two inserts, two FIB lookups). The floor runs its established frame.
func BenchmarkNewConnectionSYN(b *testing.B) {
	benchNewConnections(b, newBenchEnv(b, benchMaxPairs+16))
}

// BenchmarkNewConnectionSYN64Services is BenchmarkNewConnectionSYN with
// 64 services of 16 backends each, the SYNs to one of them.
func BenchmarkNewConnectionSYN64Services(b *testing.B) {
	benchNewConnections(b, newBenchEnvServices(b, benchMaxPairs+16, benchServices, benchServiceBackends))
}

// benchMaxPairs bounds the distinct pairs of the SYN benchmarks (3
// backends x 64,512 SNAT ports).
const benchMaxPairs = 150000

// benchNewConnections runs the SYNs of fresh client addresses and ports
// to be's service.
func benchNewConnections(b *testing.B, be *benchEnv) {
	const maxPairs = benchMaxPairs
	n := min(b.N, maxPairs)
	frames := make([][]byte, n)
	for i := range frames {
		c := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i%100)}), uint16(1024+i/100))
		frames[i] = benchSYN(be.e, c, be.dst).Frame()
	}
	if b.N > maxPairs {
		b.Fatalf("run with -benchtime up to %dx", maxPairs)
	}
	be.run(b, func(i int) []byte { return frames[i] }, be.toBack, be.e.Front)
}
