package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/internal/testnet/loadgen"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/test/lab"
)

// Helpers of the issue 13 lab tests (churn, SYN flood, RST storm, next
// hops, host settings) and of the churn benchmark: the daemon's SNAT
// space and flow table, and its counters.

// respondLab is a one-arm lab whose backends serve testnet.Respond on
// :8080 (listen :80 of labConfig), the server of the churn runs.
func respondLab(t testing.TB) *lab.Lab {
	t.Helper()
	l := lab.New(t, lab.Options{Topology: lab.OneArm, EchoPort: -1, SinkPort: -1})
	for _, b := range l.Backends {
		if _, err := b.Serve(":8080", testnet.Respond); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// capacity shapes the daemon's SNAT space and flow table.
type capacity struct {
	// addrs is the number of SNAT addresses: XLB's 192.0.2.10 and
	// addrs-1 of testnet.XLBExtraIP, which withCapacity adds to XLB's
	// eth0 (snat.ip as a list, issue 13).
	addrs int
	// portLo, portHi are snat.port_range.
	portLo, portHi int
	// maxConnections is flow_table.max_connections.
	maxConnections int
	// embryonicTTL is flow_table.embryonic_ttl_secs; 0 leaves the default.
	embryonicTTL int
}

// portsPerBackend is how many SNAT ports the daemon has toward each
// backend.
func (c capacity) portsPerBackend() int { return c.addrs * (c.portHi - c.portLo + 1) }

// portBusy is how long a SNAT port stays with its backend after a
// connection closed in order, before a new pair may take it: with the
// backend closing first, the hold that covers the backend's TIME_WAIT
// (maintenance.SNATHold); with the client closing first the backend keeps
// no TIME_WAIT, and the port is free again after the takeover guard
// (dataplane.SNATReuseGuard).
func portBusy(order loadgen.CloseOrder) time.Duration {
	if order == loadgen.ServerFirst {
		return maintenance.SNATHold
	}
	return dataplane.SNATReuseGuard
}

// rate is the sustained rate of new connections closed in order that the
// SNAT space allows with backends (round robin spreads them evenly): every
// port of every backend once per portBusy. The connections' own lifetime
// (milliseconds in the lab) is left out; the share a test offers covers it.
func (c capacity) rate(order loadgen.CloseOrder, backends int) float64 {
	return float64(c.portsPerBackend()*backends) / portBusy(order).Seconds()
}

// noRefusalShare is the share of a configuration's capacity that the
// capacity tests offer when they expect nothing refused (issue 27): room
// for the connections' lifetime, the round robin's unevenness under
// refusals of other kinds, and the schedule's slack (loadgen.Config.Rate).
const noRefusalShare = 0.7

// offeredShare is noRefusalShare, or XLB_TEST_CAPACITY_SHARE when set (a
// measurement closer to the capacity, e.g. 0.9, by hand; never in CI), a
// share in (0, 1]. Tests read it before they build a lab.
func offeredShare(t testing.TB) float64 {
	t.Helper()
	v := os.Getenv("XLB_TEST_CAPACITY_SHARE")
	if v == "" {
		return noRefusalShare
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0 && f <= 1) { // NaN too

		t.Fatalf("XLB_TEST_CAPACITY_SHARE=%q: want a share in (0, 1]", v)
	}
	return f
}

// The one-arm blocks of labConfig that withCapacity replaces.
const (
	labSNATBlock      = "snat:\n  ip: 192.0.2.10\n  port_range: \"40000-59999\"\n"
	labFlowTableBlock = "flow_table:\n  max_connections: 65536\n"
)

// withCapacity adds the extra SNAT addresses to XLB's eth0 and returns
// labConfig(l, extra) with its snat and flow_table blocks set from c.
func withCapacity(t testing.TB, l *lab.Lab, extra string, c capacity) string {
	t.Helper()
	cfg := labConfig(l, extra)
	if !strings.Contains(cfg, labSNATBlock) || !strings.Contains(cfg, labFlowTableBlock) {
		t.Fatalf("labConfig changed its snat or flow_table block; withCapacity needs updating:\n%s", cfg)
	}
	addrs := []string{lab.XLBFrontIP.String()}
	for i := range c.addrs - 1 {
		ip := testnet.XLBExtraIP(i)
		if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(ip, testnet.FrontNet.Bits())); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ip.String())
	}
	snat := fmt.Sprintf("snat:\n  ip: [%s]\n  port_range: \"%d-%d\"\n", strings.Join(addrs, ", "), c.portLo, c.portHi)
	flow := fmt.Sprintf("flow_table:\n  max_connections: %d\n", c.maxConnections)
	if c.embryonicTTL > 0 {
		flow += fmt.Sprintf("  embryonic_ttl_secs: %d\n", c.embryonicTTL)
	}
	cfg = strings.Replace(cfg, labSNATBlock, snat, 1)
	return strings.Replace(cfg, labFlowTableBlock, flow, 1)
}

// counter is the current value of a counter (or gauge) the daemon's
// metrics listener serves, with the given labels (nil: the first series).
func counter(t testing.TB, l *lab.Lab, name string, labels map[string]string) float64 {
	t.Helper()
	return metricValue(t, scrape(t, l), name, labels)
}

// waitCounter polls counter until ok holds (the metrics follow the
// maintenance loop's samples, a second or so behind the data path) or
// timeout passes, and returns the last value read.
func waitCounter(t testing.TB, l *lab.Lab, name string, labels map[string]string, timeout time.Duration, ok func(float64) bool) (float64, bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := counter(t, l, name, labels)
		if ok(v) {
			return v, true
		}
		if time.Now().After(deadline) {
			return v, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}
