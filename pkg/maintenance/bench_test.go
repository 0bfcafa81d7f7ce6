package maintenance_test

// Benchmarks of the maintenance loop (make bench). They report, with
// b.ReportMetric, the figures the cleanup issue asks for:
//
//   - cpu-%-of-core: the CPU time the loop's cycles use per second of wall
//     time in production (one cycle per second), as a share of one core.
//     Only the cycles count: Loop.Cycle runs on its own goroutine locked to
//     an OS thread, and that thread's user plus system time is read with
//     getrusage(RUSAGE_THREAD) around each call. The harness's own work
//     (filling the map, opening and closing connections through
//     BPF_PROG_TEST_RUN, checking results) runs on other threads and is not
//     counted. System time includes the kernel's side of the cycle: batch
//     reads of the flow map, the reaper's run, counter reads. The Go
//     runtime's background GC workers run on other threads and are not
//     counted either (GC assists charged to the cycle are).
//   - wall-ms/cycle (also ns/op): a cycle's wall-clock time. The machine
//     may be shared, so this is noisier than the CPU figure.
//   - bytes/pair: the flow map's kernel memory (its memlock figure) over
//     the pairs it is sized for (flow_table.max_connections); the map is
//     preallocated, so this is the cost of capacity, full or not.
//   - rst-removal-cycles, fin-removal-s-min, fin-removal-s-max: how long a
//     terminal pair stays: cycles from its RST to its removal (the cycle
//     that removed it included; aim 1), seconds on the loop's clock from
//     its second FIN to its removal (aim 60 ± 1). See each benchmark.
//
// Time is simulated: the loop runs with a manual clock, so a minute of
// time-wait takes as long as the cycles do, not 60 s.

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

const (
	// benchClosesPerSecond is the close rate of the "closes" cases: per
	// simulated second, half the pairs end with both FINs (time-wait),
	// half with a RST; as many new pairs open.
	benchClosesPerSecond = 5000
	// benchOpenPool is how many pairs the closes cases open through the
	// real program and keep open, oldest closed first: each lives
	// benchOpenPool/benchClosesPerSecond simulated seconds before closing.
	benchOpenPool = 20_000
	// benchWarmupSeconds is how many simulated seconds the closes cases
	// run before measuring: longer than the time-wait, so the time-wait
	// schedule is full and removes as many pairs per cycle as it receives.
	benchWarmupSeconds = 70
	// benchMeasuredCycles is the fewest cycles measured (more with
	// -benchtime Nx, N larger): three whole passes of the walk with the
	// defaults (a pass per EmbryonicTTL, 10 s, at one cycle per second).
	benchMeasuredCycles = 30
	// benchPatience is how many cycles past its expected removal a
	// terminal pair may stay before a benchmark gives up on it.
	benchPatience = 10
)

// benchTimeWaitCycles is the time-wait in cycles of one second.
var benchTimeWaitCycles = int(maintenance.TimeWait / time.Second)

