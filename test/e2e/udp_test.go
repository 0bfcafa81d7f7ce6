package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// UDP services through the full NAT (issue 31), on a one-arm lab whose
// three backends each run a named echo (udpEchoPort: the reply is the
// backend's name, "|", the request) and a sink that never answers
// (udpSinkPort). udpConfig's services, all on 192.0.2.10:
//   - dns: 53 -> udpEchoPort on the three backends (round robin);
//   - flood: 54 -> udpSinkPort and 55 -> udpEchoPort on the three backends,
//     udp_unreplied_max udpFloodCap;
//   - closed: 56 -> udpClosedPort on backend-1, where nothing listens.
const (
	udpVIP        = "192.0.2.10"
	udpEchoPort   = 5353
	udpSinkPort   = 5354
	udpClosedPort = 5399
	udpFloodCap   = 50
)

// udpLab is a one-arm lab with the UDP servers above; sinks are the
// backends' sink servers, in backend order.
func udpLab(t *testing.T) (l *lab.Lab, sinks []*testnet.UDPServer) {
	t.Helper()
	l = lab.New(t, lab.Options{Topology: lab.OneArm})
	for i, b := range l.Backends {
		if _, err := b.ServeUDP(fmt.Sprintf(":%d", udpEchoPort), testnet.UDPNameEcho(fmt.Sprintf("backend-%d", i+1))); err != nil {
			t.Fatal(err)
		}
		s, err := b.ServeUDP(fmt.Sprintf(":%d", udpSinkPort), testnet.UDPSink)
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, s)
	}
	return l, sinks
}

// udpConfig is the services-form xlb.yaml of the UDP lab (udpLab).
func udpConfig(l *lab.Lab) string {
	var all []string
	for i, b := range l.Backends {
		all = append(all, fmt.Sprintf("{name: backend-%d, ip: %s}", i+1, b.IP()))
	}
	backends := strings.Join(all, ", ")
	var c strings.Builder
	c.WriteString("name: e2e\nservices:\n")
	fmt.Fprintf(&c, "  - name: dns\n    listen: {ip: %s}\n    proto: udp\n    ports: [{local_port: 53, remote_port: %d}]\n    provider: {static: {backends: [%s]}}\n",
		udpVIP, udpEchoPort, backends)
	fmt.Fprintf(&c, "  - name: flood\n    listen: {ip: %s}\n    proto: udp\n    udp_unreplied_max: %d\n"+
		"    ports: [{local_port: 54, remote_port: %d}, {local_port: 55, remote_port: %d}]\n    provider: {static: {backends: [%s]}}\n",
		udpVIP, udpFloodCap, udpSinkPort, udpEchoPort, backends)
	fmt.Fprintf(&c, "  - name: closed\n    listen: {ip: %s}\n    proto: udp\n    ports: [{local_port: 56, remote_port: %d}]\n    provider: {static: {backends: [%s]}}\n",
		udpVIP, udpClosedPort, all[0])
	c.WriteString("interfaces: [eth0]\nsnat:\n  ip: 192.0.2.10\n  port_range: \"40000-59999\"\nxdp_mode: native\nflow_table:\n  max_connections: 65536\n")
	fmt.Fprintf(&c, "state_dir: %s\nshutdown_timeout: 1\nadmin:\n  socket: %s\n", stateDir(l), adminSocket(l))
	return c.String()
}

// udpAt is udpVIP:port.
func udpAt(port uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr(udpVIP), port) }

// udpBind opens an unconnected UDP socket in h's namespace on port (0:
// an ephemeral one), so that a reply's source can be read.
func udpBind(h *lab.Host, port int) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := h.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bind udp :%d in %s: %w", port, h.NS, err)
	}
	return c, nil
}

// errUDPTimeout: no reply within the exchange's attempts.
var errUDPTimeout = errors.New("no reply")

// udpExchange sends req from c to to and reads the reply, which must come
// from to, and returns it; a read that times out after wait sends req
// again, attempts times in all (a lost datagram on the lab's two shared
// cores is not XLB's doing; a wrong reply is).
func udpExchange(c *net.UDPConn, to netip.AddrPort, req []byte, wait time.Duration, attempts int) (string, error) {
	buf := make([]byte, 2048)
	for range attempts {
		if _, err := c.WriteToUDPAddrPort(req, to); err != nil {
			return "", err
		}
		if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
			return "", err
		}
		n, from, err := c.ReadFromUDPAddrPort(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		if err != nil {
			return "", err
		}
		if from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port()); from != to {
			return "", fmt.Errorf("reply from %v, want %v", from, to)
		}
		return string(buf[:n]), nil
	}
	return "", errUDPTimeout
}

