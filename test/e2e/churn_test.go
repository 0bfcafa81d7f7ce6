package e2e

import (
	"context"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/internal/testnet/loadgen"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/test/lab"
)

// Sustained connection churn through XLB (issue 13, "Tests that must
// exist" → Lab; paced since issue 27): new connections with the client or
// the backend closing first, and clients that reuse their source ports
// (loadgen.ReuseSourcePorts). The lab's full rate differs twofold between
// machines of this kind, so no test offers it: each computes the capacity
// its configuration gives (capacity.rate) and offers a share of it, and
// what must be refused is offered above it.

// The bounds.
const (
	// maxChurnConnect: no connect of a churn run may take longer (a SYN
	// that went unanswered is retransmitted after 1 s).
	maxChurnConnect = 900 * time.Millisecond
	// minWindowRatio: no 10 s window of the server-first run may complete
	// fewer connections than this times the first window. At a paced rate
	// that the machine sustains the windows are equal; on a machine too
	// slow for the offered rate the run goes at the lab's full rate,
	// whose windows vary (straight to a backend, with no balancer at all,
	// the lowest window of BenchmarkLabChurn's direct path was 0.70 x its
	// first on a 2-core machine). What the bound guards against, a
	// collapse to about 30/s (0.007 x) while backends refuse SYNs on
	// reused ports, is asserted exactly instead: a refused SYN is
	// retransmitted after 1 s, so no connect over maxChurnConnect means
	// every SYN was answered at the first try (the client's
	// TcpExtTCPSynRetrans and the backends' TcpExtPAWSTimewait are logged
	// beside it).
	minWindowRatio = 0.5
)

// churnVIP is XLB's listen address and port.
var churnVIP = netip.MustParseAddrPort(listenAddr)

// churnBackends is the number of backends of a respondLab (lab.Options'
// default), which a test sizing its SNAT space before the lab exists
// needs.
const churnBackends = 3

