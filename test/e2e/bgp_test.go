package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// The BGP lab: the lab's client namespace runs bird, the client side's
// router; XLB's interface gets an address of its own beside the listen
// address (the VIP), which the speaker uses toward bird and as the
// route's next hop.
var (
	bgpVIP    = netip.MustParsePrefix("192.0.2.10/32")
	bgpOwnIP  = testnet.XLBExtraIP(0) // 192.0.2.100
	bgpRouter = "xlb"                 // bird's protocol name
)

const (
	bgpXLBASN    = 64512
	bgpRouterASN = 64513
)

// bgpLab is a greeted lab with bird in the client's namespace and XLB's
// own address added.
func bgpLab(t *testing.T) (*lab.Lab, *birdtest.Bird) {
	t.Helper()
	birdtest.Require(t)
	l := greetedLab(t)
	return l, bgpRouterFor(t, l)
}

// bgpRouterFor starts bird in l's client namespace, peering with XLB's own
// address, which it adds.
func bgpRouterFor(t *testing.T, l *lab.Lab) *birdtest.Bird {
	t.Helper()
	if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(bgpOwnIP, 24)); err != nil {
		t.Fatal(err)
	}
	return birdtest.Start(t, l.Client(), birdtest.Config{
		Address: l.Client().IP(), ASN: bgpRouterASN, HoldSecs: 9,
		Peers: []birdtest.Peer{{Name: bgpRouter, Address: bgpOwnIP, ASN: bgpXLBASN}},
	})
}

// bgpConfig is the lab's config with a bgp block peering with bird.
func bgpConfig(l *lab.Lab, extra string) string { return labConfig(l, bgpBlock(l, extra)) }

// bgpBlock is the bgp block of bgpConfig, then extra.
func bgpBlock(l *lab.Lab, extra string) string {
	return fmt.Sprintf("bgp:\n  local_asn: %d\n  hold_time_secs: 3\n  graceful_restart_secs: 60\n  peers:\n    - {address: %s, asn: %d}\n%s",
		bgpXLBASN, l.Client().IP(), bgpRouterASN, extra)
}

