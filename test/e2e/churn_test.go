package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/internal/testnet/loadgen"
	"github.com/xlbproject/xlb/test/lab"
)

// Sustained connection churn through XLB (issue 13, "Tests that must
// exist" → Lab): new connections at the lab's full rate (loadgen's
// workers as fast as the path allows), with the client or the backend
// closing first, and clients that reuse their source ports
// (loadgen.ReuseSourcePorts).

// The bounds.
const (
	// maxChurnConnect: no connect of a churn run may take longer (a SYN
	// that went unanswered is retransmitted after 1 s).
	maxChurnConnect = 900 * time.Millisecond
	// minWindowRatio: no 10 s window of the server-first run may complete
	// fewer connections than this times the first window. The issue asks
	// for 0.8; at full rate on this kind of machine (2 shared cores) the
	// lab itself does not hold that: straight to a backend, with no
	// balancer at all, the lowest window of BenchmarkLabChurn's direct
	// path was 0.70 x its first (3,635 against 5,153/s), and XLB alone
	// 0.69 x with every connect under 75 ms. What the bound guards
	// against, a collapse to about 30/s (0.007 x) while backends refuse
	// SYNs on reused ports, is asserted exactly instead: a refused SYN is
	// retransmitted after 1 s, so no connect over maxChurnConnect means
	// every SYN was answered at the first try (the client's
	// TcpExtTCPSynRetrans and the backends' TcpExtPAWSTimewait are logged
	// beside it). The window bound stays as a collapse detector; the rate
	// against iptables and direct, window by window, is measured by make
	// bench (BenchmarkLabChurn).
	minWindowRatio = 0.5
)

// churnVIP is XLB's listen address and port.
var churnVIP = netip.MustParseAddrPort(listenAddr)

// startChurn builds a respondLab whose client reuses its source ports and
// runs the daemon with c.
func startChurn(t *testing.T, c capacity) *lab.Lab {
	t.Helper()
	l := respondLab(t)
	if err := loadgen.ReuseSourcePorts(l.Client()); err != nil {
		t.Fatal(err)
	}
	startXLB(t, l, withCapacity(t, l, "", c))
	return l
}