// udpAnsweredBy checks that reply is the named echo's answer to req and
// returns the backend's name.
func udpAnsweredBy(reply, req string) (string, error) {
	name, echoed, ok := strings.Cut(reply, testnet.UDPNameSep)
	if !ok || echoed != req || !strings.HasPrefix(name, "backend-") {
		return "", fmt.Errorf("reply %q to %q, want backend-N%s%s", reply, req, testnet.UDPNameSep, req)
	}
	return name, nil
}

// optMetric is the value of name's first series whose labels include
// labels, and whether the scrape has one (metricValue fails instead).
func optMetric(t testing.TB, l *lab.Lab, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	f, ok := scrape(t, l)[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		match := true
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
				match = false
			}
		}
		if match {
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// waitUDPMetric polls optMetric until ok holds or timeout passes, and
// fails t then.
func waitUDPMetric(t testing.TB, l *lab.Lab, name string, labels map[string]string, timeout time.Duration, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, found := optMetric(t, l, name, labels)
		if found && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v (exported %v) after %v", name, labels, v, found, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// settleSamples waits until the maintenance loop has taken two samples
// after the call, so the status and metrics include every pair created
// before it.
func settleSamples(t testing.TB, l *lab.Lab) {
	t.Helper()
	from := statusDoc(t, l).Dataplane.SampleCycle
	deadline := time.Now().Add(30 * time.Second)
	for statusDoc(t, l).Dataplane.SampleCycle < from+2 {
		if time.Now().After(deadline) {
			t.Fatalf("no two maintenance samples after cycle %d within 30 s", from)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// udpService is the status document's UDP figures of the service called
// name.
func udpService(t testing.TB, l *lab.Lab, name string) api.ServiceUDP {
	t.Helper()
	d := statusDoc(t, l)
	for _, s := range d.Services {
		if s.Name == name {
			if s.UDP == nil {
				t.Fatalf("status: service %s (proto %q) has no udp block", name, s.Proto)
			}
			return *s.UDP
		}
	}
	t.Fatalf("status: no service %s", name)
	return api.ServiceUDP{}
}

// TestUDP (issue 31's lab, within 30 s): a DNS-style load, ICMP port
// unreachable back to the client, a flood held at the service's cap while
// a replied flow keeps working, and a hot upgrade with UDP flows open.
func TestUDP(t *testing.T) {
	l, sinks := udpLab(t)
	p := startXLB(t, l, udpConfig(l))
	for _, port := range []uint16{53, 55} {
		if _, err := testnet.WaitUDP(l.Client(), udpAt(port).String(), []byte("ready"), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	dns := map[string]string{"service": "dns"}

	// 1,000 client ports, 10 exchanges each: every reply from VIP:53 with
	// its request echoed, every exchange of a port on one backend, the
	// ports split 334/333/333 by round robin, 1,000 pairs opened.
	t.Run("dns_load", func(t *testing.T) {
		const ports, exchanges, workers, firstPort = 1000, 10, 50, 20000
		settleSamples(t, l)
		opened0 := udpService(t, l, "dns").OpenedTotal
		var mu sync.Mutex
		var errs []error
		byBackend := map[string]int{}
		jobs := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for port := range jobs {
					name, err := dnsClient(l.Client(), port, exchanges)
					mu.Lock()
					if err != nil {
						errs = append(errs, fmt.Errorf("client port %d: %w", port, err))
					} else {
						byBackend[name]++
					}
					mu.Unlock()
				}
			}()
		}
		start := time.Now()
		for port := firstPort; port < firstPort+ports; port++ {
			jobs <- port
		}
		close(jobs)
		wg.Wait()
		t.Logf("%d exchanges from %d client ports in %v; ports by backend %v", ports*exchanges, ports, time.Since(start).Round(time.Millisecond), byBackend)
		if len(errs) > 0 {
			t.Fatalf("%d of %d client ports failed, first: %v", len(errs), ports, errs[0])
		}
		split := slices.Sorted(func(yield func(int) bool) {
			for _, n := range byBackend {
				if !yield(n) {
					return
				}
			}
		})
		if len(byBackend) != 3 || !slices.Equal(split, []int{333, 333, 334}) {
			t.Fatalf("client ports by backend %v, want 334/333/333 over the three backends (round robin)", byBackend)
		}
		settleSamples(t, l)
		u := udpService(t, l, "dns")
		if u.OpenedTotal-opened0 != ports || u.OverCapTotal != 0 {
			t.Fatalf("status: dns opened %d pairs during the load (want %d), over cap %d (want 0): %+v", u.OpenedTotal-opened0, ports, u.OverCapTotal, u)
		}
		if u.Active < ports || u.Unreplied != 0 {
			t.Fatalf("status: dns has %d live pairs, %d unreplied; want at least %d, all replied: %+v", u.Active, u.Unreplied, ports, u)
		}
		if v, _ := optMetric(t, l, "xlb_udp_pairs_opened_total", dns); v != float64(u.OpenedTotal) {
			t.Fatalf("xlb_udp_pairs_opened_total{service=dns} = %v, status says %d", v, u.OpenedTotal)
		}
		if v, _ := optMetric(t, l, "xlb_udp_pairs_over_cap_total", dns); v != 0 {
			t.Fatalf("xlb_udp_pairs_over_cap_total{service=dns} = %v, want 0", v)
		}
	})

	// A mapping to a backend port where nothing listens: the backend's
	// port unreachable is translated back, and the client's connected
	// socket reads ECONNREFUSED.
	t.Run("port_unreachable", func(t *testing.T) {
		before := counter(t, l, "xlb_icmp_translated_total", map[string]string{"direction": "to_client"})
		c, err := l.Client().DialUDP(netip.AddrPort{}, udpAt(56).String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var last error
		for range 3 {
			if _, last = testnet.UDPExchange(c, []byte("anyone?"), time.Second); testnet.IsRefused(last) {
				break
			}
		}
		if !testnet.IsRefused(last) {
			t.Fatalf("exchange with the closed port: %v, want ECONNREFUSED (the backend's port unreachable, translated)", last)
		}
		after, ok := waitCounter(t, l, "xlb_icmp_translated_total", map[string]string{"direction": "to_client"}, 10*time.Second,
			func(v float64) bool { return v > before })
		if !ok {
			t.Fatalf("xlb_icmp_translated_total{direction=to_client} stayed %v", after)
		}
	})

	// flood's cap is udpFloodCap: 200 client ports to the sink make that
	// many pairs; the other datagrams are passed (the host answers port
	// unreachable) and counted over the cap, while a replied flow on the
	// same service keeps exchanging.
	t.Run("flood", func(t *testing.T) {
		const floodPorts, firstPort = 200, 21000
		flow, err := udpBind(l.Client(), 21500)
		if err != nil {
			t.Fatal(err)
		}
		defer flow.Close()
		flowBackend, err := floodFlowExchange(flow, 0)
		if err != nil {
			t.Fatalf("the replied flow before the flood: %v", err)
		}
		var sunk0 int64
		for _, s := range sinks {
			sunk0 += s.Stats().Datagrams
		}
		stop := make(chan struct{})
		flowDone := make(chan error, 1)
		go func() {
			for i := 1; ; i++ {
				select {
				case <-stop:
					flowDone <- nil
					return
				case <-time.After(100 * time.Millisecond):
				}
				name, err := floodFlowExchange(flow, i)
				if err == nil && name != flowBackend {
					err = fmt.Errorf("answered by %s, earlier by %s", name, flowBackend)
				}
				if err != nil {
					flowDone <- fmt.Errorf("the replied flow, exchange %d: %w", i, err)
					return
				}
			}
		}()

		var conns []*net.UDPConn
		for port := firstPort; port < firstPort+floodPorts; port++ {
			c, err := l.Client().DialUDP(netip.AddrPortFrom(netip.Addr{}, uint16(port)), udpAt(54).String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte(fmt.Sprintf("flood %d", port))); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		// The host's port unreachables (rate limited per client) are
		// queued on the connected sockets they concern.
		var refused atomic.Int32
		var reads sync.WaitGroup
		for _, c := range conns {
			reads.Add(1)
			go func() {
				defer reads.Done()
				c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
				if _, err := c.Read(make([]byte, 64)); testnet.IsRefused(err) {
					refused.Add(1)
				}
			}()
		}
		reads.Wait()
		flood := map[string]string{"service": "flood"}
		overCap := waitUDPMetric(t, l, "xlb_udp_pairs_over_cap_total", flood, 10*time.Second, func(v float64) bool { return v >= floodPorts-udpFloodCap })
		sunk := func() (n int64) {
			for _, s := range sinks {
				n += s.Stats().Datagrams
			}
			return n - sunk0
		}
		for deadline := time.Now().Add(10 * time.Second); sunk() < udpFloodCap && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		settleSamples(t, l)
		u := udpService(t, l, "flood")
		close(stop)
		if err := <-flowDone; err != nil {
			t.Fatal(err)
		}
		t.Logf("flood: %d ports, %d reached the sinks, over cap %v, %d clients read port unreachable; flood service %+v",
			floodPorts, sunk(), overCap, refused.Load(), u)
		if overCap != floodPorts-udpFloodCap || sunk() != udpFloodCap {
			t.Fatalf("over cap %v and %d datagrams at the sinks, want %d and %d", overCap, sunk(), floodPorts-udpFloodCap, udpFloodCap)
		}
		if u.Unreplied != udpFloodCap || u.Replied < 1 || u.UnrepliedMax != udpFloodCap || u.OverCapTotal != floodPorts-udpFloodCap {
			t.Fatalf("status: flood %+v, want %d unreplied, the replied flow, cap %d, %d over cap", u, udpFloodCap, udpFloodCap, floodPorts-udpFloodCap)
		}
		if refused.Load() == 0 {
			t.Fatal("no flood client read a port unreachable: the passed datagrams did not reach the host's stack")
		}
		if v, _ := optMetric(t, l, "xlb_udp_pairs_active", map[string]string{"service": "flood", "state": "unreplied"}); v != udpFloodCap {
			t.Fatalf("xlb_udp_pairs_active{service=flood,state=unreplied} = %v, want %d", v, udpFloodCap)
		}
	})

	// 100 flows exchange, SIGUSR2 hands the data path over, and each flow
	// exchanges again with the same backend, on the same pair (no pair
	// opened by the swap).
	t.Run("hot_upgrade", func(t *testing.T) {
		const flows, firstPort = 100, 22000
		var socks []*net.UDPConn
		first := map[int]string{}
		for i := range flows {
			c, err := udpBind(l.Client(), firstPort+i)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			socks = append(socks, c)
			req := fmt.Sprintf("before %d", i)
			reply, err := udpExchange(c, udpAt(53), []byte(req), 500*time.Millisecond, 3)
			if err != nil {
				t.Fatalf("flow %d before the hand-off: %v", i, err)
			}
			if first[i], err = udpAnsweredBy(reply, req); err != nil {
				t.Fatal(err)
			}
		}
		settleSamples(t, l)
		before := udpService(t, l, "dns")
		from := p.Pid()
		// The old process leaves its result for `xlb reload`, which a raw
		// SIGUSR2 never reads (as beginSwap).
		t.Cleanup(func() {
			os.Remove(filepath.Join(hostnet.DefaultJournalDir, fmt.Sprintf("hot-upgrade-%d.json", from)))
		})
		failed := p.Count(xlbproc.LineFailed)
		if err := p.Signal(syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
		// A failed hand-off ends the wait at once (the old process logs
		// it and keeps serving).
		for deadline := time.Now().Add(swapTimeout); ; {
			if _, err := p.WaitHandOff(from, time.Second); err == nil {
				break
			} else if p.Count(xlbproc.LineFailed) > failed || p.Exited() || time.Now().After(deadline) {
				t.Fatalf("hot upgrade: %v", err)
			}
		}
		for i, c := range socks {
			req := fmt.Sprintf("after %d", i)
			reply, err := udpExchange(c, udpAt(53), []byte(req), 500*time.Millisecond, 3)
			if err != nil {
				t.Fatalf("flow %d after the hand-off: %v", i, err)
			}
			name, err := udpAnsweredBy(reply, req)
			if err != nil {
				t.Fatal(err)
			}
			if name != first[i] {
				t.Fatalf("flow %d: answered by %s after the hand-off, by %s before", i, name, first[i])
			}
		}
		waitUDPMetric(t, l, "xlb_udp_pairs_opened_total", dns, 30*time.Second, func(float64) bool { return true })
		settleSamples(t, l)
		after := udpService(t, l, "dns")
		if after.OpenedTotal != before.OpenedTotal || after.OverCapTotal != 0 {
			t.Fatalf("dns across the hand-off: opened %d -> %d, over cap %d; want no pair opened, none over cap",
				before.OpenedTotal, after.OpenedTotal, after.OverCapTotal)
		}
		t.Logf("%d flows kept their backends across the hand-off; dns %+v", flows, after)
	})
	stopXLB(t, l, p)
}

// dnsClient exchanges n times with dns from client port port and returns
// the backend that answered every one.
func dnsClient(h *lab.Host, port, n int) (string, error) {
	c, err := udpBind(h, port)
	if err != nil {
		return "", err
	}
	defer c.Close()
	var backend string
	for i := range n {
		req := fmt.Sprintf("q%d-%d", port, i)
		reply, err := udpExchange(c, udpAt(53), []byte(req), 500*time.Millisecond, 3)
		if err != nil {
			return "", fmt.Errorf("exchange %d: %w", i, err)
		}
		name, err := udpAnsweredBy(reply, req)
		if err != nil {
			return "", err
		}
		if backend != "" && name != backend {
			return "", fmt.Errorf("exchange %d answered by %s, earlier ones by %s", i, name, backend)
		}
		backend = name
	}
	return backend, nil
}

// floodFlowExchange is exchange i of the replied flow on flood's echo
// mapping (port 55); it returns the backend that answered.
func floodFlowExchange(c *net.UDPConn, i int) (string, error) {
	req := fmt.Sprintf("flow %d", i)
	reply, err := udpExchange(c, udpAt(55), []byte(req), 500*time.Millisecond, 3)
	if err != nil {
		return "", err
	}
	return udpAnsweredBy(reply, req)
}

// TestUDPLongLived is the long-lived flow on the real clock with
// the default timeouts (30 s unreplied, 120 s replied): one flow exchanges
// every 20 s for 2 minutes and keeps one pair and one backend, while a
// datagram to a sink that never answers, sent at the start, is removed by
// t = 40 s (its 30 s timeout plus a cycle, with a 10 s margin). About
// 125 s of wall time and nearly no CPU: the Makefile runs it beside the
// other labs.
func TestUDPLongLived(t *testing.T) {
	l, _ := udpLab(t)
	p := startXLB(t, l, udpConfig(l))
	if _, err := testnet.WaitUDP(l.Client(), udpAt(53).String(), []byte("ready"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	settleSamples(t, l)
	dns := map[string]string{"service": "dns"}
	opened0 := udpService(t, l, "dns").OpenedTotal
	expired0 := udpService(t, l, "flood").ExpiredTotal

	flow, err := udpBind(l.Client(), 23000)
	if err != nil {
		t.Fatal(err)
	}
	defer flow.Close()
	control, err := udpBind(l.Client(), 23001)
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()

	start := time.Now()
	if _, err := control.WriteToUDPAddrPort([]byte("control"), udpAt(54)); err != nil {
		t.Fatal(err)
	}
	var backend string
	for k := 0; k <= 6; k++ {
		at := start.Add(time.Duration(k) * 20 * time.Second)
		time.Sleep(time.Until(at))
		req := fmt.Sprintf("t=%ds", k*20)
		reply, err := udpExchange(flow, udpAt(53), []byte(req), time.Second, 3)
		if err != nil {
			t.Fatalf("%s: %v", req, err)
		}
		name, err := udpAnsweredBy(reply, req)
		if err != nil {
			t.Fatal(err)
		}
		if backend != "" && name != backend {
			t.Fatalf("%s: answered by %s, earlier by %s: the pair was lost", req, name, backend)
		}
		backend = name
		if k == 2 { // t = 40 s
			e := udpService(t, l, "flood").ExpiredTotal
			if e.Unreplied-expired0.Unreplied != 1 || e.Replied != expired0.Replied {
				t.Fatalf("at t = 40 s flood expired %+v (before %+v), want the control pair expired unreplied", e, expired0)
			}
			if v, _ := optMetric(t, l, "xlb_udp_pairs_expired_total", map[string]string{"service": "flood", "state": "unreplied"}); v != float64(e.Unreplied) {
				t.Fatalf("xlb_udp_pairs_expired_total{service=flood,state=unreplied} = %v, status says %d", v, e.Unreplied)
			}
		}
	}
	settleSamples(t, l)
	if opened := udpService(t, l, "dns").OpenedTotal; opened != opened0+1 {
		t.Fatalf("dns opened %d pairs over the 2 minutes, want the flow's one", opened-opened0)
	}
	if v, _ := optMetric(t, l, "xlb_udp_pairs_opened_total", dns); v != float64(opened0+1) {
		t.Fatalf("xlb_udp_pairs_opened_total{service=dns} = %v, want %d", v, opened0+1)
	}
	t.Logf("one pair on %s for %v", backend, time.Since(start).Round(time.Second))
	stopXLB(t, l, p)
}