// TestBGPAnnounce (issue 15, DESIGN §6a): the daemon announces the listen
// address to a real router while ready and not drained, next hop and
// router id (auto, issue 28) its own address; drain withdraws it and
// undrain brings it back; status and metrics show the session and the
// route; a hot upgrade keeps the route in the router's table at every
// sample; a stop withdraws it before the RST window.
func TestBGPAnnounce(t *testing.T) {
	l, b := bgpLab(t)
	p := startPinned(t, l, xlbBinary, bgpConfig(l, "shutdown_timeout: 5\n"))
	w := startWorkload(t, l)
	waitReadyz(t, l, http.StatusOK, "ready")
	b.WaitRoute(t, bgpVIP, true)
	if r := b.Route(bgpVIP); r.NextHop != bgpOwnIP.String() {
		t.Errorf("next hop %q, want XLB's own address %s:\n%s", r.NextHop, bgpOwnIP, r.Out)
	}
	if s := b.Session(bgpRouter); s.HoldSecs != 3 || s.NeighborID != bgpOwnIP.String() {
		t.Errorf("hold time %d s, router id %q; want the configured 3 and, auto, XLB's own address %s, not the VIP:\n%s", s.HoldSecs, s.NeighborID, bgpOwnIP, s.Out)
	}
	router := l.Client().IP().String()
	waitStatus(t, l, "bgp: bird established, the listen address announced", func(d api.Document) bool {
		b := d.BGP
		return b != nil && len(b.Peers) == 1 && b.Peers[0].Address == router && b.Peers[0].ASN == bgpRouterASN &&
			b.Peers[0].State == "established" && slices.Equal(b.Announced, []string{bgpVIP.String()})
	})
	if v, ok := waitCounter(t, l, "xlb_bgp_peer_up", map[string]string{"peer": router}, 30*time.Second, func(v float64) bool { return v == 1 }); !ok {
		t.Errorf("xlb_bgp_peer_up %v, want 1", v)
	}
	if v, ok := waitCounter(t, l, "xlb_bgp_announced_routes", nil, 30*time.Second, func(v float64) bool { return v == 1 }); !ok {
		t.Errorf("xlb_bgp_announced_routes %v, want 1", v)
	}

	// Drain: the route leaves the router; undrain: it comes back.
	if code, body := postSocket(t, l, "/api/v1/drain"); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, body)
	}
	b.WaitRoute(t, bgpVIP, false)
	waitStatus(t, l, "bgp: established, nothing announced while drained", func(d api.Document) bool {
		return d.BGP != nil && len(d.BGP.Announced) == 0 && len(d.BGP.Peers) == 1 && d.BGP.Peers[0].State == "established"
	})
	if v, ok := waitCounter(t, l, "xlb_bgp_announced_routes", nil, 30*time.Second, func(v float64) bool { return v == 0 }); !ok {
		t.Errorf("xlb_bgp_announced_routes %v while drained, want 0", v)
	}
	if code, body := postSocket(t, l, "/api/v1/undrain"); code != http.StatusOK {
		t.Fatalf("undrain: %d %s", code, body)
	}
	b.WaitRoute(t, bgpVIP, true)

	// Hot upgrade: the route never leaves the router.
	before := b.Session(bgpRouter).ImportUpdates
	sampler := b.SampleRoute(bgpVIP)
	s := handOff(t, l, p, w)
	checkSwap(t, "hand-off with bgp", s)
	birdtest.WaitFor(t, "the successor's session refreshed the route, graceful restart over", func() (bool, string) {
		ss := b.Session(bgpRouter)
		return ss.State == birdtest.Established && !ss.GracefulRestart && ss.ImportUpdates > before, ss.Out
	})
	if n, missing := sampler.Stop(); missing > 0 || n == 0 {
		t.Errorf("the route was missing from the router in %d of %d samples across the hand-off", missing, n)
	}
	w.check(t, "the hand-off with bgp")
	t.Log(w.finish(t))

	// Stop: the route leaves the router while the daemon still holds its
	// 5 s RST window, then the daemon exits cleanly.
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	b.WaitRoute(t, bgpVIP, false)
	if p.Exited() {
		t.Errorf("the daemon exited before the route left the router: the withdrawal must come first")
	}
	expectCleanExit(t, l, p)
	if s := b.Session(bgpRouter); s.GracefulRestart {
		t.Errorf("the router waits for a graceful restart after a stop:\n%s", s.Out)
	}
}