// BenchmarkCycle measures steady-state maintenance cycles over a flow map
// of N pairs (figures in the file comment).
//
// idle: N live, established pairs written straight into the map, fresh,
// that nothing closes; every cycle reads and checks its slice of the walk
// and removes nothing. Measured over three walk passes (30 cycles) after
// one pass of warm-up. reads=per_key is the fallback where batch map operations are
// refused (dataplane.FeatureBatchOps disabled).
//
// closes=5000: N live pairs (N − 20,000 written straight into the map,
// 20,000 opened through the real program) and, every simulated second,
// 5,000 of the opened pairs made terminal through the real program (2,500
// with both FINs, 2,500 with a client RST) and 5,000 new ones opened (each
// a whole handshake, so every cycle also checks the 5,000 pairs whose
// embryonic deadline falls), so
// N stays live and, once the time-wait is full, 150,000 pairs wait in
// time-wait on top of them. Measured over 30 cycles after 70 simulated
// seconds. events=per_cpu_queue is the fallback where ring buffers are
// refused (dataplane.FeatureRingBuf disabled). The map is sized for N
// plus 205,000 pairs (the time-wait pairs, and room for terminal pairs
// that stay a few cycles too long) and bytes/pair is over that capacity;
// the kernel rounds a hash map's buckets up to a power of two, so the map
// may have twice the idle case's buckets: fewer entries per bucket, more
// bytes per pair.
func BenchmarkCycle(b *testing.B) {
	for _, c := range []struct {
		name    string
		pairs   int
		closes  bool
		disable []dataplane.Feature
	}{
		{"idle/pairs=100000", 100_000, false, nil},
		{"idle/pairs=1000000", 1_000_000, false, nil},
		{"idle/pairs=4000000", 4_000_000, false, nil},
		{"idle/reads=per_key/pairs=100000", 100_000, false, []dataplane.Feature{dataplane.FeatureBatchOps}},
		{"closes=5000/pairs=100000", 100_000, true, nil},
		{"closes=5000/pairs=1000000", 1_000_000, true, nil},
		{"closes=5000/pairs=4000000", 4_000_000, true, nil},
		{"closes=5000/events=per_cpu_queue/pairs=1000000", 1_000_000, true, []dataplane.Feature{dataplane.FeatureRingBuf}},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.closes {
				benchCloses(b, c.pairs, c.disable)
			} else {
				benchIdle(b, c.pairs, c.disable)
			}
		})
	}
}

// benchIdle is the idle case: pairs fresh pairs, the clock moving one
// second per cycle, nothing to remove.
func benchIdle(b *testing.B, pairs int, disable []dataplane.Feature) {
	e := dt.NewEnv(b, dt.Options{MaxConnections: uint32(pairs), Disable: disable})
	benchWantDisabled(b, e.DP, disable)
	start := e.Now(b)
	benchFill(b, e.DP, pairs, start)
	r := newBenchLoop(b, e, start)
	second := benchTicks(b, e.DP, time.Second)
	want := func(s *maintenance.Sample) {
		if s.Removed != (maintenance.Removed{}) || s.Lone != 0 {
			b.Fatalf("cycle %d removed %+v and found %d lone entries over idle, intact pairs", s.Cycle, s.Removed, s.Lone)
		}
	}
	s := r.prime(b, want)
	for range s.Walk.PassCycles { // one pass of warm-up at the production pace
		r.clk.Add(second)
		want(r.cycle(b).s)
	}
	var m benchMeasure
	b.ResetTimer()
	for range max(benchMeasuredCycles, b.N) {
		r.clk.Add(second)
		c := r.cycle(b)
		want(c.s)
		m.add(c)
	}
	b.StopTimer()
	if got := benchCountEntries(b, e.DP); got != 2*pairs {
		b.Fatalf("flow map holds %d entries after the run, want %d", got, 2*pairs)
	}
	m.report(b, e.DP, pairs)
}

