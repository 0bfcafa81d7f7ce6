package dataplane_test

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

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
	toBack []byte // client data frame of the established pair
	toCli  []byte // backend data frame of the established pair
}

func newBenchEnv(b *testing.B, maxConn uint32) *benchEnv {
	b.Helper()
	e := dt.NewEnv(b, dt.Options{MaxConnections: maxConn, SNATPortLo: 1024, SNATPortHi: 65535})
	be := netip.AddrPortFrom(dt.OneArmBackends[0], 8080)
	// A whole handshake: the pair is established, as a real flow's is
	// (an embryonic pair takes the handshake's slower path per packet).
	e.MustRun(b, synFrom(e, cli, 80).Frame(), e.Front, dt.XDPTX)
	var snat uint16
	for k := range e.Flows(b) {
		if k.Direction() == dataplane.DirBackend {
			snat = k.Dst().Port()
		}
	}
	e.MustRun(b, e.FromBackend(be, snat, dt.SYN|dt.ACK, 5000, 1001, nil).Frame(), e.BackendIface(), dt.XDPTX)
	e.MustRun(b, e.FromClient(cli, 80, dt.ACK, 1001, 5001, nil).Frame(), e.Front, dt.XDPTX)
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
		e: e, floor: f, null: null,
		toBack: e.FromClient(cli, 80, dt.ACK|dt.PSH, 1001, 5001, data).Frame(),
		toCli:  e.FromBackend(be, snat, dt.ACK|dt.PSH, 5001, 2401, data).Frame(),
	}
}

// run interleaves xlb (on xlbFrame(i)), the floor (on floorFrame) and the
// null program b.N times and reports net ns/packet and the ratio.
func (be *benchEnv) run(b *testing.B, xlbFrame func(i int) []byte, floorFrame []byte, ifc dt.Iface) {
	b.Helper()
	var tx, tf, tn float64
	b.ResetTimer()
	err := be.e.Do(func() error {
		for i := 0; i < b.N; i++ {
			ns, act, err := be.e.BenchHere(be.e.DP.Program(), xlbFrame(i), ifc, 1)
			if err != nil {
				return err
			}
			if act != dt.XDPTX {
				b.Fatalf("xlb run %d: %s", i, dt.ActionName(act))
			}
			tx += ns
			if ns, act, err = be.e.BenchHere(be.floor.Program(), floorFrame, ifc, 1); err != nil || act != dt.XDPTX {
				b.Fatalf("floor: %s %v", dt.ActionName(act), err)
			}
			tf += ns
			if ns, _, err = be.e.BenchHere(be.null, floorFrame, ifc, 1); err != nil {
				return err
			}
			tn += ns
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	xlb, floor, null := tx/n-tn/n, tf/n-tn/n, tn/n
	b.ReportMetric(xlb, "xlb-ns/pkt")
	b.ReportMetric(floor, "floor-ns/pkt")
	b.ReportMetric(null, "runner-ns")
	if floor > 0 {
		b.ReportMetric(xlb/floor, "ratio")
	}
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

// BenchmarkNewConnectionSYN: every XLB run is a SYN from a fresh client
// address and port, so every run creates a pair (round robin, SNAT probe,
// two inserts, two FIB lookups). The floor runs its established frame.
func BenchmarkNewConnectionSYN(b *testing.B) {
	const maxPairs = 150000 // 3 backends x 64,512 SNAT ports bound the distinct pairs
	be := newBenchEnv(b, maxPairs+16)
	n := min(b.N, maxPairs)
	frames := make([][]byte, n)
	for i := range frames {
		c := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i%100)}), uint16(1024+i/100))
		frames[i] = synFrom(be.e, c, 80).Frame()
	}
	if b.N > maxPairs {
		b.Fatalf("run with -benchtime up to %dx", maxPairs)
	}
	be.run(b, func(i int) []byte { return frames[i] }, be.toBack, be.e.Front)
}
