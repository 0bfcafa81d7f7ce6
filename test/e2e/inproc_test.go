package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/test/lab"
)

// inprocXLB is an XLB instance inside the test process: the real data path
// attached natively in the lab's XLB namespace and the real maintenance
// loop, whose clock is the data path's plus an offset the test can grow (to
// jump past time-wait or the orphan TTL without waiting). Tests that need
// to look inside (flow map, samples, counters) use it instead of the
// daemon. Everything is stopped, detached and closed in t.Cleanup.
type inprocXLB struct {
	DP    *dataplane.Dataplane
	Loop  *maintenance.Loop
	Clock *maintenance.OffsetClock

	mu      sync.Mutex
	samples []*maintenance.Sample // every published sample, oldest first (the last maxSamples)
}

// maxSamples bounds the samples an inprocXLB keeps.
const maxSamples = 1 << 14

// inprocOptions shape an inprocXLB. Zero values take the defaults noted.
type inprocOptions struct {
	MaxConnections uint32              // default 65536
	Ports          []dataplane.PortMap // default 80->8080
	Interval       time.Duration       // maintenance interval, default 50 ms
	OrphanTTL      time.Duration       // default maintenance.DefaultOrphanTTL
	Disable        []dataplane.Feature // optional kernel features to turn off (fallback paths)
}

// inprocListen is the listen address of every lab topology.
var inprocListen = lab.XLBFrontIP