// startChurn builds a respondLab whose client reuses its source ports and
// runs the daemon with c.
func startChurn(t *testing.T, c capacity) *lab.Lab {
	t.Helper()
	l := respondLab(t)
	if len(l.Backends) != churnBackends {
		t.Fatalf("the lab has %d backends, want churnBackends = %d", len(l.Backends), churnBackends)
	}
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

// pacedChurn runs order's churn through l for d, offered at share of the
// capacity c gives with l's backends, and logs the capacity, the offered
// and the achieved rate.
func pacedChurn(t *testing.T, l *lab.Lab, c capacity, order loadgen.CloseOrder, share float64, d time.Duration) *loadgen.Result {
	t.Helper()
	capRate := c.rate(order, len(l.Backends))
	offered := share * capRate
	t.Logf("SNAT space: %d ports per backend x %d backends, each port busy %v after a %v close: capacity %.0f new connections/s; offered %.2f x = %.0f/s for %v",
		c.portsPerBackend(), len(l.Backends), portBusy(order), order, capRate, share, offered, d)
	r := runChurn(t, l, loadgen.Config{Duration: d, Close: order, Rate: offered})
	t.Logf("achieved %.0f/s (%.2f x the offered rate, %.2f x the capacity)", r.Rate(), r.Rate()/offered, r.Rate()/capRate)
	return r
}

// logSNATCounters logs the daemon's SNAT counters and returns the
// exhaustions.
func logSNATCounters(t *testing.T, l *lab.Lab) float64 {
	t.Helper()
	fams := scrape(t, l)
	exhausted := metricValue(t, fams, "xlb_snat_port_exhausted_total", nil)
	t.Logf("daemon: xlb_snat_port_exhausted_total %v, xlb_snat_port_takeovers_total %v, xlb_snat_timewait_reuses_total %v, xlb_snat_backend_fallbacks_total %v, xlb_snat_hold_drops_total %v",
		exhausted, metricValue(t, fams, "xlb_snat_port_takeovers_total", nil), metricValue(t, fams, "xlb_snat_timewait_reuses_total", nil),
		metricValue(t, fams, "xlb_snat_backend_fallbacks_total", nil), metricValue(t, fams, "xlb_snat_hold_drops_total", nil))
	return exhausted
}

// 60 s of client-first churn with 1,000 SNAT ports per backend and 3
// backends, offered at 70 % of their capacity: a port is free again as
// soon as the client's FIN ends its pair and the takeover guard passed, so
// nothing is refused (no client error, no SNAT exhaustion).
func TestCapacityChurnClientFirst(t *testing.T) {
	c := capacity{addrs: 1, portLo: 40000, portHi: 40999, maxConnections: 262144}
	churnWithoutRefusals(t, c, loadgen.ClientFirst, offeredShare(t), 60*time.Second)
}

// The same at twice the rate the unpaced test ran on the fastest machine
// seen (7,222/s, 2026-12-07), in a SNAT space sized for it: a machine
// that fast, or faster, still meets its capacity only at the share the
// test offers. A slower machine achieves less and refuses nothing either.
func TestCapacityChurnClientFirstFast(t *testing.T) {
	const fastest = 7222 // connections/s, the old test's rate on a fast host
	offered := 2.0 * fastest
	ports := portsFor(offered/noRefusalShare, loadgen.ClientFirst, churnBackends)
	c := capacity{addrs: 1, portLo: 40000, portHi: 40000 + ports - 1, maxConnections: 262144}
	churnWithoutRefusals(t, c, loadgen.ClientFirst, noRefusalShare, 20*time.Second)
}

// portsFor is the number of SNAT ports per backend whose capacity (one
// address, backends backends) is at least rate.
func portsFor(rate float64, order loadgen.CloseOrder, backends int) int {
	return int(math.Ceil(rate * portBusy(order).Seconds() / float64(backends)))
}

// churnWithoutRefusals runs a paced churn below c's capacity and asserts
// that nothing failed, every connection was counted and no SNAT port ran
// out.
func churnWithoutRefusals(t *testing.T, c capacity, order loadgen.CloseOrder, share float64, d time.Duration) *loadgen.Result {
	t.Helper()
	l := startChurn(t, c)
	r := pacedChurn(t, l, c, order, share, d)
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
	return r
}

// 120 s of server-first churn offered at 70 % of the capacity of one SNAT
// address with 20,000 ports toward each of 3 backends, from a client
// without TCP timestamps that reuses its source ports: the backends hold
// TIME_WAIT, and without timestamps XLB may not reuse a port its backend
// still holds (issue 36: such a SYN keeps the hold), so it must never hand
// a port back to the same backend while the backend may still hold it
// (maintenance.SNATHold; handing it back within 60 s stalled connections
// for a 1 s SYN retransmit and collapsed the rate after about 25 s). Each
// backend's cursor wraps around its 20,000 ports within the run, so ports
// are handed out again. No connect takes more than 900 ms (every SYN
// answered at the first try: the client retransmitted none), no 10 s
// window falls below minWindowRatio x the first, and nothing is refused.
// Clients with timestamps, whose held ports are reused long before the
// hold ends, are TestTimewaitReuseEightClients and
// TestCapacityChurnServerFirstTimestampReuse.
func TestCapacityChurnServerFirst(t *testing.T) {
	c := capacity{addrs: 1, portLo: 40000, portHi: 59999, maxConnections: 262144}
	share := offeredShare(t)
	l := startChurn(t, c)
	withoutTimestamps(t, l.Client())
	before := stallCounters(t, l)
	r := pacedChurn(t, l, c, loadgen.ServerFirst, share, 120*time.Second)
	logSNATCounters(t, l)
	after := stallCounters(t, l)
	paws := after.pawsTimewait - before.pawsTimewait
	t.Logf("client: TcpExtTCPSynRetrans +%d; backends: TcpExtPAWSTimewait +%d", after.synRetrans-before.synRetrans, paws)
	if r.Completed == 0 || r.Failed() != 0 {
		t.Fatalf("%d completed, failures: %s; want none", r.Completed, r.FailureSummary())
	}
	if n := r.Connects.Over(maxChurnConnect); n > 0 {
		t.Fatalf("%d connects took longer than %v (longest %v)", n, maxChurnConnect, r.Connects.Max())
	}
	// A SYN on a port its backend still holds in TIME_WAIT, with an older
	// timestamp, is refused (PAWS) and retransmitted by the client after
	// 1 s: the connect bound above catches it, and the client's SYN
	// retransmits count it. TcpExtPAWSTimewait also counts any other late
	// segment a TIME_WAIT socket rejects (a duplicate ACK or FIN
	// reordered behind the close on the veths), so it is logged, not
	// asserted.
	if n := after.synRetrans - before.synRetrans; n != 0 {
		t.Fatalf("the client retransmitted %d SYNs (TcpExtTCPSynRetrans; backends' TcpExtPAWSTimewait +%d): a SYN went unanswered or was refused", n, paws)
	}
	if len(r.Windows) != 12 {
		t.Fatalf("%d whole 10 s windows, want 12", len(r.Windows))
	}
	if i, ratio := r.LowestWindow(); ratio < minWindowRatio {
		t.Fatalf("window %d completed %d connections, %.2f x the first window's %d; want at least %.1f x", i, r.Windows[i], ratio, r.Windows[0], minWindowRatio)
	}
}

// withoutTimestamps turns TCP timestamps off in h's namespace (RFC 7323:
// its SYNs carry none).
func withoutTimestamps(t *testing.T, h *testnet.Host) {
	t.Helper()
	if err := h.Do(func() error { return testnet.Sysctl("net.ipv4.tcp_timestamps", "0") }); err != nil {
		t.Fatal(err)
	}
}

// 30 s of server-first churn from one client address through one SNAT
// address with 200 ports toward each of 3 backends (issue 36): with
// timestamps on both sides (Linux's default) a port held for a backend's
// TIME_WAIT is reused one reuse guard after its connection's last packet,
// once the next maintenance cycle has marked it, so the SNAT space
// sustains ports x backends / (guard + a cycle) new connections per
// second, not ports x backends / 70 s (8.6/s here). Offered at 70 % of
// that, 24 times the hold's rate: nothing is refused, every SYN is
// answered at the first try (the client retransmits none, no connect
// over 900 ms: the backends' TIME_WAIT took every reused tuple), the
// backends' PAWS rejections in TIME_WAIT are logged, and the daemon
// counts the reuses.
func TestCapacityChurnServerFirstTimestampReuse(t *testing.T) {
	c := capacity{addrs: 1, portLo: 40000, portHi: 40199, maxConnections: 65536}
	share := offeredShare(t)
	l := startChurn(t, c)
	busy := dataplane.SNATReuseGuard + maintenance.DefaultInterval
	capRate := float64(c.portsPerBackend()*len(l.Backends)) / busy.Seconds()
	offered := share * capRate
	t.Logf("SNAT space: %d ports per backend x %d backends, each reusable %v after a server-first close with timestamps: capacity %.0f new connections/s (%.0f/s without timestamps); offered %.2f x = %.0f/s",
		c.portsPerBackend(), len(l.Backends), busy, capRate, c.rate(loadgen.ServerFirst, len(l.Backends)), share, offered)
	before := stallCounters(t, l)
	r := runChurn(t, l, loadgen.Config{Duration: 30 * time.Second, Close: loadgen.ServerFirst, Rate: offered})
	after := stallCounters(t, l)
	logSNATCounters(t, l)
	t.Logf("achieved %.0f/s; client: TcpExtTCPSynRetrans +%d; backends: TcpExtPAWSTimewait +%d", r.Rate(), after.synRetrans-before.synRetrans, after.pawsTimewait-before.pawsTimewait)
	if r.Completed == 0 || r.Failed() != 0 {
		t.Fatalf("%d completed, failures: %s; want none refused or failed", r.Completed, r.FailureSummary())
	}
	if n := r.Connects.Over(maxChurnConnect); n > 0 {
		t.Fatalf("%d connects took longer than %v (longest %v)", n, maxChurnConnect, r.Connects.Max())
	}
	if n := after.synRetrans - before.synRetrans; n != 0 {
		t.Fatalf("the client retransmitted %d SYNs: a SYN on a reused port went unanswered or was refused", n)
	}
	held := float64(c.portsPerBackend() * len(l.Backends))
	if float64(r.Completed) <= held {
		t.Fatalf("%d connections completed, not more than the %v ports: no port was reused", r.Completed, held)
	}
	reuses, ok := waitCounter(t, l, "xlb_snat_timewait_reuses_total", nil, 30*time.Second, func(v float64) bool { return v >= float64(r.Completed)-held })
	if !ok {
		t.Fatalf("xlb_snat_timewait_reuses_total %v, want at least the %v connections beyond the ports", reuses, float64(r.Completed)-held)
	}
	if n := logSNATCounters(t, l); n != 0 {
		t.Fatalf("xlb_snat_port_exhausted_total %v, want 0", n)
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

// Offered twice its capacity, a SNAT space refuses the excess at once: a
// RST (ECONNREFUSED, never a stalled SYN), counted in
// xlb_snat_port_exhausted_total, while the connections it can take go
// through at their first SYN. Two shapes of the same rule:
//
//   - client-first, 100 ports toward each of 3 backends: every port is
//     free again one takeover guard after its close, so the capacity is a
//     rate (300 per guard), and twice that rate is offered for 10 s;
//   - server-first, the same ports, from a client without TCP timestamps
//     (net.ipv4.tcp_timestamps=0: XLB reuses a held port only for a SYN
//     with timestamps, issue 36): each is held for the backend's
//     TIME_WAIT, far longer than the run, so the capacity of a 5 s run is
//     the 300 ports themselves, and twice that many connections are
//     offered over the run.
func TestCapacityChurnOverload(t *testing.T) {
	c := capacity{addrs: 1, portLo: 40000, portHi: 40099, maxConnections: 65536}
	t.Run("client-first", func(t *testing.T) {
		l := startChurn(t, c)
		d := 10 * time.Second
		r := pacedChurn(t, l, c, loadgen.ClientFirst, 2, d)
		assertRefusedAtOnce(t, l, c, r)
		// A port serves one connection per guard at most, after its first.
		ports := c.portsPerBackend() * len(l.Backends)
		limit := ports * (1 + int(math.Ceil(d.Seconds()/dataplane.SNATReuseGuard.Seconds())))
		if r.Completed <= ports || r.Completed > limit {
			t.Fatalf("%d connections completed over %d ports in %v, want more than the ports (a freed port is taken again) and at most %d (once per port and guard)", r.Completed, ports, d, limit)
		}
	})
	t.Run("server-first", func(t *testing.T) {
		l := startChurn(t, c)
		withoutTimestamps(t, l.Client())
		d := 5 * time.Second
		ports := c.portsPerBackend() * len(l.Backends)
		if maintenance.SNATHold <= d {
			t.Fatalf("the hold %v is not longer than the run %v", maintenance.SNATHold, d)
		}
		offered := 2 * float64(ports) / d.Seconds()
		t.Logf("SNAT space: %d ports toward %d backends, each held %v after a server-first close: %d connections in %v; offered %.0f/s (%d)", c.portsPerBackend(), len(l.Backends), maintenance.SNATHold, ports, d, offered, 2*ports)
		r := runChurn(t, l, loadgen.Config{Duration: d, Close: loadgen.ServerFirst, Rate: offered})
		assertRefusedAtOnce(t, l, c, r)
		if r.Completed > ports {
			t.Fatalf("%d connections completed over %d ports held for %v, want at most %d", r.Completed, ports, maintenance.SNATHold, ports)
		}
	})
}

// assertRefusedAtOnce: r had refusals and no other failure, every refusal
// and every connect came at the first SYN, and the daemon counted every
// refusal as an exhausted SNAT space.
func assertRefusedAtOnce(t *testing.T, l *lab.Lab, c capacity, r *loadgen.Result) {
	t.Helper()
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
