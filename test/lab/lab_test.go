package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/xlbproject/xlb/internal/testnet"
)

// Generous bounds: the machine is shared and noisy. Nothing here asserts
// how long anything takes.
const (
	waitLong = 30 * time.Second
	payload  = 64 << 10
)

func longCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// echoRoundTrip sends payload random bytes from h to an echo server at addr
// and checks that every byte comes back.
func echoRoundTrip(t *testing.T, h *Host, addr string) {
	t.Helper()
	ctx := longCtx(t)
	c, err := h.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitLong))
	want := make([]byte, payload)
	rand.Read(want)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(want)
		werr <- errors.Join(err, c.(*net.TCPConn).CloseWrite())
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("echo %s: read: %v", addr, err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("echo %s: write: %v", addr, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("echo %s: got %d bytes back, want the %d sent (equal prefix %d)", addr, len(got), len(want), commonPrefix(got, want))
	}
}

// sinkRoundTrip sends n bytes from h to a sink at addr and checks the count.
func sinkRoundTrip(t *testing.T, h *Host, addr string, n int) {
	t.Helper()
	c, err := h.Dial(longCtx(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitLong))
	buf := make([]byte, n)
	rand.Read(buf)
	if _, err := c.Write(buf); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := testnet.ReadSinkCount(c)
	if err != nil || got != uint64(n) {
		t.Fatalf("sink %s: count %d, %v; want %d", addr, got, err, n)
	}
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Fatalf("sink %s: after count: %d more bytes, %v", addr, len(rest), err)
	}
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// waitServerIdle waits for the connections WaitTCP made, then zeroes stats.
func waitServerIdle(t *testing.T, s *testnet.Server, n int) {
	t.Helper()
	if _, err := s.WaitCompleted(longCtx(t), n); err != nil {
		t.Fatal(err)
	}
	s.ResetStats()
}

// checkGone asserts that nothing named with prefix is left: no named
// namespace and no link in the root namespace.
func checkGone(t *testing.T, prefix string) {
	t.Helper()
	if left, err := testnet.Leftovers(prefix); err != nil || len(left) > 0 {
		t.Errorf("left behind: %v, %v", left, err)
	}
}

// checkShape checks names, XDP attachments, offloads and MACs.
func checkShape(t *testing.T, l *Lab) {
	t.Helper()
	for _, h := range l.Hosts() {
		if !strings.HasPrefix(h.NS, l.Prefix+"-") {
			t.Errorf("namespace %s lacks prefix %s", h.NS, l.Prefix)
		}
		if _, err := os.Stat(h.Path); err != nil {
			t.Errorf("%s: %v", h.Name, err)
		}
		for _, i := range h.Ifaces {
			if !strings.HasPrefix(i.Peer, l.Prefix+"-") || len(i.Peer) > 15 {
				t.Errorf("peer link name %q", i.Peer)
			}
			if !bytes.Equal(i.MAC, testnet.EndpointMAC(i.Addr.Addr())) {
				t.Errorf("%s/%s: MAC %v", h.Name, i.Name, i.MAC)
			}
			link, err := h.Netlink().LinkByName(i.Name)
			if err != nil {
				t.Fatal(err)
			}
			if link.Attrs().Index != i.Index || !bytes.Equal(link.Attrs().HardwareAddr, i.MAC) {
				t.Errorf("%s/%s: kernel says index %d MAC %v, lab says %d %v", h.Name, i.Name,
					link.Attrs().Index, link.Attrs().HardwareAddr, i.Index, i.MAC)
			}
			// Bridge side: native XDP_PASS. Endpoint side: no program.
			if mode, err := i.LAN.XDPAttachMode(i.Peer); err != nil || mode != nl.XDP_ATTACHED_DRV {
				t.Errorf("%s: XDP attach mode %d, %v; want native", i.Peer, mode, err)
			}
			if mode, err := h.XDPAttachMode(i.Name); err != nil || mode != 0 {
				t.Errorf("%s/%s: XDP attach mode %d, %v; want none", h.Name, i.Name, mode, err)
			}
			if on, err := h.TxChecksum(i.Name); err != nil || on {
				t.Errorf("%s/%s: tx checksum on=%v, %v; want off", h.Name, i.Name, on, err)
			}
		}
	}
	if got, want := l.Client().MAC().String(), "02:00:c0:00:02:14"; got != want {
		t.Errorf("client MAC %s, want %s", got, want)
	}
}