// startInproc loads, configures and attaches XLB in l's XLB namespace
// (listen 192.0.2.10, SNAT 192.0.2.10 one-arm or 198.51.100.1 two-arm,
// range 40000-59999, backends with ids 0..n-1 in lab order) and runs the
// maintenance loop.
func startInproc(t *testing.T, l *lab.Lab, o inprocOptions) *inprocXLB {
	t.Helper()
	if o.MaxConnections == 0 {
		o.MaxConnections = 65536
	}
	if len(o.Ports) == 0 {
		o.Ports = []dataplane.PortMap{{Local: 80, Remote: 8080}}
	}
	if o.Interval == 0 {
		o.Interval = 50 * time.Millisecond
	}
	dp, err := dataplane.Load(dataplane.Options{MaxConnections: o.MaxConnections, Disable: o.Disable})
	if err != nil {
		t.Fatal(err)
	}
	x := &inprocXLB{DP: dp}
	t.Cleanup(func() {
		if err := l.XLB.Do(dp.Close); err != nil {
			t.Errorf("inproc: close data path: %v", err)
		}
	})
	snat, ifaces := inprocListen, []string{"eth0"}
	if l.Topology == lab.TwoArm {
		snat, ifaces = lab.XLBBackIP, []string{"eth0", "eth1"}
	}
	if err := dp.Configure(dataplane.Settings{Listen: inprocListen, SNAT: snat, SNATPortLo: 40000, SNATPortHi: 59999, Ports: o.Ports}); err != nil {
		t.Fatal(err)
	}
	refs := make([]dataplane.BackendRef, len(l.Backends))
	ids := make([]uint32, len(l.Backends))
	for i, b := range l.Backends {
		refs[i], ids[i] = dataplane.BackendRef{ID: uint32(i), IP: b.IP()}, uint32(i)
	}
	if err := dp.SetRoutable(refs); err != nil {
		t.Fatal(err)
	}
	// Permanent neighbours for every lab endpoint, so bpf_fib_lookup
	// resolves the first SYN (the daemon keeps them resolved with netlink).
	if err := inprocNeighbours(l); err != nil {
		t.Fatal(err)
	}
	err = l.XLB.Do(func() error {
		if _, err := dataplane.EnableFIBLookups(); err != nil {
			return err
		}
		for _, ifc := range ifaces {
			if _, err := dp.Attach(ifc, dataplane.ModeNative); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	x.Clock = maintenance.NewOffsetClock(maintenance.KernelClock(dp))
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	log.SetOutput(&testLogWriter{t: t})
	loop, err := maintenance.New(dp, maintenance.Options{
		OrphanTTL: o.OrphanTTL, Interval: o.Interval, Clock: x.Clock, Log: log,
		BackendIDs: func() []uint32 { return ids },
		OnSample:   x.record,
	})
	if err != nil {
		t.Fatal(err)
	}
	x.Loop = loop
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		loop.Close()
		log.SetOutput(discard{})
	})
	return x
}

func inprocNeighbours(l *lab.Lab) error {
	hosts := append([]*lab.Host(nil), l.Clients...)
	for _, b := range l.Backends {
		hosts = append(hosts, b.Host)
	}
	nl := l.XLB.Netlink()
	for _, h := range hosts {
		ip := h.IP()
		var out *lab.Iface
		for i := range l.XLB.Ifaces {
			if l.XLB.Ifaces[i].Addr.Contains(ip) {
				out = &l.XLB.Ifaces[i]
			}
		}
		if out == nil {
			return fmt.Errorf("inproc: no XLB interface reaches %s", ip)
		}
		n := &netlink.Neigh{LinkIndex: out.Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: net.IP(ip.AsSlice()), HardwareAddr: testnet.EndpointMAC(ip)}
		if err := nl.NeighSet(n); err != nil {
			return fmt.Errorf("inproc: neighbour %s: %w", ip, err)
		}
	}
	return nil
}

// Advance jumps the loop's clock forward by d.
func (x *inprocXLB) Advance(t *testing.T, d time.Duration) {
	t.Helper()
	j, err := x.DP.Ticks(d)
	if err != nil {
		t.Fatal(err)
	}
	x.Clock.Add(j)
}

// WaitSample polls the published samples until one started after this call
// satisfies ok, or fails the test after timeout (generous: the machine is
// shared and noisy). It returns that sample.
func (x *inprocXLB) WaitSample(t *testing.T, timeout time.Duration, what string, ok func(*maintenance.Sample) bool) *maintenance.Sample {
	t.Helper()
	var after uint64
	if s := x.Loop.Latest(); s != nil {
		after = s.Cycle
	}
	deadline := time.Now().Add(timeout)
	var last *maintenance.Sample
	for time.Now().Before(deadline) {
		if s := x.Loop.Latest(); s != nil && s.Cycle > after {
			last = s
			if ok(s) {
				return s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if last == nil {
		t.Fatalf("inproc: no maintenance sample within %v", timeout)
	}
	t.Fatalf("inproc: %s: not reached within %v; last sample: cycle %d entries %d active %d timewait %d resetting %d closed %+v orphaned %d repairs %d lone %d invariant %d",
		what, timeout, last.Cycle, last.FlowEntries, last.Active, last.TimeWait, last.Resetting, last.Closed,
		last.Orphaned, last.InvariantRepairs, last.Lone, last.Counters.InvariantViolations)
	return nil
}

// record keeps a published sample (Options.OnSample).
func (x *inprocXLB) record(s *maintenance.Sample) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.samples) == maxSamples {
		x.samples = append(x.samples[:0], x.samples[maxSamples/2:]...)
	}
	x.samples = append(x.samples, s)
}

// cycleStart is when s's cycle started (wall clock, monotonic reading).
func cycleStart(s *maintenance.Sample) time.Time { return s.Time.Add(-s.Duration) }

// WaitCycleAfter waits for the first successful cycle that started after
// t0 and returns its sample, or fails the test after timeout. Every sample
// is recorded, so no cycle is skipped however slowly this polls.
func (x *inprocXLB) WaitCycleAfter(t *testing.T, t0 time.Time, timeout time.Duration) *maintenance.Sample {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		x.mu.Lock()
		for _, s := range x.samples {
			if s.PairsFresh() && cycleStart(s).After(t0) {
				x.mu.Unlock()
				return s
			}
		}
		x.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("inproc: no successful maintenance cycle started within %v", timeout)
	return nil
}

// Samples returns the recorded samples of successful cycles first..last
// (inclusive), in order.
func (x *inprocXLB) Samples(first, last uint64) []*maintenance.Sample {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*maintenance.Sample
	for _, s := range x.samples {
		if s.PairsFresh() && s.Cycle >= first && s.Cycle <= last {
			out = append(out, s)
		}
	}
	return out
}

// FlowMapEntries counts the entries actually in the flow map, reading it
// whole through the data path's own walk: not a sample's figure, which is
// derived from counters. Meant for a quiet map (no traffic).
func (x *inprocXLB) FlowMapEntries(t *testing.T) int {
	t.Helper()
	w := x.DP.NewFlowWalk(4096)
	total := 0
	for {
		n, end, err := w.Next()
		if err != nil {
			t.Fatalf("inproc: read the flow map: %v", err)
		}
		total += n
		if end {
			return total
		}
	}
}

// FlowMapDump describes up to limit entries of the flow map, for failure
// messages.
func (x *inprocXLB) FlowMapDump(limit int) string {
	w := x.DP.NewFlowWalk(limit)
	n, _, err := w.Next()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range n {
		v := &w.Values[i]
		fmt.Fprintf(&b, "\n  %s gen %d flags %#x last_seen %d backend %d", w.Keys[i], v.Generation, v.Flags, v.LastSeen, v.BackendId)
	}
	return b.String()
}

// testLogWriter sends the loop's log lines to the test log.
type testLogWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
