package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/internal/testnet/loadgen"
	"github.com/xlbproject/xlb/test/lab"
)

// Server-first churn from many client addresses through one SNAT address
// (issue 36, "Tests that must exist" → Lab): the shape in which XLB may
// reuse a SNAT port the backend still holds in TIME_WAIT only if the
// backend accepts the new SYN (RFC 6191: its timestamp is newer than the
// old connection's). Clients on several addresses have unrelated
// timestamps (Linux gives each address pair an offset of its own), so a
// reused port is accepted only when XLB rewrites the timestamps toward
// the backend; a SYN the backend's TIME_WAIT rejects (PAWS) waits 1 s
// for its retransmit.

// The shape and bounds of issue 36's lab tests.
const (
	// timewaitClients is the number of client addresses the churn comes
	// from (lab.Lab's AddClientAddresses, loadgen.Config.Sources).
	timewaitClients = 8
	// timewaitWindowRatio: every 10 s window of a paced run completes at
	// least this times the first window's connections.
	timewaitWindowRatio = 0.8
	// timewaitMeasure is how long the unpaced run lasts that measures the
	// lab's full rate.
	timewaitMeasure = 10 * time.Second
)

// timewaitCapacity is one SNAT address with 20,000 ports (the packaged
// port_range) toward each backend.
var timewaitCapacity = capacity{addrs: 1, portLo: 40000, portHi: 59999, maxConnections: 262144}

// timewaitRun is what one churn of timewaitChurn measured.
type timewaitRun struct {
	*loadgen.Result
	// pawsTimewait is the rise of TcpExtPAWSTimewait over the run in each
	// backend (segments, SYNs among them, that a TIME_WAIT socket rejected
	// for an old timestamp), synRetrans the client's TcpExtTCPSynRetrans.
	pawsTimewait []uint64
	synRetrans   uint64
}

// paws is the rise of TcpExtPAWSTimewait over all backends.
func (r timewaitRun) paws() uint64 {
	var n uint64
	for _, p := range r.pawsTimewait {
		n += p
	}
	return n
}

// timewaitLab is a lab of issue 36's tests: a respondLab with
// churnBackends backends behind a balancer at churnVIP, and a client with
// timewaitClients addresses (srcs) that reuses its source ports.
type timewaitLab struct {
	*lab.Lab
	srcs []netip.Addr
	xlb  bool // the balancer is XLB (else the kernel's NAT)
}

// startTimewaitLab builds a timewaitLab whose balancer is XLB with c's
// SNAT space.
func startTimewaitLab(t *testing.T, c capacity) timewaitLab {
	t.Helper()
	return warmTimewaitLab(t, timewaitLab{Lab: startChurn(t, c), xlb: true})
}

// startTimewaitNATLab builds a timewaitLab whose balancer is the kernel's
// NAT in XLB's namespace, the way kube-proxy sets it up
// (testnet.Host.NATBalancer, as BenchmarkLabChurn's iptables path): the
// reference XLB's full rate is compared with.
func startTimewaitNATLab(t *testing.T) timewaitLab {
	t.Helper()
	l := respondLab(t)
	if len(l.Backends) != churnBackends {
		t.Fatalf("the lab has %d backends, want churnBackends = %d", len(l.Backends), churnBackends)
	}
	if err := loadgen.ReuseSourcePorts(l.Client()); err != nil {
		t.Fatal(err)
	}
	var backends []netip.AddrPort
	for _, b := range l.Backends {
		backends = append(backends, netip.AddrPortFrom(b.IP(), 8080))
	}
	if err := l.XLB.NATBalancer(churnVIP, backends); err != nil {
		t.Fatal(err)
	}
	return warmTimewaitLab(t, timewaitLab{Lab: l})
}