// benchCloses is the closes case (BenchmarkCycle). Each simulated second
// j: the oldest open pairs are made terminal and new ones opened through
// the real program, the loop's clock is set, and one cycle runs.
//
// The data path stamps closes with the kernel's real clock, which moves
// at its own pace, not one second per cycle. So the loop's clock cannot
// simply advance a second per cycle: time-waits would end early (the
// clock running ahead of the stamps) and the schedule would never fill.
// Instead, from second 60 on, the clock of cycle j is the time of the
// last second FIN of second j−60, plus the time-wait: exactly the pairs
// closed 60 simulated seconds earlier are due, as in production with one
// cycle per second. Before that it stays short of the first FIN plus the
// time-wait. (Every batch's FINs are stamped on later jiffies than the
// previous batch's, so batches never share a deadline.) The orphan TTL is
// never reached: pairs live a few seconds of simulated time and the
// filled pairs a few minutes at most.
func benchCloses(b *testing.B, pairs int, disable []dataplane.Feature) {
	if pairs < benchOpenPool {
		b.Fatalf("closes case needs at least %d pairs", benchOpenPool)
	}
	const fins = benchClosesPerSecond / 2
	const rsts = benchClosesPerSecond - fins
	// room for the time-wait pairs, and for terminal pairs staying a few
	// cycles too long without filling the map
	capacity := pairs + fins*benchTimeWaitCycles + benchClosesPerSecond*(1+benchPatience)
	backends := benchBackends()
	e := dt.NewEnv(b, dt.Options{
		MaxConnections: uint32(capacity), Disable: disable, Backends: backends,
		SNATPortLo: 1024, SNATPortHi: 65535,
	})
	benchWantDisabled(b, e.DP, disable)
	if err := benchNeighbours(e, backends); err != nil {
		b.Fatal(err)
	}
	start := e.Now(b)
	filled := pairs - benchOpenPool
	benchFill(b, e.DP, filled, start)
	tr := &benchTraffic{e: e}
	if err := tr.churn(0, 0, benchOpenPool); err != nil {
		b.Fatal(err)
	}
	r := newBenchLoop(b, e, start)
	tw := benchTicks(b, e.DP, maintenance.TimeWait)
	sound := func(s *maintenance.Sample) {
		if s.Removed.Orphaned != 0 || s.Removed.Repaired != 0 || s.Removed.Kept != 0 || s.Lone != 0 ||
			s.CloseEvents.Lost != 0 || s.Active != benchOpenPool {
			b.Fatalf("cycle %d: removed %+v, %d lone, %d close events lost, %d active pairs (want %d): want only time-wait and reset removals",
				s.Cycle, s.Removed, s.Lone, s.CloseEvents.Lost, s.Active, benchOpenPool)
		}
	}
	if s := r.prime(b, sound); s.CloseEvents.Path != benchEventPath(disable) {
		b.Fatalf("close events through %s, want %s", s.CloseEvents.Path, benchEventPath(disable))
	}

	var (
		finEnd []dataplane.Jiffies // per second: the clock after its last second FIN
		track  benchTracker
		m      benchMeasure
		size   int
		last   *maintenance.Sample // the latest cycle's
	)
	seconds := benchWarmupSeconds + max(benchMeasuredCycles, b.N)
	for j := range seconds {
		if j > 0 { // stamp this second's FINs after the previous second's last one
			e.WaitTick(b, finEnd[j-1])
		}
		closing := tr.oldest(fins + rsts)
		fin, rst := closing[:fins], closing[fins:]
		if err := tr.churn(fins, rsts, benchClosesPerSecond); err != nil {
			b.Fatal(err)
		}
		finEnd = append(finEnd, e.Now(b))
		track.closed(j, fin, rst)

		now := min(finEnd[j], start+tw-1) // nothing is due yet
		if j >= benchTimeWaitCycles {
			now = finEnd[j-benchTimeWaitCycles] + tw
		}
		r.clk.Set(now)
		c := r.cycle(b)
		sound(c.s)
		last = c.s
		if j >= benchWarmupSeconds {
			m.add(c)
		}
		if err := track.check(j, e.DP); err != nil {
			b.Fatal(err)
		}
		if j == benchWarmupSeconds-1 {
			size = benchCountEntries(b, e.DP)
			b.ResetTimer()
		}
	}
	b.StopTimer()
	// The table is back to the size it had when measuring started, and the
	// gauges account for every entry in it.
	got := benchCountEntries(b, e.DP)
	s := last
	if want := 2 * (filled + int(s.Active+s.TimeWait+s.Resetting)); got != size || got != want {
		b.Fatalf("flow map holds %d entries after the run, %d when measuring started, %d by the gauges (%d filled pairs + active %d, time-wait %d, resetting %d)",
			got, size, want, filled, s.Active, s.TimeWait, s.Resetting)
	}
	m.report(b, e.DP, capacity)
	track.report(b)
}

// benchLoop is a maintenance loop over a fixture's data path, with a
// manual clock, whose cycles run on a dedicated, locked OS thread.
type benchLoop struct {
	loop *maintenance.Loop
	clk  *manualClock
	run  chan struct{}
	done chan benchCycle
}