// TestBGPServices (issue 29 item 5, DESIGN §9): two services on two
// addresses, each with its own backends, are announced each as its /32;
// when one loses its last backend (its health checks fail) the router
// loses that /32 only, the other stays in its table at every sample; the
// backend's return brings the /32 back.
func TestBGPServices(t *testing.T) {
	birdtest.Require(t)
	l := lab.New(t, lab.Options{Topology: lab.OneArm, EchoPort: -1, SinkPort: -1})
	servers := make([]*testnet.Server, len(l.Backends))
	for i, be := range l.Backends {
		srv, err := be.Serve(":8080", identEcho(byte(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = srv
	}
	b := bgpRouterFor(t, l)
	apiIP := testnet.XLBExtraIP(1) // 192.0.2.101, the second service's address
	if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(apiIP, 24)); err != nil {
		t.Fatal(err)
	}
	web, apiVIP := bgpVIP, netip.PrefixFrom(apiIP, 32)
	last := len(l.Backends) - 1
	p := startPinned(t, l, xlbBinary, bgpServicesConfig(l, apiIP, last))
	b.WaitRoute(t, web, true)
	b.WaitRoute(t, apiVIP, true)
	for _, vip := range []netip.Prefix{web, apiVIP} {
		if r := b.Route(vip); r.NextHop != bgpOwnIP.String() {
			t.Errorf("%s: next hop %q, want XLB's own address %s:\n%s", vip, r.NextHop, bgpOwnIP, r.Out)
		}
	}
	waitStatus(t, l, "bgp: both services' addresses announced", func(d api.Document) bool {
		return d.BGP != nil && slices.Equal(d.BGP.Announced, []string{web.String(), apiVIP.String()})
	})

	// The api service's only backend stops answering: its health checks
	// fail, the service has no routable backend, and its /32 alone leaves
	// the router.
	sampler := b.SampleRoute(web)
	if err := servers[last].Close(); err != nil {
		t.Fatal(err)
	}
	b.WaitRoute(t, apiVIP, false)
	waitStatus(t, l, "bgp: only the web service's address announced", func(d api.Document) bool {
		return d.BGP != nil && slices.Equal(d.BGP.Announced, []string{web.String()})
	})
	if n, missing := sampler.Stop(); missing > 0 || n == 0 {
		t.Errorf("%s was missing from the router in %d of %d samples while the other service lost its backends", web, missing, n)
	}
	if s := b.Session(bgpRouter); s.State != birdtest.Established {
		t.Errorf("the session went down with the withdrawal:\n%s", s.Out)
	}

	// The backend answers again: the /32 comes back.
	srv, err := l.Backends[last].Serve(":8080", identEcho(byte(last+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	b.WaitRoute(t, apiVIP, true)
	b.WaitRoute(t, web, true)
	stopXLB(t, l, p)
}

// bgpServicesConfig is a services-form config of two services: web at the
// lab's listen address with every backend but the one at index apiBackend,
// api at apiIP with that one, health-checked so that it loses it as soon
// as it stops answering; and the bgp block peering with bird.
func bgpServicesConfig(l *lab.Lab, apiIP netip.Addr, apiBackend int) string {
	var web, api []string
	for i, be := range l.Backends {
		entry := fmt.Sprintf("{name: backend-%d, ip: %s}", i+1, be.IP())
		if i == apiBackend {
			api = append(api, entry)
		} else {
			web = append(web, entry)
		}
	}
	var c strings.Builder
	c.WriteString("name: e2e\nservices:\n")
	fmt.Fprintf(&c, "  - name: web\n    listen: {ip: %s}\n    ports: [{local_port: 80, remote_port: 8080}]\n    provider: {static: {backends: [%s]}}\n",
		bgpVIP.Addr(), strings.Join(web, ", "))
	fmt.Fprintf(&c, "  - name: api\n    listen: {ip: %s}\n    ports: [{local_port: 80, remote_port: 8080}]\n    provider: {static: {backends: [%s]}}\n",
		apiIP, strings.Join(api, ", "))
	c.WriteString("    health_check: {type: tcp, interval_ms: 200, timeout_ms: 100, rise: 1, fall: 2}\n")
	fmt.Fprintf(&c, "interfaces: [eth0]\nsnat:\n  ip: %s\n  port_range: \"40000-59999\"\nxdp_mode: native\nflow_table:\n  max_connections: 65536\n", bgpVIP.Addr())
	fmt.Fprintf(&c, "state_dir: %s\nshutdown_timeout: 1\nadmin:\n  socket: %s\n", stateDir(l), adminSocket(l))
	c.WriteString(bgpBlock(l, ""))
	return c.String()
}

// TestBGPCrashRestart: SIGKILL leaves no NOTIFICATION, so the router keeps
// the route as stale (graceful restart); the restarted daemon adopts the
// pins, its session refreshes the route, and it was in the router's table
// at every sample.
func TestBGPCrashRestart(t *testing.T) {
	l, b := bgpLab(t)
	cfg := bgpConfig(l, "")
	p := startPinned(t, l, xlbBinary, cfg)
	b.WaitRoute(t, bgpVIP, true)
	before := b.Session(bgpRouter).ImportUpdates
	sampler := b.SampleRoute(bgpVIP)
	p.Kill() // SIGKILL
	b.WaitGracefulRestart(t, bgpRouter, bgpVIP)
	p = startPinned(t, l, xlbBinary, cfg)
	birdtest.WaitFor(t, "the restarted daemon's session refreshed the route", func() (bool, string) {
		ss := b.Session(bgpRouter)
		return ss.State == birdtest.Established && !ss.GracefulRestart && ss.ImportUpdates > before, ss.Out
	})
	if n, missing := sampler.Stop(); missing > 0 || n == 0 {
		t.Errorf("the route was missing from the router in %d of %d samples across the crash and restart", missing, n)
	}
	stopXLB(t, l, p)
}

// TestBGPStartRefused: an instance configured to announce itself and
// unable to (here: no route toward the peer) fails its start with the
// reason and undoes what it did, instead of serving unannounced.
func TestBGPStartRefused(t *testing.T) {
	const loFwd = "/proc/sys/net/ipv4/conf/lo/forwarding"
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	before := readSysctl(t, l.XLB, loFwd)
	cfg := labConfig(l, fmt.Sprintf("bgp:\n  local_asn: %d\n  peers:\n    - {address: 203.0.113.77, asn: %d}\n", bgpXLBASN, bgpRouterASN))
	p, err := startXLBEnv(t, l, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(60 * time.Second); err != nil || code != 1 {
		t.Fatalf("exit %d err %v, want 1:\n%s", code, err, p.Log())
	}
	if !strings.Contains(p.Log(), "bgp: this host's address toward peer 203.0.113.77") {
		t.Fatalf("the error does not name the peer:\n%s", p.Log())
	}
	if got := readSysctl(t, l.XLB, loFwd); got != before {
		t.Fatalf("lo forwarding %q after the refused start, want %q", got, before)
	}
}

// Issue 28, item 5: a stop withdraws the route first and forwards as
// before for bgp.withdraw_delay_secs, and only then starts the seed's
// reset window. A capture on the router's interface (bird runs in the
// client's namespace) sees the speaker's UPDATE withdrawing the route
// before the first RST that XLB sends a client; the first RST comes no
// sooner than the delay after the stop signal; a connection opened while
// the route is already gone from bird and before the reset window is
// balanced normally.
func TestBGPStopWithdrawsBeforeResets(t *testing.T) {
	const delay = 3 * time.Second
	l, b := bgpLab(t)
	p := startPinned(t, l, xlbBinary, bgpConfig(l, fmt.Sprintf("  withdraw_delay_secs: %d\nshutdown_timeout: 3\n", int(delay/time.Second))))
	waitReadyz(t, l, http.StatusOK, "ready")
	b.WaitRoute(t, bgpVIP, true)

	capt, err := l.Client().Capture("eth0")
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		withdraw, rst bool
		at            time.Time
	}
	var (
		mu     sync.Mutex
		events []event
	)
	captureDone := make(chan struct{})
	stopCapture := make(chan struct{})
	go func() {
		defer close(captureDone)
		buf := make([]byte, 65536)
		for {
			select {
			case <-stopCapture:
				return
			default:
			}
			n, err := capt.Read(buf, 100*time.Millisecond)
			if err != nil {
				continue
			}
			withdraw, rst := classifyStopFrame(buf[:n])
			if withdraw || rst {
				mu.Lock()
				events = append(events, event{withdraw, rst, time.Now()})
				mu.Unlock()
			}
		}
	}()
	defer func() {
		select {
		case <-stopCapture:
		default:
			close(stopCapture)
		}
		<-captureDone
		capt.Close()
	}()

	// A connection that sends every 50 ms until XLB resets it.
	c, _, err := greet(l.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pingErr := make(chan error, 1)
	go func() {
		for {
			if err := roundTrip(c, []byte("ping")); err != nil {
				pingErr <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	stopAt := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	b.WaitRoute(t, bgpVIP, false)
	// The route is gone from the router; a client that still reaches this
	// host (a router not yet converged) is balanced as before.
	nc, _, err := greet(l.Client())
	if err == nil {
		err = roundTrip(nc, []byte("after the withdrawal"))
		nc.Close()
	}
	done := time.Now()
	var resetsFrom time.Time
	if d := statusDoc(t, l); d.Shutdown != nil {
		resetsFrom = time.UnixMilli(d.Shutdown.ResetsFromUnixMs)
	}
	if resetsFrom.Sub(stopAt) < delay-time.Second {
		t.Fatalf("status shutdown.resets_from is %v after the stop, want about the %v withdraw delay", resetsFrom.Sub(stopAt), delay)
	}
	switch {
	case err != nil && done.Before(resetsFrom):
		t.Fatalf("a new connection after the withdrawal, before the reset window: %v", err)
	case err != nil:
		t.Logf("the new connection ended after the reset window began (slow machine): %v", err)
	}

	select {
	case err := <-pingErr:
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("the pinging connection ended with %v, want a reset", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the pinging connection was never reset")
	}
	expectCleanExit(t, l, p)
	close(stopCapture)
	<-captureDone

	mu.Lock()
	defer mu.Unlock()
	firstWithdraw, firstRST := -1, -1
	for i, e := range events {
		if e.withdraw && firstWithdraw < 0 {
			firstWithdraw = i
		}
		if e.rst && firstRST < 0 {
			firstRST = i
		}
	}
	switch {
	case firstWithdraw < 0:
		t.Fatalf("the capture saw no BGP UPDATE withdrawing a route (%d events)", len(events))
	case firstRST < 0:
		t.Fatalf("the capture saw no RST from %s", bgpVIP.Addr())
	case firstRST < firstWithdraw:
		t.Fatalf("the first RST (frame event %d) came before the withdrawal reached the router (event %d)", firstRST, firstWithdraw)
	}
	if gap := events[firstRST].at.Sub(stopAt); gap < delay {
		t.Fatalf("the first RST was captured %v after the stop signal, sooner than the %v withdraw delay", gap, delay)
	}
	t.Logf("withdrawal captured %v after the stop, first RST %v after it",
		events[firstWithdraw].at.Sub(stopAt).Round(time.Millisecond), events[firstRST].at.Sub(stopAt).Round(time.Millisecond))
}

// classifyStopFrame reads one captured Ethernet frame: withdraw is a BGP
// UPDATE from XLB's own address with withdrawn routes; rst a TCP RST from
// the VIP.
func classifyStopFrame(f []byte) (withdraw, rst bool) {
	if len(f) < 14+20 || binary.BigEndian.Uint16(f[12:14]) != 0x0800 {
		return false, false
	}
	ip := f[14:]
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if ip[9] != 6 || ihl < 20 || total > len(ip) || total < ihl+20 {
		return false, false
	}
	src := netip.AddrFrom4([4]byte(ip[12:16]))
	tcp := ip[ihl:total]
	doff := int(tcp[12]>>4) * 4
	if doff < 20 || doff > len(tcp) {
		return false, false
	}
	if src == bgpVIP.Addr() && tcp[13]&0x04 != 0 {
		return false, true
	}
	if src != bgpOwnIP || binary.BigEndian.Uint16(tcp[2:4]) != 179 {
		return false, false
	}
	// BGP messages: 16-byte marker, length, type; an UPDATE (type 2)
	// starts with the withdrawn routes' length.
	for m := tcp[doff:]; len(m) >= 19; {
		n := int(binary.BigEndian.Uint16(m[16:18]))
		if n < 19 || n > len(m) {
			break
		}
		if m[18] == 2 && n >= 21 && binary.BigEndian.Uint16(m[19:21]) > 0 {
			return true, false
		}
		m = m[n:]
	}
	return false, false
}