// warmTimewaitLab gives l's client its timewaitClients addresses and
// opens a connection or two from each through the balancer (the
// addresses take turns): the neighbour entries of the new addresses are
// made before anything is measured, so no measured SYN waits for one.
func warmTimewaitLab(t *testing.T, l timewaitLab) timewaitLab {
	t.Helper()
	var err error
	if l.srcs, err = l.AddClientAddresses(timewaitClients); err != nil {
		t.Fatal(err)
	}
	if err := testnet.WaitTCP(l.Client(), churnVIP.String(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	warm, err := loadgen.Run(context.Background(), l.Client(), loadgen.Config{
		Target: churnVIP, Sources: l.srcs, Workers: 1, Rate: float64(2 * len(l.srcs)), Duration: time.Second, Close: loadgen.ServerFirst,
	})
	if err != nil {
		t.Fatal(err)
	}
	if warm.Completed < len(l.srcs) || warm.Failed() != 0 {
		t.Fatalf("warming up from %v: %v", l.srcs, warm)
	}
	return l
}

// timewaitChurn runs server-first churn from l's client addresses to
// churnVIP for d, offered at rate (0: unpaced, the lab's full rate), and
// reads the backends' and the client's stall counters before and after.
// It logs the refused connects, the longest connect, the rate of each
// 10 s window, the counters and, through XLB, the daemon's SNAT counters.
func timewaitChurn(t *testing.T, l timewaitLab, rate float64, d time.Duration) timewaitRun {
	t.Helper()
	srcs := l.srcs
	before := backendPAWS(t, l.Lab)
	retransBefore := stallCounters(t, l.Lab).synRetrans
	r := runChurn(t, l.Lab, loadgen.Config{Duration: d, Close: loadgen.ServerFirst, Rate: rate, Sources: srcs, Window: 10 * time.Second})
	after := backendPAWS(t, l.Lab)
	out := timewaitRun{Result: r, synRetrans: stallCounters(t, l.Lab).synRetrans - retransBefore}
	for i := range after {
		out.pawsTimewait = append(out.pawsTimewait, after[i]-before[i])
	}
	rates := r.WindowRates()
	ws := make([]string, len(rates))
	for i, x := range rates {
		ws[i] = fmt.Sprintf("%.0f", x)
	}
	t.Logf("from %d client addresses, %s: %d completed (%.0f/s); refused connects %d, longest connect %v; per 10 s window /s: [%s]; backends' TcpExtPAWSTimewait +%v, client's TcpExtTCPSynRetrans +%d",
		len(srcs), r.Offered(), r.Completed, r.Rate(), r.Failures[loadgen.Refused], r.Connects.Max(), strings.Join(ws, " "), out.pawsTimewait, out.synRetrans)
	if l.xlb {
		logSNATCounters(t, l.Lab)
	}
	return out
}

// backendPAWS is TcpExtPAWSTimewait in each of l's backends.
func backendPAWS(t *testing.T, l *lab.Lab) []uint64 {
	t.Helper()
	var out []uint64
	for _, b := range l.Backends {
		var v uint64
		if err := b.Do(func() (err error) { v, err = testnet.NetstatCounter("TcpExt", "PAWSTimewait"); return err }); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// assertTimewaitRun asserts issue 36's expectations of a paced run of d:
// nothing refused or failed, no SYN refused by a backend's TIME_WAIT
// (TcpExtPAWSTimewait with a SYN retransmission), no connect over
// maxChurnConnect (none waited for a SYN retransmit), and
// every whole 10 s window at or above timewaitWindowRatio x the first.
func assertTimewaitRun(t *testing.T, r timewaitRun, d time.Duration) {
	t.Helper()
	if r.Completed == 0 || r.Failed() != 0 {
		t.Errorf("%d completed, failures: %s; want none refused or failed", r.Completed, r.FailureSummary())
	}
	// A SYN that a backend's TIME_WAIT refuses for its timestamp
	// (PAWS) is answered with an ACK, which the client resets, and is
	// then retransmitted a second later: it shows as TcpExtPAWSTimewait
	// and TcpExtTCPSynRetrans together, and as a connect over
	// maxChurnConnect. PAWSTimewait alone counts a segment other than a
	// SYN (of an old connection on that 4-tuple) that reached a
	// TIME_WAIT with an older timestamp: no connection is refused or
	// delayed. One such segment in 420,000 reuses was seen once
	// (Dec 2026), its cause not established; it is logged, not failed.
	if n := r.paws(); n != 0 && r.synRetrans != 0 {
		t.Errorf("the backends' TcpExtPAWSTimewait rose by %v and the client retransmitted %d SYNs: a TIME_WAIT socket rejected a SYN's timestamp", r.pawsTimewait, r.synRetrans)
	} else if n != 0 {
		t.Logf("the backends' TcpExtPAWSTimewait rose by %v with no SYN retransmitted: a segment other than a SYN met a TIME_WAIT with an older timestamp; no SYN refused", r.pawsTimewait)
	}
	if n := r.Connects.Over(maxChurnConnect); n > 0 {
		t.Errorf("%d connects took longer than %v (longest %v)", n, maxChurnConnect, r.Connects.Max())
	}
	if want := int(d / (10 * time.Second)); len(r.Windows) != want {
		t.Fatalf("%d whole 10 s windows, want %d", len(r.Windows), want)
	}
	for i, n := range r.Windows {
		if float64(n) < timewaitWindowRatio*float64(r.Windows[0]) {
			t.Errorf("window %d completed %d connections, %.2f x the first window's %d; want at least %.1f x", i, n, float64(n)/float64(r.Windows[0]), r.Windows[0], timewaitWindowRatio)
		}
	}
}

// Issue 36's lab test: 120 s of server-first churn from 8 client
// addresses through one SNAT address with 20,000 ports toward each of 3
// backends, offered at 70 % of the lab's full rate measured in the same
// run (an unpaced run of timewaitMeasure in a lab of its own, so that
// none of its ports or TIME_WAITs carry over). The backends' TIME_WAIT
// outlasts a port's turn (about 60,000 ports at the full rate of several
// thousand connections/s), so XLB reuses ports the backends still hold;
// with the timestamps rewritten the backends accept every such SYN:
// nothing refused, TcpExtPAWSTimewait +0, no connect over 900 ms, every
// 10 s window at least 0.8 x the first.
func TestTimewaitReuseEightClients(t *testing.T) {
	share := offeredShare(t)
	var full float64
	t.Run("full-rate", func(t *testing.T) {
		r := timewaitChurn(t, startTimewaitLab(t, timewaitCapacity), 0, timewaitMeasure)
		full = r.Rate()
		if r.Completed == 0 {
			t.Fatalf("nothing completed: %s", r.FailureSummary())
		}
	})
	if full == 0 {
		t.FailNow()
	}
	d := 120 * time.Second
	offered := share * full
	t.Logf("the lab's full rate %.0f/s from %d client addresses; offered %.2f x = %.0f/s for %v (the held ports alone allow %.0f/s)",
		full, timewaitClients, share, offered, d, timewaitCapacity.rate(loadgen.ServerFirst, churnBackends))
	r := timewaitChurn(t, startTimewaitLab(t, timewaitCapacity), offered, d)
	assertTimewaitRun(t, r, d)
}

// Issue 36's lab test at full rate: 120 s of unpaced server-first churn
// from 8 client addresses, through the kernel's NAT (kube-proxy's
// iptables rules, whose backends meet the clients' unrelated timestamps
// on reused 4-tuples: PAWS stalls) and through XLB with one SNAT address
// and 20,000 ports toward each of 3 backends, one after the other in labs
// of their own. XLB refuses nothing and completes at least iptables'
// rate. Connect times and windows are logged, not asserted: at the full
// rate they follow the shared machine's load.
func TestTimewaitReuseEightClientsFullRate(t *testing.T) {
	d := 120 * time.Second
	var nat, xlb timewaitRun
	t.Run("iptables", func(t *testing.T) { nat = timewaitChurn(t, startTimewaitNATLab(t), 0, d) })
	t.Run("xlb", func(t *testing.T) { xlb = timewaitChurn(t, startTimewaitLab(t, timewaitCapacity), 0, d) })
	if nat.Result == nil || xlb.Result == nil {
		t.FailNow()
	}
	t.Logf("full rate from %d client addresses: XLB %.0f/s (%s), iptables %.0f/s (%s): %.2f x",
		timewaitClients, xlb.Rate(), xlb.FailureSummary(), nat.Rate(), nat.FailureSummary(), xlb.Rate()/nat.Rate())
	if xlb.Completed == 0 || xlb.Failed() != 0 {
		t.Errorf("through XLB %d completed, failures: %s; want none refused or failed", xlb.Completed, xlb.FailureSummary())
	}
	if xlb.Rate() < nat.Rate() {
		t.Errorf("XLB completed %.0f/s, iptables %.0f/s in the same run; want XLB at least iptables' rate", xlb.Rate(), nat.Rate())
	}
}