// benchCycle is one cycle's sample and cost.
type benchCycle struct {
	s         *maintenance.Sample
	err       error
	cpu, wall time.Duration
}

func newBenchLoop(b *testing.B, e *dt.Env, start dataplane.Jiffies) *benchLoop {
	b.Helper()
	log, _ := logtest.NewNullLogger()
	clk := newManualClock(start)
	l, err := maintenance.New(e.DP, maintenance.Options{Clock: clk, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	r := &benchLoop{loop: l, clk: clk, run: make(chan struct{}), done: make(chan benchCycle)}
	go r.thread()
	b.Cleanup(func() {
		close(r.run)
		l.Close()
	})
	return r
}

// thread runs a cycle per request on one OS thread that runs nothing else,
// so the thread's CPU time around a cycle is the cycle's.
func (r *benchLoop) thread() {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	for range r.run {
		var c benchCycle
		cpu0, err := threadCPU()
		if err != nil {
			r.done <- benchCycle{err: err}
			continue
		}
		t0 := time.Now()
		c.s, c.err = r.loop.Cycle(context.Background())
		c.wall = time.Since(t0)
		cpu1, err := threadCPU()
		if c.err == nil {
			c.err = err
		}
		c.cpu = cpu1 - cpu0
		r.done <- c
	}
}

// cycle runs one cycle and fails the benchmark if it failed.
func (r *benchLoop) cycle(b *testing.B) benchCycle {
	b.Helper()
	r.run <- struct{}{}
	c := <-r.done
	if c.err != nil {
		b.Fatalf("cycle: %v", c.err)
	}
	return c
}

// prime runs cycles, without moving the clock, until the walk has made one
// whole pass. Pairs written straight into the map are unknown to the
// gauges, so until the walk has counted them it reads only the minimum
// slice per cycle; afterwards it paces itself by the count, as over a map
// the data path filled.
func (r *benchLoop) prime(b *testing.B, check func(*maintenance.Sample)) *maintenance.Sample {
	b.Helper()
	for {
		s := r.cycle(b).s
		check(s)
		if s.Walk.Passes > 0 {
			return s
		}
	}
}

// threadCPU is the calling thread's user plus system CPU time so far.
func threadCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// benchMeasure sums the measured cycles' cost.
type benchMeasure struct {
	cycles    int
	cpu, wall time.Duration
}

func (m *benchMeasure) add(c benchCycle) {
	m.cycles++
	m.cpu += c.cpu
	m.wall += c.wall
}

// report reports the cycle figures and the flow map's memory per pair of
// capacity.
func (m *benchMeasure) report(b *testing.B, dp *dataplane.Dataplane, capacity int) {
	b.Helper()
	mem, err := dp.FlowMapMemlock()
	if err != nil {
		b.Fatal(err)
	}
	n := float64(m.cycles)
	b.ReportMetric(float64(m.wall.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(m.wall.Microseconds())/1e3/n, "wall-ms/cycle")
	// one cycle per second: CPU per cycle over 1 s
	b.ReportMetric(m.cpu.Seconds()/n*100, "cpu-%-of-core")
	b.ReportMetric(float64(mem)/float64(capacity), "bytes/pair")
}

// benchWantDisabled fails the benchmark unless the data path reports
// every feature of disable as disabled (so it took the fallback path).
func benchWantDisabled(b *testing.B, dp *dataplane.Dataplane, disable []dataplane.Feature) {
	b.Helper()
	for _, f := range disable {
		if st := dp.Features().Get(f); st.State != dataplane.StateDisabled {
			b.Fatalf("feature %s is %s (path %s), want disabled", f, st.State, st.Path)
		}
	}
}

// benchEventPath is the close event path the data path takes with disable.
func benchEventPath(disable []dataplane.Feature) string {
	if slices.Contains(disable, dataplane.FeatureRingBuf) {
		return dataplane.PathPerCPUQueue
	}
	return dataplane.PathRingBuffer
}

// benchTicks converts d to the data path's clock.
func benchTicks(b *testing.B, dp *dataplane.Dataplane, d time.Duration) dataplane.Jiffies {
	b.Helper()
	j, err := dp.Ticks(d)
	if err != nil {
		b.Fatal(err)
	}
	return j
}

// benchFill writes n live, established pairs, last seen at now, straight
// into the flow map (BPF_MAP_UPDATE_BATCH, or one update per entry on the
// per-key path).
// Clients 198.18.0.0/16 on ports 10000-59999 to listen 192.0.2.10:80;
// backends 203.0.113.1-250:8080 (outside the fixture's routable set, so
// no packet ever meets these pairs) from SNAT 192.0.2.10:1024 and up;
// generations from 2^31 (the data path counts up from 1); backend ids
// 64-127. Each pair is what the data path would have created: the
// forward recipe is the reverse key read backwards and the other way
// round (FlowValue.Peer).
func benchFill(b *testing.B, dp *dataplane.Dataplane, n int, now dataplane.Jiffies) {
	b.Helper()
	listen := netip.AddrPortFrom(dt.ListenIP, 80)
	const chunk = 1 << 15
	keys := make([]dataplane.FlowKey, 0, chunk)
	vals := make([]dataplane.FlowValue, 0, chunk)
	flush := func() {
		if _, err := dp.PutFlows(keys, vals); err != nil {
			b.Fatal(err)
		}
		keys, vals = keys[:0], vals[:0]
	}
	for i := range n {
		client := netip.AddrPortFrom(benchAddr(198, 18, i/50_000), uint16(10_000+i%50_000))
		backend := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i%250)}), 8080)
		snat := netip.AddrPortFrom(dt.ListenIP, uint16(1024+i/250))
		fk := dataplane.NewFlowKey(client, listen, dataplane.DirClient)
		rk := dataplane.NewFlowKey(backend, snat, dataplane.DirBackend)
		gen, bid := uint32(1<<31+i), uint16(64+i%64)
		fv := dataplane.FlowValue{SaddrBe: rk.DaddrBe, DaddrBe: rk.SaddrBe, SportBe: rk.DportBe, DportBe: rk.SportBe,
			Generation: gen, BackendId: bid, LastSeen: now.Low32(), Flags: dataplane.FlagSYNACK | dataplane.FlagEstablished}
		rv := dataplane.FlowValue{SaddrBe: fk.DaddrBe, DaddrBe: fk.SaddrBe, SportBe: fk.DportBe, DportBe: fk.SportBe,
			Generation: gen, BackendId: bid, LastSeen: now.Low32()}
		if i == 0 && (fv.Peer(fk) != rk || rv.Peer(rk) != fk) {
			b.Fatalf("filled pair is not a pair: forward %v names %v, reverse %v names %v", fk, fv.Peer(fk), rk, rv.Peer(rk))
		}
		keys = append(keys, fk, rk)
		vals = append(vals, fv, rv)
		if len(keys) >= chunk {
			flush()
		}
	}
	flush()
}

