package fleet

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/xlbproject/xlb/internal/testnet"
)

// TestNetwork brings up the fleet's network without containers, in about
// a second: the client reaches every host through the router, the router
// spreads the service address over the hosts with its resilient group,
// the backends answer with their banner, and nothing is left after Close.
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

	members, idle, err := l.Group()
	if err != nil || len(members) != len(l.Hosts) || idle != IdleTimer {
		t.Fatalf("group %v, idle timer %d, %v", members, idle, err)
	}
	for i, m := range members {
		if m.ID != l.Hosts[i].NexthopID || m.Weight != Weight {
			t.Errorf("member %d: %+v", i, m)
		}
	}
	buckets, err := l.Buckets()
	total := 0
	for _, n := range buckets {
		total += n
	}
	if err != nil || total != Buckets {
		t.Errorf("buckets %v, %v", buckets, err)
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
