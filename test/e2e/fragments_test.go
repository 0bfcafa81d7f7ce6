package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// Issue 27 finding 6: fragments of a live pair passed to XLB's kernel,
// which has the listen and SNAT addresses and so answered with a RST. A
// one-arm lab whose client and backend each sit behind a router of their
// own (routedPeers): every sender sends without don't-fragment
// (net.ipv4.ip_no_pmtu_disc=1), and a router forwards toward XLB through
// a route of a lower MTU, so it fragments what it forwards (a forwarded
// packet honours its route's MTU). First only the client's router
// fragments, then only the backend's, then both: every transfer comes back
// byte-exact with no reset, the routers really fragmented, and XLB
// forwarded every fragment they made (their FragCreates) and passed none
// to its kernel, as the first maintenance sample taken after the phase
// shows (the counters are sampled once a second). On a loaded host the
// lab itself loses frames now and then: the veth into XLB's interface
// drops what finds that interface's XDP ring full (labDrops), TCP
// retransmits, and a later fragment whose first one was lost passes, as
// it must. Only those losses may excuse a fragment XLB did not forward.
//
// XLB drops some RSTs here, and must. The veth from the client to its
// router sometimes reorders the client's ACKs (captured in order on the
// client's interface, out of order on the router's), by milliseconds, so
// a run of them reaches the backend after the client's FIN and the final
// ACK that closed the backend's socket (LAST-ACK to CLOSED). The backend
// answers each with a RST whose sequence is that stale ACK's
// acknowledgement (RFC 9293 §3.10.7.1): before the client's RCV.NXT, far
// outside its window. The client in TIME-WAIT would discard it (Linux's
// tcp_timewait_state_process takes only a RST at RCV.NXT) and RFC 5961 §3
// has it dropped; nf_conntrack lets it through only because it skips the
// check once a connection is closing (tcp_can_early_drop). Those at the
// backend's FIN's sequence or at RCV.NXT are exact and forwarded. So,
// from captures on both routers (rstWatch), the test checks that every
// RST XLB dropped (xlb_rst_out_of_window_total) was such a stale answer
// after the close, that any other RST that did not reach the other side
// is one the lab lost, and that no RST reached an endpoint
// that the other did not send.
func TestFragmentedTransfer(t *testing.T) {
	l := lab.New(t, lab.Options{Backends: 1, EchoPort: -1, SinkPort: -1})
	rp := newRoutedPeers(t, l)
	cfg := labConfig(l, "")
	own := fmt.Sprintf("      - name: backend-1\n        ip: %s\n", l.Backends[0].IP())
	if !strings.Contains(cfg, own) {
		t.Fatalf("the lab config names its backend otherwise:\n%s", cfg)
	}
	startXLB(t, l, strings.Replace(cfg, own, fmt.Sprintf("      - name: routed\n        ip: %s\n", routedBackendIP), 1))
	watch, err := watchRSTs(rstSide{rp.clientRouter.Host, rp.clientRouter.lan, testnet.OuterClientIP},
		rstSide{rp.backendRouter.Host, rp.backendRouter.lan, routedBackendIP})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.close()
	rstDropped, lostAtStart := counter(t, l, "xlb_rst_out_of_window_total", nil), labDrops(t, l)

	rng := rand.New(rand.NewPCG(27, 6))
	for _, ph := range []struct {
		name            string
		client, backend int // the route MTU toward XLB of the client's and of the backend's router; 0: the link's (1500)
	}{
		{"the client's segments fragmented", 1000, 0},
		{"the backend's segments fragmented", 0, 900},
		{"both ways fragmented", 1000, 900},
	} {
		rp.clientRouter.routeMTU(t, ph.client)
		rp.backendRouter.routeMTU(t, ph.backend)
		frags, passed := counter(t, l, "xlb_fragments_forwarded_total", nil), counter(t, l, "xlb_fragments_passed_total", nil)
		cBefore, cFragsBefore := rp.clientRouter.fragmented(t)
		bBefore, bFragsBefore := rp.backendRouter.fragmented(t)
		lostBefore := labDrops(t, l)

		// Sequential connections, then concurrent ones.
		for i := range 4 {
			if err := echoThrough(rp.client, rng, 64<<10+rng.IntN(64<<10)); err != nil {
				t.Fatalf("%s: connection %d: %v", ph.name, i, err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for i := range cap(errs) {
			r := rand.New(rand.NewPCG(uint64(i), 27))
			wg.Go(func() { errs <- echoThrough(rp.client, r, 256<<10) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("%s: concurrent connection: %v", ph.name, err)
			}
		}

		cAfter, _ := rp.clientRouter.fragmented(t)
		bAfter, _ := rp.backendRouter.fragmented(t)
		cMade, bMade := cAfter-cBefore, bAfter-bBefore
		if (cMade > 0) != (ph.client > 0) || (bMade > 0) != (ph.backend > 0) {
			t.Fatalf("%s: the client's router fragmented %d datagrams, the backend's %d", ph.name, cMade, bMade)
		}
		// a maintenance sample taken after the routers made their last
		// fragment (a late retransmission may add some after the
		// transfers)
		var made, fwd, pas, lost float64
		waitStart := time.Now()
		for settled := false; !settled; {
			if time.Since(waitStart) > time.Minute {
				t.Fatalf("%s: the routers still fragment a minute after the transfers", ph.name)
			}
			_, cFrags := rp.clientRouter.fragmented(t)
			_, bFrags := rp.backendRouter.fragmented(t)
			waitSample(t, l)
			fwd = counter(t, l, "xlb_fragments_forwarded_total", nil) - frags
			pas = counter(t, l, "xlb_fragments_passed_total", nil) - passed
			lost = float64(labDrops(t, l) - lostBefore)
			made = float64(cFrags - cFragsBefore + bFrags - bFragsBefore)
			_, cNow := rp.clientRouter.fragmented(t)
			_, bNow := rp.backendRouter.fragmented(t)
			settled = cNow == cFrags && bNow == bFrags
		}
		// Each fragment XLB did not forward is one the lab lost before
		// it, or a later fragment whose first one it lost (passed).
		if fwd > made || made-fwd-pas > lost || pas > lost {
			t.Fatalf("%s: the routers made %v fragments of %d datagrams; XLB forwarded %v and passed %v to its kernel; the lab's bridge and XLB's interfaces dropped %v frames",
				ph.name, made, cMade+bMade, fwd, pas, lost)
		}
		t.Logf("%s: the routers fragmented %d (client's) and %d (backend's) datagrams into %v fragments; XLB forwarded %v and passed %v; the lab's bridge and XLB's interfaces dropped %v frames",
			ph.name, cMade, bMade, made, fwd, pas, lost)
	}
	for _, initiator := range []string{"client", "backend"} {
		if v := counter(t, l, "xlb_connections_closed_total", map[string]string{"initiator": initiator, "reason": "rst"}); v != 0 {
			t.Fatalf("xlb_connections_closed_total{initiator=%q,reason=\"rst\"} %v: a pair was reset", initiator, v)
		}
	}

	// The RSTs that did not reach the other side: those XLB dropped,
	// and any the lab lost.
	waitSample(t, l)
	rep, err := watch.report()
	if err != nil {
		t.Fatal(err)
	}
	dropped, lost := counter(t, l, "xlb_rst_out_of_window_total", nil)-rstDropped, float64(labDrops(t, l)-lostAtStart)
	if len(rep.invented) > 0 {
		t.Fatalf("RSTs reached an endpoint that the other did not send:\n%s", firstLines(rep.invented, 10))
	}
	if stale := float64(len(rep.dropped) - len(rep.unexplained)); dropped > stale || float64(len(rep.dropped))-dropped > lost || float64(len(rep.unexplained)) > lost {
		t.Fatalf("xlb_rst_out_of_window_total rose by %v; %d RSTs did not reach the other side, %v of them stale answers after their connection's close; the lab's bridge and XLB's interfaces dropped %v frames; those not stale:\n%s",
			dropped, len(rep.dropped), stale, lost, firstLines(rep.unexplained, 10))
	}
	t.Logf("the endpoints sent %d RSTs toward XLB: %d forwarded (%d at the sender's FIN's sequence, %d just past it, %d elsewhere; xlb_rst_inexact_total %v), %v dropped as out of the window (each a stale answer after its connection's close), %v lost in the lab",
		rep.sent, rep.forwarded, rep.forwardedAt[0], rep.forwardedAt[1], rep.otherAt, counter(t, l, "xlb_rst_inexact_total", nil), dropped, float64(len(rep.dropped))-dropped)
}

// waitSample waits until the daemon has published a maintenance sample
// begun after the call: its counters cover every packet before it.
func waitSample(t *testing.T, l *lab.Lab) {
	t.Helper()
	c := counter(t, l, "xlb_maintenance_cycles_total", nil)
	if _, ok := waitCounter(t, l, "xlb_maintenance_cycles_total", nil, 30*time.Second, func(v float64) bool { return v >= c+2 }); !ok {
		t.Fatal("no maintenance sample in 30 s")
	}
}

// labDrops is the number of frames the lab's bridge ports and XLB's
// interfaces dropped, either way (both ends of XLB's veth included, so a
// drop may count twice). XLB's eth0 runs an XDP program, so the veth
// into it queues what it sends on a ring of that interface's and drops
// what finds the ring full; on a loaded host XLB drains it too late now
// and then (and the same holds the other way for the XDP_PASS program
// on the bridge's port, which XDP_TX needs). Such frames never reach XLB
// (or the other side), and TCP retransmits them.
func labDrops(t *testing.T, l *lab.Lab) uint64 {
	t.Helper()
	var n uint64
	for _, h := range []*lab.Host{l.LANs[0], l.XLB} {
		links, err := h.Netlink().LinkList()
		if err != nil {
			t.Fatalf("%s: %v", h.NS, err)
		}
		for _, link := range links {
			if st := link.Attrs().Statistics; st != nil {
				n += st.TxDropped + st.RxDropped
			}
		}
	}
	return n
}

// The addresses of routedPeers: the backend behind its router on BackNet
// (unused by a one-arm lab), its router on FrontNet and BackNet; the
// client and its router are OuterNet's and testnet.RouterIP.
var (
	routedBackendIP      = testnet.TwoArmBackendIP(0)
	backendRouterFrontIP = netip.MustParseAddr("192.0.2.254")
	backendRouterBackIP  = netip.MustParseAddr("198.51.100.254")
)

// routedPeers are a client and a backend each behind a router on the lab's
// bridge, in namespaces of their own removed when the test ends: the
// client 203.0.113.10 behind 203.0.113.1/192.0.2.1, the backend
// 198.51.100.11 (an echo server on the lab's echo port) behind
// 198.51.100.254/192.0.2.254. XLB routes to both networks through the
// routers. Interfaces have TX checksum offload off like the lab's
// endpoints; the client and the backend send without don't-fragment.
type routedPeers struct {
	net                         *testnet.Topology
	client, backend             *lab.Host
	clientRouter, backendRouter router
}

// router is a router namespace and its interface on the lab's bridge.
type router struct {
	*lab.Host
	lan string
}

func newRoutedPeers(t *testing.T, l *lab.Lab) *routedPeers {
	t.Helper()
	prefix, err := testnet.RandomPrefix("xl")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := testnet.New(testnet.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Errorf("remove the routed client and backend: %v", err)
		}
	})
	rp := &routedPeers{net: topo}
	at := func(ip netip.Addr, n netip.Prefix) netip.Prefix { return netip.PrefixFrom(ip, n.Bits()) }
	noPMTUDisc := func() error { return testnet.Sysctl("net.ipv4.ip_no_pmtu_disc", "1") }
	forward := func() error { return testnet.Sysctl("net.ipv4.ip_forward", "1") }
	steps := []testnet.Step{
		{Name: "namespaces", Run: func() error {
			for _, h := range []struct {
				role string
				host **lab.Host
			}{{"crouter", &rp.clientRouter.Host}, {"brouter", &rp.backendRouter.Host}, {"client", &rp.client}, {"backend", &rp.backend}} {
				var err error
				if *h.host, err = topo.AddHost(h.role); err != nil {
					return err
				}
			}
			return nil
		}},
		{Name: "links", Run: func() error {
			if err := topo.Pair(rp.client, "eth0", at(testnet.OuterClientIP, testnet.OuterNet),
				rp.clientRouter.Host, "eth0", at(testnet.OuterRouterIP, testnet.OuterNet)); err != nil {
				return err
			}
			if err := topo.Pair(rp.backend, "eth0", at(routedBackendIP, testnet.BackNet),
				rp.backendRouter.Host, "eth0", at(backendRouterBackIP, testnet.BackNet)); err != nil {
				return err
			}
			rp.clientRouter.lan, rp.backendRouter.lan = "eth1", "eth1"
			if _, err := topo.Attach(rp.clientRouter.Host, "eth1", at(testnet.RouterIP, testnet.FrontNet), l.LANs[0], "rc"); err != nil {
				return err
			}
			_, err := topo.Attach(rp.backendRouter.Host, "eth1", at(backendRouterFrontIP, testnet.FrontNet), l.LANs[0], "rb")
			return err
		}},
		{Name: "offload", Run: func() error {
			for _, h := range []*lab.Host{rp.client, rp.backend} {
				if err := h.SetTxChecksum(false, "eth0"); err != nil {
					return err
				}
			}
			for _, h := range []*lab.Host{rp.clientRouter.Host, rp.backendRouter.Host} {
				if err := h.SetTxChecksum(false, "eth0", "eth1"); err != nil {
					return err
				}
			}
			return nil
		}},
		{Name: "routes", Run: func() error {
			if err := rp.client.AddDefaultRoute("eth0", testnet.OuterRouterIP); err != nil {
				return err
			}
			if err := rp.backend.AddDefaultRoute("eth0", backendRouterBackIP); err != nil {
				return err
			}
			for _, h := range []*lab.Host{rp.client, rp.backend} {
				if err := h.Do(noPMTUDisc); err != nil {
					return err
				}
			}
			for _, h := range []*lab.Host{rp.clientRouter.Host, rp.backendRouter.Host} {
				if err := h.Do(forward); err != nil {
					return err
				}
			}
			eth0, err := l.XLB.Netlink().LinkByName("eth0")
			if err != nil {
				return err
			}
			for _, r := range []struct {
				dst netip.Prefix
				gw  netip.Addr
			}{{testnet.OuterNet, testnet.RouterIP}, {testnet.BackNet, backendRouterFrontIP}} {
				if err := l.XLB.Netlink().RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: prefixNet(r.dst), Gw: r.gw.AsSlice()}); err != nil {
					return fmt.Errorf("XLB's route to %v: %w", r.dst, err)
				}
			}
			return nil
		}},
		{Name: "server", Run: func() error {
			// after the sysctl: an accepted socket takes its
			// don't-fragment choice from its listener's
			_, err := rp.backend.Serve(":"+strconv.Itoa(lab.DefaultEchoPort), testnet.Echo)
			return err
		}},
	}
	if err := topo.Build(steps, nil); err != nil {
		t.Fatal(err)
	}
	return rp
}

