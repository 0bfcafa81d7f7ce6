package dataplane_test

import (
	"fmt"
	"testing"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/dataplane/floor"
)

// The floor balancer's established-packet cost (bpf/floor_lb.c: XLB's parse
// and rewrite without any state), measured beside the floor program and
// XLB on the frames of bench_test.go's established pair. Each iteration
// runs XLB, the floor, the floor balancer and the null program once each,
// one BPF_PROG_TEST_RUN per packet, in an order rotated per iteration; the
// null program's time is subtracted from the others.

// newFloorLBBench is newBenchEnv plus a floor balancer that balances the
// pair's frames: the one client, VIP:80, SNAT the Env's, and the pair's
// backend as its only backend (so the backend's frame comes from the
// backend the balancer picks, whatever the SNAT port).
func newFloorLBBench(b *testing.B) (*benchEnv, *floor.Balancer) {
	b.Helper()
	be := newBenchEnv(b, 1024)
	backend := dt.OneArmBackends[0]
	lb, err := floor.LoadBalancer(floor.BalancerConfig{VIP: dt.ListenIP, SNAT: be.e.SNAT, Client: cli.Addr(), Port: 80,
		SelfMAC: be.e.Front.MAC, ClientMAC: dt.MAC(cli.Addr()),
		Backends: []floor.BalancerBackend{{IP: backend, Port: 8080, MAC: dt.MAC(backend)}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lb.Close() })
	// Attached like XLB and the floor: the test runner calls an attached
	// XDP program directly, any other through a slower indirect call.
	attachDirect(b, be.e, "xflb", lb.Program())
	return be, lb
}

// runFloorLB interleaves the four programs on frame b.N times and reports
// each one's net ns/packet and the ratios xlb/floorlb and floorlb/floor.
func runFloorLB(b *testing.B, be *benchEnv, lb *floor.Balancer, frame []byte, ifc dt.Iface) {
	b.Helper()
	progs := []struct {
		name string
		run  func() (float64, uint32, error)
		tx   bool
	}{
		{"xlb", func() (float64, uint32, error) { return be.e.BenchHere(be.e.DP.Program(), frame, ifc, 1) }, true},
		{"floor", func() (float64, uint32, error) { return be.e.BenchHere(be.floor.Program(), frame, ifc, 1) }, true},
		{"floorlb", func() (float64, uint32, error) { return be.e.BenchHere(lb.Program(), frame, ifc, 1) }, true},
		{"null", func() (float64, uint32, error) { return be.e.BenchHere(be.null, frame, ifc, 1) }, false},
	}
	total := make([]float64, len(progs))
	b.ResetTimer()
	err := be.e.Do(func() error {
		for i := 0; i < b.N; i++ {
			for j := range progs {
				k := (i + j) % len(progs)
				ns, act, err := progs[k].run()
				if err != nil {
					return err
				}
				if progs[k].tx && act != dt.XDPTX {
					return fmt.Errorf("%s run %d: %s, want XDP_TX", progs[k].name, i, dt.ActionName(act))
				}
				total[k] += ns
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	null := total[3] / n
	xlb, fl, lbn := total[0]/n-null, total[1]/n-null, total[2]/n-null
	b.ReportMetric(xlb, "xlb-ns/pkt")
	b.ReportMetric(fl, "floor-ns/pkt")
	b.ReportMetric(lbn, "floorlb-ns/pkt")
	b.ReportMetric(null, "runner-ns")
	if lbn > 0 {
		b.ReportMetric(xlb/lbn, "xlb/floorlb")
	}
	if fl > 0 {
		b.ReportMetric(lbn/fl, "floorlb/floor")
	}
}

// BenchmarkFloorBalancerClientToBackend: a 1,400-byte data segment of the
// established pair, client side.
func BenchmarkFloorBalancerClientToBackend(b *testing.B) {
	be, lb := newFloorLBBench(b)
	runFloorLB(b, be, lb, be.toBack, be.e.Front)
}

// BenchmarkFloorBalancerBackendToClient: the same for the backend's direction.
func BenchmarkFloorBalancerBackendToClient(b *testing.B) {
	be, lb := newFloorLBBench(b)
	runFloorLB(b, be, lb, be.toCli, be.e.BackendIface())
}