// runChurn runs loadgen from l's client to churnVIP and logs the result
// and the daemon's SNAT counters.
func runChurn(t *testing.T, l *lab.Lab, cfg loadgen.Config) *loadgen.Result {
	t.Helper()
	cfg.Target = churnVIP
	r, err := loadgen.Run(context.Background(), l.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", r)
	for _, err := range r.Errors[:min(3, len(r.Errors))] {
		t.Logf("  e.g. %v", err)
	}
	return r
}

// logSNATCounters logs the daemon's SNAT counters and returns the
// exhaustions.
func logSNATCounters(t *testing.T, l *lab.Lab) float64 {
	t.Helper()
	fams := scrape(t, l)
	exhausted := metricValue(t, fams, "xlb_snat_port_exhausted_total", nil)
	t.Logf("daemon: xlb_snat_port_exhausted_total %v, xlb_snat_port_takeovers_total %v, xlb_snat_backend_fallbacks_total %v, xlb_snat_hold_drops_total %v",
		exhausted, metricValue(t, fams, "xlb_snat_port_takeovers_total", nil),
		metricValue(t, fams, "xlb_snat_backend_fallbacks_total", nil), metricValue(t, fams, "xlb_snat_hold_drops_total", nil))
	return exhausted
}

// 60 s of client-first churn with 1,000 SNAT ports per backend and 3
// backends: a port is free again as soon as the client's FIN ends its
// pair, so nothing is refused (no client error, no SNAT exhaustion).
func TestCapacityChurnClientFirst(t *testing.T) {
	c := capacity{addrs: 1, portLo: 40000, portHi: 40999, maxConnections: 262144}
	l := startChurn(t, c)
	r := runChurn(t, l, loadgen.Config{Duration: 60 * time.Second, Close: loadgen.ClientFirst})
	if r.Completed == 0 || r.Failed() != 0 {
		t.Fatalf("%d completed, failures: %s; want none refused or failed", r.Completed, r.FailureSummary())
	}
	// The last connections' counts reach the metrics with the next
	// maintenance sample: wait until all opened pairs are counted.
	opened, ok := waitCounter(t, l, "xlb_connections_opened_total", nil, 30*time.Second, func(v float64) bool { return v >= float64(r.Completed) })
	if !ok {
		t.Fatalf("xlb_connections_opened_total %v, want at least the %d completed connections", opened, r.Completed)
	}
	if n := logSNATCounters(t, l); n != 0 {
		t.Fatalf("xlb_snat_port_exhausted_total %v, want 0", n)
	}
}

// 120 s of server-first churn at full rate, clients reusing their source
// ports: the backends hold TIME_WAIT, so XLB must never hand a port back
// to the same backend within 60 s (that stalled connections for a 1 s SYN
// retransmit and collapsed the rate after about 25 s). No connect takes
// more than 900 ms (every SYN answered at the first try) and no 10 s
// window falls below minWindowRatio x the first. The SNAT space (8
// addresses x 20,000 ports x 3 backends / 60 s = 8,000/s) exceeds the
// lab's full rate, so nothing is refused either.
func TestCapacityChurnServerFirst(t *testing.T) {
	c := capacity{addrs: 8, portLo: 40000, portHi: 59999, maxConnections: 524288}
	l := startChurn(t, c)
	before := stallCounters(t, l)
	r := runChurn(t, l, loadgen.Config{Duration: 120 * time.Second, Close: loadgen.ServerFirst})
	t.Logf("SNAT space: %d ports per backend, %.0f new connections/s sustained", c.portsPerBackend(), c.rateCap(len(l.Backends)))
	logSNATCounters(t, l)
	after := stallCounters(t, l)
	t.Logf("client: TcpExtTCPSynRetrans +%d; backends: TcpExtPAWSTimewait +%d",
		after.synRetrans-before.synRetrans, after.pawsTimewait-before.pawsTimewait)
	if r.Completed == 0 || r.Failed() != 0 {
		t.Fatalf("%d completed, failures: %s; want none", r.Completed, r.FailureSummary())
	}
	if n := r.Connects.Over(maxChurnConnect); n > 0 {
		t.Fatalf("%d connects took longer than %v (longest %v)", n, maxChurnConnect, r.Connects.Max())
	}
	if len(r.Windows) != 12 {
		t.Fatalf("%d whole 10 s windows, want 12", len(r.Windows))
	}
	if i, ratio := r.LowestWindow(); ratio < minWindowRatio {
		t.Fatalf("window %d completed %d connections, %.2f x the first window's %d; want at least %.1f x", i, r.Windows[i], ratio, r.Windows[0], minWindowRatio)
	}
}

// stalls holds the kernel counters that tell why a connect stalled: SYNs
// the client retransmitted, and segments (SYNs on a reused 4-tuple among
// them) the backends' TIME_WAIT sockets rejected for an old timestamp
// (RFC 7323 PAWS), summed over the backends.
type stalls struct{ synRetrans, pawsTimewait uint64 }

// stallCounters reads them in l's client and backends.
func stallCounters(t *testing.T, l *lab.Lab) stalls {
	t.Helper()
	read := func(h *testnet.Host, name string) uint64 {
		var v uint64
		if err := h.Do(func() (err error) { v, err = testnet.NetstatCounter("TcpExt", name); return err }); err != nil {
			t.Fatal(err)
		}
		return v
	}
	s := stalls{synRetrans: read(l.Client(), "TCPSynRetrans")}
	for _, b := range l.Backends {
		s.pawsTimewait += read(b.Host, "PAWSTimewait")
	}
	return s
}

// With a small SNAT range and backends that close first, the ports run
// out within a second: the excess is refused at once with a RST
// (ECONNREFUSED, never a stalled SYN) and counted in
// xlb_snat_port_exhausted_total.
func TestCapacityChurnSmallRange(t *testing.T) {
	c := capacity{addrs: 1, portLo: 40000, portHi: 40099, maxConnections: 65536}
	l := startChurn(t, c)
	r := runChurn(t, l, loadgen.Config{Duration: 5 * time.Second, Workers: 4, Close: loadgen.ServerFirst})
	if r.Failures[loadgen.Refused] == 0 {
		t.Fatalf("nothing refused with %d ports toward each of %d backends", c.portsPerBackend(), len(l.Backends))
	}
	if other := r.Failed() - r.Failures[loadgen.Refused]; other != 0 {
		t.Fatalf("failures other than refusals: %s", r.FailureSummary())
	}
	if n := r.RefusedIn.Over(maxChurnConnect); n > 0 {
		t.Fatalf("%d refusals took longer than %v (longest %v): not refused at once", n, maxChurnConnect, r.RefusedIn.Max())
	}
	if n := r.Connects.Over(maxChurnConnect); n > 0 {
		t.Fatalf("%d connects took longer than %v (longest %v)", n, maxChurnConnect, r.Connects.Max())
	}
	refused := float64(r.Failures[loadgen.Refused])
	got, ok := waitCounter(t, l, "xlb_snat_port_exhausted_total", nil, 30*time.Second, func(v float64) bool { return v >= refused })
	logSNATCounters(t, l)
	if !ok {
		t.Fatalf("xlb_snat_port_exhausted_total %v, want at least the %v refused connects", got, refused)
	}
}