// routeMTU sets the router's route toward XLB's listen address to MTU
// mtu (0: the interface's, 1500): the router fragments what it forwards
// through it.
func (r router) routeMTU(t *testing.T, mtu int) {
	t.Helper()
	link, err := r.Netlink().LinkByName(r.lan)
	if err != nil {
		t.Fatal(err)
	}
	rt := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixNet(netip.PrefixFrom(lab.XLBFrontIP, 32)),
		Scope: netlink.SCOPE_LINK, MTU: mtu}
	if err := r.Netlink().RouteReplace(rt); err != nil {
		t.Fatalf("%s: route to %v mtu %d: %v", r.NS, lab.XLBFrontIP, mtu, err)
	}
}

// fragmented is the router's Ip FragOKs and FragCreates: the datagrams it
// fragmented and the fragments it made of them.
func (r router) fragmented(t *testing.T) (datagrams, fragments uint64) {
	t.Helper()
	var snmp []byte
	if err := r.Do(func() (err error) {
		snmp, err = os.ReadFile("/proc/thread-self/net/snmp") // this thread's namespace (/proc/net is the process's)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	datagrams, err := snmpValue(snmp, "Ip", "FragOKs")
	if err == nil {
		fragments, err = snmpValue(snmp, "Ip", "FragCreates")
	}
	if err != nil {
		t.Fatal(err)
	}
	return datagrams, fragments
}

// snmpValue reads one counter of /proc/net/snmp: a header line and a
// value line, both starting with the group's name.
func snmpValue(snmp []byte, group, name string) (uint64, error) {
	var header []string
	sc := bufio.NewScanner(bytes.NewReader(snmp))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != group+":" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i, h := range header {
			if h == name && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no %s %s in /proc/net/snmp", group, name)
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