// benchAddr is the i-th address of the /16 a.b.0.0.
func benchAddr(a, b byte, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{a, b, byte(i >> 8), byte(i)})
}

// benchCountEntries counts the flow map's entries with one pass of a walk.
func benchCountEntries(b *testing.B, dp *dataplane.Dataplane) int {
	b.Helper()
	w := dp.NewFlowWalk(4096)
	total := 0
	for {
		n, end, err := w.Next()
		if err != nil {
			b.Fatal(err)
		}
		total += n
		if end {
			return total
		}
	}
}

// benchBackends are the closes cases' 16 backends, 192.0.2.40-55:8080 (one
// arm). With SNAT ports 1024-65535 each backend's SNAT cursor comes back
// to a port after about 200 simulated seconds at 5,000 pairs per second,
// long after the port's previous pair left time-wait.
func benchBackends() []netip.Addr {
	out := make([]netip.Addr, 16)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{192, 0, 2, byte(40 + i)})
	}
	return out
}

// benchNeighbours adds permanent neighbours for extra backends on the
// fixture's front interface (the fixture has them for its own three).
func benchNeighbours(e *dt.Env, ips []netip.Addr) error {
	return e.Do(func() error {
		for _, ip := range ips {
			n := &netlink.Neigh{LinkIndex: e.Front.Index, State: netlink.NUD_PERMANENT, IP: ip.AsSlice(), HardwareAddr: dt.MAC(ip), Family: netlink.FAMILY_V4}
			if err := netlink.NeighSet(n); err != nil {
				return fmt.Errorf("neighbour %s: %w", ip, err)
			}
		}
		return nil
	})
}

