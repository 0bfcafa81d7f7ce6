package flow_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/flow"
)

// BenchmarkCycle measures one maintenance cycle over a flow map holding
// N live pairs (2N entries), filled directly through the map API with
// fresh last_seen times, so the cycle reads and classifies everything and
// removes nothing (the steady state). Reported per cycle: wall time
// (ns/op), CPU time of the whole process, user plus system, from getrusage
// (cpu-ms/cycle; includes the kernel's batch copy and Go's GC), and the
// flow map's kernel memory per pair from its memlock figure
// (bytes/pair; the map is preallocated, so this is the cost of capacity).
// reads=per_key is the fallback where batch map operations are refused.
func BenchmarkCycle(b *testing.B) {
	for _, pairs := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("reads=batch/pairs=%d", pairs), func(b *testing.B) { benchCycle(b, pairs, nil) })
	}
	b.Run("reads=per_key/pairs=100000", func(b *testing.B) {
		benchCycle(b, 100_000, []dataplane.Feature{dataplane.FeatureBatchOps})
	})
}

func benchCycle(b *testing.B, pairs int, disable []dataplane.Feature) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: loads BPF maps")
	}
	dp, err := dataplane.Load(dataplane.Options{MaxConnections: uint32(pairs), Disable: disable})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dp.Close() })
	now, err := dp.KernelNow()
	if err != nil {
		b.Fatal(err)
	}
	fill(b, dp, pairs, now)
	mem, err := dp.FlowMapMemlock()
	if err != nil {
		b.Fatal(err)
	}
	log, _ := logtest.NewNullLogger()
	l, err := flow.New(dp, flow.Options{Log: log})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	check := func(s *flow.Sample) {
		if s.FlowEntries != uint64(2*pairs) || s.Active != uint64(pairs) || s.Removed != (flow.Removed{}) || s.Lone != 0 {
			b.Fatalf("cycle read %d entries, %d active, removed %+v, lone %d; want %d entries, all active, nothing removed",
				s.FlowEntries, s.Active, s.Removed, s.Lone, 2*pairs)
		}
	}
	s, err := l.Cycle(ctx) // warm up: buffers and maps reach their size
	if err != nil {
		b.Fatal(err)
	}
	check(s)
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	start := time.Now()
	n := 0
	for b.Loop() {
		s, err := l.Cycle(ctx)
		if err != nil {
			b.Fatal(err)
		}
		check(s)
		n++
	}
	b.StopTimer()
	wall := time.Since(start)
	cpu := cpuTime(b) - cpu0
	b.ReportMetric(float64(wall.Microseconds())/1e3/float64(n), "wall-ms/cycle")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(n), "cpu-ms/cycle")
	b.ReportMetric(float64(mem)/float64(pairs), "bytes/pair")
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fill inserts pairs live pairs with BPF_MAP_UPDATE_BATCH: clients
// 192.0.2.0/24 on many ports to listen 192.0.2.10:80, backends
// 198.51.100.1-200:8080 from SNAT 192.0.2.10, 64 backend ids.
func fill(b testing.TB, dp *dataplane.Dataplane, pairs int, now dataplane.Jiffies) {
	b.Helper()
	listen := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.10"), 80)
	const chunk = 1 << 15
	keys := make([]dataplane.FlowKey, 0, chunk)
	vals := make([]dataplane.FlowValue, 0, chunk)
	flush := func() {
		if _, err := dp.PutFlows(keys, vals); err != nil {
			b.Fatal(err)
		}
		keys, vals = keys[:0], vals[:0]
	}
	for i := range pairs {
		client := netip.AddrPortFrom(addr(192, 0, 2, byte(i/60000)), uint16(1024+i%60000))
		backend := netip.AddrPortFrom(addr(198, 51, 100, byte(1+i%200)), 8080)
		snat := netip.AddrPortFrom(listen.Addr(), uint16(1024+i/200))
		fk := dataplane.NewFlowKey(client, listen, dataplane.DirClient)
		rk := dataplane.NewFlowKey(backend, snat, dataplane.DirBackend)
		gen := uint32(i + 1)
		fv := dataplane.FlowValue{Generation: gen, BackendId: uint32(i % 64), Peer: rk, LastSeen: uint64(now)}
		rv := dataplane.FlowValue{Generation: gen, BackendId: uint32(i % 64), Peer: fk, LastSeen: uint64(now)}
		keys = append(keys, fk, rk)
		vals = append(vals, fv, rv)
		if len(keys) >= chunk {
			flush()
		}
	}
	flush()
}

func addr(a, b, c, d byte) netip.Addr { return netip.AddrFrom4([4]byte{a, b, c, d}) }
