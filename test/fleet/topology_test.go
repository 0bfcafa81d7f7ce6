package fleet

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
)

// TestNetwork brings up the fleet's network without containers, in about
// a second: the client reaches every host through the router, bird runs in
// the router waiting for the hosts' sessions, a multipath route like the
// one bird installs carries the service address to the hosts, the
// backends answer with their banner, and nothing is left after Close.
func TestNetwork(t *testing.T) {
	testnet.RequireRoot(t)
	l, err := Start(Options{Logf: t.Logf, networkOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if left, err := testnet.Leftovers(l.Prefix); err != nil || len(left) > 0 {
			t.Errorf("left behind: %v, %v", left, err)
		}
	}()
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, h := range l.Hosts {
		if mode, err := l.LAN.XDPAttachMode(l.net.LinkName(hostPort(h))); err != nil || mode != nl.XDP_ATTACHED_DRV {
			t.Errorf("%s: XDP on its bridge port %d, %v; want native", h.Inventory, mode, err)
		}
		if on, err := h.TxChecksum("eth0"); err != nil || on {
			t.Errorf("%s: tx checksum on=%v, %v", h.Inventory, on, err)
		}
		// The service address on lo, as the role's xlb-vip.service puts it.
		lo, err := h.Netlink().LinkByName("lo")
		if err == nil {
			err = h.Netlink().AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: VIP.AsSlice(), Mask: net.CIDRMask(32, 32)}})
		}
		if err != nil {
			t.Fatal(err)
		}
		name := h.Inventory
		if _, err := h.Serve(":"+strconv.Itoa(ServicePort), func(c *testnet.Conn) error {
			_, err := io.WriteString(c, name+"\n")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// Client → router → host and back.
		if err := testnet.WaitTCP(l.Client, netip.AddrPortFrom(h.Addr, ServicePort).String(), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// bird waits for the hosts (passive), its kernel protocol up; no
	// route to the VIP while nobody announces it.
	out, err := l.Bird.Birdc("show", "protocols")
	if err != nil || !regexp.MustCompile(`kernel1\s+Kernel\s+master4\s+up`).MatchString(out) {
		t.Errorf("bird's protocols (%v):\n%s", err, out)
	}
	for _, h := range l.Hosts {
		if s := l.Bird.Session(h.Inventory); s.State == "" || s.State == birdtest.Established {
			t.Errorf("bird's session with %s: %q, want one waiting for the host:\n%s", h.Inventory, s.State, s.Out)
		}
	}
	if paths, err := l.KernelPaths(); err != nil || len(paths) != 0 {
		t.Errorf("router's route to the VIP before any announcement: %v, %v", paths, err)
	}
	// A multipath route as bird installs it (merge paths: one next hop
	// per host, weight 1).
	eth1, _ := l.Router.Iface("eth1")
	var nhs []*netlink.NexthopInfo
	for _, h := range l.Hosts {
		nhs = append(nhs, &netlink.NexthopInfo{Gw: h.Addr.AsSlice(), LinkIndex: eth1.Index})
	}
	if err := l.Router.Netlink().RouteAdd(&netlink.Route{
		Dst: &net.IPNet{IP: VIP.AsSlice(), Mask: net.CIDRMask(32, 32)}, MultiPath: nhs,
	}); err != nil {
		t.Fatal(err)
	}
	if paths, err := l.KernelPaths(); err != nil || !slices.Equal(paths, hostAddrs(l.Hosts...)) {
		t.Errorf("router's route to the VIP: %v, %v; want %v", paths, err, hostAddrs(l.Hosts...))
	}

	// The client reaches the service address: some host answers.
	c, err := l.Client.Dial(ctx, netip.AddrPortFrom(VIP, ServicePort).String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if err != nil || len(line) < 4 || line[:3] != "xlb" {
		t.Errorf("service answered %q, %v", line, err)
	}

	// A host reaches each backend, which names itself and the host.
	for _, b := range l.Backends {
		bc, err := l.Hosts[0].DialFrom(ctx, 0, netip.AddrPortFrom(b.Addr, BackendPort).String())
		if err != nil {
			t.Fatal(err)
		}
		conn := &conn{c: bc, r: bufio.NewReader(bc)}
		banner, err := conn.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if host, err := bannerHost(banner); err != nil || host != l.Hosts[0].Addr {
			t.Errorf("banner %q: host %v, %v", banner, host, err)
		}
		if err := conn.exchange("ping\n", 30*time.Second); err != nil {
			t.Error(err)
		}
		bc.Close()
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