// benchConn is one connection the harness opened through the real
// program: the client, and the backend and SNAT port the data path chose.
type benchConn struct {
	client, backend netip.AddrPort
	snatPort        uint16
}

// key is the pair's forward flow key.
func (c benchConn) key() dataplane.FlowKey { return dt.ForwardKey(c.client, 80) }

// benchTraffic opens and closes connections through the real program
// (BPF_PROG_TEST_RUN in the fixture's namespace). Client tuples are never
// reused: clients 198.19.0.0/16, ports 10000-59999, to listen 192.0.2.10:80.
type benchTraffic struct {
	e      *dt.Env
	opened int         // client tuples used so far
	open   []benchConn // open connections, oldest first
}

// oldest returns the n oldest open connections (those churn closes next).
func (t *benchTraffic) oldest(n int) []benchConn {
	return append([]benchConn(nil), t.open[:n]...)
}

// churn makes the fins oldest open connections terminal with both FINs
// (client first), the rsts next ones with a client RST, and opens opens
// new ones with a whole handshake (SYN, SYN-ACK, ACK). Every frame must be
// forwarded (XDP_TX: one arm).
func (t *benchTraffic) churn(fins, rsts, opens int) error {
	e := t.e
	closing := t.open[:fins+rsts]
	var opened []benchConn
	err := e.Do(func() error {
		send := func(s dt.Segment, in dt.Iface) ([]byte, error) {
			act, out, err := e.RunHere(s.Frame(), in)
			if err != nil {
				return nil, err
			}
			if act != dt.XDPTX {
				return nil, fmt.Errorf("%v -> %v flags %#x: action %s, want XDP_TX", s.Src, s.Dst, s.Flags, dt.ActionName(act))
			}
			return out, nil
		}
		for i, c := range closing {
			if i < fins {
				if _, err := send(e.FromClient(c.client, 80, dt.FIN|dt.ACK, 1001, 5001, nil), e.Front); err != nil {
					return err
				}
				if _, err := send(e.FromBackend(c.backend, c.snatPort, dt.FIN|dt.ACK, 5001, 1002, nil), e.BackendIface()); err != nil {
					return err
				}
				continue
			}
			if _, err := send(e.FromClient(c.client, 80, dt.RST|dt.ACK, 1001, 5001, nil), e.Front); err != nil {
				return err
			}
		}
		for range opens {
			client := netip.AddrPortFrom(benchAddr(198, 19, t.opened/50_000), uint16(10_000+t.opened%50_000))
			t.opened++
			out, err := send(e.FromClient(client, 80, dt.SYN, 1000, 0, nil), e.Front)
			if err != nil {
				return err
			}
			d, err := dt.Decode(out)
			if err != nil {
				return fmt.Errorf("SYN from %v: %w", client, err)
			}
			c := benchConn{client: client, backend: d.Dst(), snatPort: d.Src().Port()}
			if _, err := send(e.FromBackend(c.backend, c.snatPort, dt.SYN|dt.ACK, 5000, 1001, nil), e.BackendIface()); err != nil {
				return err
			}
			if _, err := send(e.FromClient(client, 80, dt.ACK, 1001, 5001, nil), e.Front); err != nil {
				return err
			}
			opened = append(opened, c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	t.open = append(t.open[fins+rsts:], opened...)
	return nil
}

// benchTracker follows a sample of the terminal pairs until they are gone
// and records how long each stayed. A pair closed in simulated second j
// (before cycle j) and gone after cycle k stayed:
//
//   - RST pairs: k−j+1 cycles, the cycle that removed it included (1:
//     removed by the first cycle after the RST);
//   - FIN pairs: k−j simulated seconds, from the second FIN to the cycle
//     that removed the pair (cycle j runs in the second of the FIN, at its
//     end: the clock of cycle j+60 is the first at or past the FIN plus
//     60 s, see benchCloses).
type benchTracker struct {
	pending          []benchPending
	rst, finMin, fin int // most cycles a RST pair took; fewest and most seconds a FIN pair took
	rstN, finN       int // pairs measured
}

type benchPending struct {
	key    dataplane.FlowKey
	closed int // the cycle that followed the close
	fin    bool
}

// benchTrackEvery is the share of terminal pairs followed (one in
// benchTrackEvery): lookups are cheap, but 150,000 per cycle are not.
const benchTrackEvery = 50

// closed records the pairs closed before cycle j.
func (t *benchTracker) closed(j int, fin, rst []benchConn) {
	for i := 0; i < len(fin); i += benchTrackEvery {
		t.pending = append(t.pending, benchPending{key: fin[i].key(), closed: j, fin: true})
	}
	for i := 0; i < len(rst); i += benchTrackEvery {
		t.pending = append(t.pending, benchPending{key: rst[i].key(), closed: j})
	}
}

// check looks up the followed pairs after cycle j. A pair still there
// benchPatience cycles after it was due (RST: 1 cycle; FIN: 60 s) is an
// error: it is not being removed.
func (t *benchTracker) check(j int, dp *dataplane.Dataplane) error {
	kept := t.pending[:0]
	for _, p := range t.pending {
		took, due := j-p.closed+1, 1
		if p.fin {
			took, due = j-p.closed, benchTimeWaitCycles
		}
		_, err := dp.LookupFlow(p.key)
		if err == nil {
			if took >= due+benchPatience {
				return fmt.Errorf("pair %v closed before cycle %d is still in the flow map after cycle %d", p.key, p.closed, j)
			}
			kept = append(kept, p)
			continue
		}
		if err != dataplane.ErrNotFound {
			return err
		}
		if p.fin {
			if t.finN == 0 || took < t.finMin {
				t.finMin = took
			}
			t.fin = max(t.fin, took)
			t.finN++
		} else {
			t.rst = max(t.rst, took)
			t.rstN++
		}
	}
	t.pending = kept
	return nil
}

// report reports the removal delays: RST in cycles, FIN in simulated seconds.
func (t *benchTracker) report(b *testing.B) {
	b.Helper()
	if t.rstN == 0 || t.finN == 0 {
		b.Fatalf("no removal measured (%d RST pairs, %d FIN pairs)", t.rstN, t.finN)
	}
	b.ReportMetric(float64(t.rst), "rst-removal-cycles")
	b.ReportMetric(float64(t.finMin), "fin-removal-s-min")
	b.ReportMetric(float64(t.fin), "fin-removal-s-max")
}

// BenchmarkCloseLatency measures how long terminal pairs stay, with the
// loop's clock moving one second per cycle as in production, over a small
// table:
//
//   - rst-removal-cycles: cycles from a RST (one by the client, one by the
//     backend) to the pair's removal, the most of both; aim 1, the next
//     cycle.
//   - fin-removal-s-min, fin-removal-s-max: seconds on the loop's clock
//     from the second FIN (the moment the data path stamps) to the cycle
//     that removed the pair, over ten pairs whose second FINs fall at
//     different points between two cycles; aim 60 s ± 1 s. With a cycle
//     a second, a pair is due 60 s after its second FIN and removed by the
//     first cycle at or after that: between 60 and 61 s.
func BenchmarkCloseLatency(b *testing.B) {
	e := dt.NewEnv(b, dt.Options{MaxConnections: 1024, SNATPortLo: 1024, SNATPortHi: 65535})
	r := newBenchLoop(b, e, e.Now(b))
	second := benchTicks(b, e.DP, time.Second)
	tr := &benchTraffic{e: e}
	gone := func(c benchConn) bool {
		_, err := e.DP.LookupFlow(c.key())
		if err != nil && err != dataplane.ErrNotFound {
			b.Fatal(err)
		}
		return err == dataplane.ErrNotFound
	}
	b.ResetTimer()
	rst, fin := 0, []float64{}
	for range b.N {
		// Resets: the clock follows the kernel's.
		if err := tr.churn(0, 0, 2); err != nil {
			b.Fatal(err)
		}
		r.clk.Set(e.Now(b))
		r.cycle(b)
		pair := tr.oldest(2)
		if err := tr.churn(0, 1, 0); err != nil { // client RST
			b.Fatal(err)
		}
		if err := benchBackendRST(e, pair[1]); err != nil {
			b.Fatal(err)
		}
		tr.open = tr.open[1:]
		for n := 1; !gone(pair[0]) || !gone(pair[1]); n++ {
			if n > 1+benchPatience {
				b.Fatalf("RST pairs still in the flow map after %d cycles", n-1)
			}
			r.clk.Set(e.Now(b))
			r.cycle(b)
			rst = max(rst, n)
		}

		// Time-waits: ten pairs whose second FINs are about 0.1 s apart.
		const pairs = 10
		if err := tr.churn(0, 0, pairs); err != nil {
			b.Fatal(err)
		}
		closing := tr.oldest(pairs)
		stamps := make([]dataplane.Jiffies, pairs)
		for i := range pairs {
			if err := tr.churn(1, 0, 0); err != nil {
				b.Fatal(err)
			}
			stamps[i] = benchClosedAt(b, e, closing[i])
			if i < pairs-1 {
				time.Sleep(time.Second / pairs)
			}
		}
		// The first cycle runs at the last FIN: the others came 0-1 s
		// before, at different points of the second.
		r.clk.Set(stamps[pairs-1])
		removed := make([]bool, pairs)
		for left, n := pairs, 0; left > 0; n++ {
			if n > benchTimeWaitCycles+1+benchPatience {
				b.Fatalf("%d time-wait pairs still in the flow map after %d cycles", left, n)
			}
			now := r.cycle(b).s.Now
			for i, c := range closing {
				if !removed[i] && gone(c) {
					removed[i] = true
					left--
					d, err := e.DP.Duration(now - stamps[i])
					if err != nil {
						b.Fatal(err)
					}
					fin = append(fin, d.Seconds())
				}
			}
			r.clk.Add(second)
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op") // mostly the harness sleeping: no figure
	b.ReportMetric(float64(rst), "rst-removal-cycles")
	b.ReportMetric(slices.Min(fin), "fin-removal-s-min")
	b.ReportMetric(slices.Max(fin), "fin-removal-s-max")
}

// benchBackendRST sends a RST from the backend of c.
func benchBackendRST(e *dt.Env, c benchConn) error {
	return e.Do(func() error {
		act, _, err := e.RunHere(e.FromBackend(c.backend, c.snatPort, dt.RST, 5001, 0, nil).Frame(), e.BackendIface())
		if err == nil && act != dt.XDPTX {
			err = fmt.Errorf("backend RST: action %s, want XDP_TX", dt.ActionName(act))
		}
		return err
	})
}

// benchClosedAt is the moment the data path stamped on c's forward entry
// when c became terminal, as a full clock reading.
func benchClosedAt(b *testing.B, e *dt.Env, c benchConn) dataplane.Jiffies {
	b.Helper()
	v, err := e.DP.LookupFlow(c.key())
	if err != nil {
		b.Fatal(err)
	}
	if v.Flags&dataplane.FlagClosedFIN == 0 {
		b.Fatalf("pair %v is not in time-wait after both FINs (flags %#x)", c.key(), v.Flags)
	}
	return dataplane.Widen(e.Now(b), v.LastSeen)
}