func TestOneArm(t *testing.T) {
	l := New(t, Options{})
	if len(l.Clients) != 1 || len(l.Backends) != 3 || len(l.LANs) != 1 || len(l.XLB.Ifaces) != 1 {
		t.Fatalf("shape: %d clients, %d backends, %d lans, %d xlb ifaces",
			len(l.Clients), len(l.Backends), len(l.LANs), len(l.XLB.Ifaces))
	}
	if l.XLB.IP() != netip.MustParseAddr("192.0.2.10") || l.XLB.Ifaces[0].Name != "eth0" {
		t.Fatalf("xlb %v %s", l.XLB.IP(), l.XLB.Ifaces[0].Name)
	}
	checkShape(t, l)

	client := l.Client()
	for i, b := range l.Backends {
		if want := netip.AddrFrom4([4]byte{192, 0, 2, byte(31 + i)}); b.IP() != want {
			t.Fatalf("backend %d at %v, want %v", i, b.IP(), want)
		}
		if err := testnet.WaitTCP(client, l.EchoAddr(i), waitLong); err != nil {
			t.Fatal(err)
		}
		waitServerIdle(t, b.Echo, 1)
		echoRoundTrip(t, client, l.EchoAddr(i))
		sinkRoundTrip(t, client, l.SinkAddr(i), payload+3)

		echo, err := b.Echo.WaitCompleted(longCtx(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		if echo.Accepted != 1 || echo.BytesIn != payload || echo.BytesOut != payload || echo.Errors+echo.Resets != 0 {
			t.Errorf("backend %d echo stats %+v", i, echo)
		}
		sink, err := b.Sink.WaitCompleted(longCtx(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		if sink.BytesIn != payload+3 || sink.BytesOut != 8 {
			t.Errorf("backend %d sink stats %+v", i, sink)
		}
		// The UDP echo and sink on the same ports (issue 31).
		if got, err := testnet.WaitUDP(client, l.EchoAddr(i), []byte("udp"), waitLong); err != nil || string(got) != "udp" {
			t.Fatalf("backend %d udp echo: %q, %v", i, got, err)
		}
		uc, err := client.DialUDP(netip.AddrPort{}, l.SinkAddr(i))
		if err != nil {
			t.Fatal(err)
		}
		_, err = uc.Write(make([]byte, 100))
		uc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st, err := b.UDPSink.WaitDatagrams(longCtx(t), 1); err != nil || st.BytesIn != 100 || st.Replies != 0 {
			t.Errorf("backend %d udp sink stats %+v, %v", i, st, err)
		}
		all := b.Stats()
		if all.Accepted != 2 || len(all.Remotes) != 1 || all.Remotes[client.IP()] != 2 {
			t.Errorf("backend %d: accepted %d, remotes %v; want 2 from %v", i, all.Accepted, all.Remotes, client.IP())
		}
		if rec := all.Conns[0]; rec.Remote.Addr() != client.IP() || rec.Local != netip.AddrPortFrom(b.IP(), DefaultEchoPort) {
			t.Errorf("backend %d: record %+v", i, rec)
		}
	}
	l.ResetStats()
	if st := l.Backends[0].Stats(); st.Accepted != 0 || len(st.Conns) != 0 || len(st.Remotes) != 0 {
		t.Errorf("after ResetStats: %+v", st)
	}
	if st := l.Backends[0].UDPEcho.Stats(); st.Datagrams != 0 || len(st.Peers) != 0 {
		t.Errorf("udp echo after ResetStats: %+v", st)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, l.Prefix)
}

func TestTwoArm(t *testing.T) {
	l := New(t, Options{Topology: TwoArm, Clients: 2, Backends: 3})
	if len(l.LANs) != 2 || len(l.XLB.Ifaces) != 2 || len(l.Clients) != 2 {
		t.Fatalf("shape: %d lans, %d xlb ifaces, %d clients", len(l.LANs), len(l.XLB.Ifaces), len(l.Clients))
	}
	checkShape(t, l)
	eth0, _ := l.XLB.Iface("eth0")
	eth1, _ := l.XLB.Iface("eth1")
	if eth0.Addr.String() != "192.0.2.10/24" || eth1.Addr.String() != "198.51.100.1/24" || eth0.LAN == eth1.LAN {
		t.Fatalf("xlb ifaces %+v %+v", eth0, eth1)
	}
	if got := l.Clients[1].IP().String(); got != "192.0.2.21" {
		t.Errorf("second client at %s", got)
	}
	if got := l.Backends[0].IP().String(); got != "198.51.100.11" {
		t.Errorf("first backend at %s", got)
	}
	checkDefaultRoute(t, l.Client(), "192.0.2.10")
	checkDefaultRoute(t, l.Backends[2].Host, "198.51.100.1")

	// XLB does not forward without the daemon: test XLB→backend and
	// backend→backend.
	for i := range l.Backends {
		if err := testnet.WaitTCP(l.XLB, l.EchoAddr(i), waitLong); err != nil {
			t.Fatal(err)
		}
		echoRoundTrip(t, l.XLB, l.EchoAddr(i))
		sinkRoundTrip(t, l.XLB, l.SinkAddr(i), payload)
	}
	echoRoundTrip(t, l.Backends[0].Host, l.EchoAddr(1))
	if st, err := l.Backends[1].Echo.WaitCompleted(longCtx(t), 3); err != nil || st.Remotes[l.Backends[0].IP()] != 1 || st.Remotes[eth1.Addr.Addr()] != 2 {
		t.Errorf("backend 2 echo remotes %v, %v", st.Remotes, err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, l.Prefix)
}

func checkDefaultRoute(t *testing.T, h *Host, gw string) {
	t.Helper()
	routes, err := h.Netlink().RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw.String() == gw {
			return
		}
	}
	t.Errorf("%s: no default route via %s in %v", h.Name, gw, routes)
}

func TestConstructionFailureLeavesNothing(t *testing.T) {
	testnet.RequireRoot(t)
	for _, step := range []string{"namespaces", "bridges", "links", "xdp", "offload", "routes", "servers"} {
		t.Run(step, func(t *testing.T) {
			prefix, _ := testnet.RandomPrefix("xl")
			l, err := Start(Options{Topology: TwoArm, Prefix: prefix, failAt: step})
			if err == nil || l != nil {
				t.Fatalf("Start with injected failure after %s: lab %v, err %v", step, l, err)
			}
			checkGone(t, prefix)
		})
	}
	for _, o := range []Options{
		{Prefix: "Bad!"},
		{Prefix: "waytoolongprefix"},
		{Backends: MaxBackends + 1},
		{Clients: -1},
		{EchoPort: 70000},
		{Topology: Topology(7)},
	} {
		if l, err := Start(o); err == nil {
			l.Close()
			t.Errorf("Start(%+v) succeeded", o)
		}
	}
	checkGone(t, "Bad!")
	checkGone(t, "waytoolongprefix")
}

// A second lab with a prefix already in use fails and must not remove the
// first lab's namespaces.
func TestPrefixCollisionKeepsOtherLab(t *testing.T) {
	first := New(t, Options{Backends: 1})
	if l, err := Start(Options{Backends: 1, Prefix: first.Prefix}); err == nil {
		l.Close()
		t.Fatal("second lab with the same prefix started")
	}
	for _, h := range first.Hosts() {
		if _, err := os.Stat(h.Path); err != nil {
			t.Errorf("first lab lost %s: %v", h.NS, err)
		}
	}
	if err := testnet.WaitTCP(first.Client(), first.EchoAddr(0), waitLong); err != nil {
		t.Fatal(err)
	}
}

func TestCommandRunsInNamespace(t *testing.T) {
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter not installed")
	}
	l := New(t, Options{Topology: TwoArm, Backends: 1})
	out, err := l.XLB.Command(longCtx(t), "cat", "/proc/self/net/dev").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "eth1:") || strings.Contains(string(out), l.Prefix) {
		t.Errorf("xlb's /proc/self/net/dev:\n%s", out)
	}
}

// AddClientAddresses refuses a count outside 1…testnet.MaxClientExtraIPs
// before it touches the lab.
func TestAddClientAddressesBounds(t *testing.T) {
	for _, n := range []int{0, -1, testnet.MaxClientExtraIPs + 1} {
		if _, err := (&Lab{}).AddClientAddresses(n); err == nil {
			t.Errorf("AddClientAddresses(%d) accepted", n)
		}
	}
}

// AddXLBAddresses refuses a count outside 1…testnet.MaxExtraIPs before it
// touches the lab.
func TestAddXLBAddressesBounds(t *testing.T) {
	for _, n := range []int{0, -1, testnet.MaxExtraIPs + 1} {
		if _, err := (&Lab{}).AddXLBAddresses(n); err == nil {
			t.Errorf("AddXLBAddresses(%d) accepted", n)
		}
	}
}
