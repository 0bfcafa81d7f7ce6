package testnet

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// A bridge with two attached endpoints and a router-like host with a
// direct pair: names, MACs, XDP, offload and routes as asked, TCP across
// the bridge and through the pair, and nothing left after Close.
func TestTopology(t *testing.T) {
	tn := newTopology(t)
	prefix := tn.Prefix
	var lan, cli, srv, rtr *Host
	var ran []string
	err := tn.Build([]Step{
		{Name: "hosts", Run: func() (err error) {
			for _, h := range []struct {
				p    **Host
				role string
			}{{&lan, "lan"}, {&cli, "cli"}, {&srv, "srv"}, {&rtr, "rtr"}} {
				if *h.p, err = tn.AddHost(h.role); err != nil {
					return err
				}
			}
			return nil
		}},
		{Name: "bridge", Run: func() error { return tn.AddBridge(lan, "br", nil) }},
		{Name: "links", Run: func() error {
			if _, err := tn.Attach(cli, "eth0", netip.MustParsePrefix("192.0.2.20/24"), lan, "c"); err != nil {
				return err
			}
			if _, err := tn.Attach(srv, "eth0", netip.MustParsePrefix("192.0.2.31/24"), lan, "s"); err != nil {
				return err
			}
			return tn.Pair(rtr, "eth0", netip.MustParsePrefix("203.0.113.1/24"), cli, "eth1", netip.MustParsePrefix("203.0.113.10/24"))
		}},
		{Name: "tuning", Run: func() error {
			return errors.Join(lan.AttachXDPPass(tn.LinkName("c"), tn.LinkName("s")),
				cli.SetTxChecksum(false, "eth0"), rtr.AddDefaultRoute("eth0", OuterClientIP))
		}},
	}, func(step string, _ time.Duration) error { ran = append(ran, step); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ran, ",") != "hosts,bridge,links,tuning" {
		t.Errorf("steps ran: %v", ran)
	}
	if got := len(tn.Hosts()); got != 4 {
		t.Errorf("%d hosts", got)
	}
	if lan.Bridge != prefix+"-br" || cli.NS != prefix+"-cli" || cli.Path != NetnsDir+"/"+prefix+"-cli" {
		t.Errorf("names: bridge %s, ns %s, path %s", lan.Bridge, cli.NS, cli.Path)
	}
	if _, err := os.Stat(cli.Path); err != nil {
		t.Error(err)
	}
	c0, _ := cli.Iface("eth0")
	c1, _ := cli.Iface("eth1")
	if c0.LAN != lan || c0.Peer != prefix+"-c" || !bytes.Equal(c0.MAC, EndpointMAC(cli.IP())) || !bytes.Equal(c0.PeerMAC, PeerMAC(cli.IP())) {
		t.Errorf("cli eth0 %+v", c0)
	}
	if c1.LAN != rtr || c1.Peer != "eth0" || !bytes.Equal(c1.PeerMAC, rtr.MAC()) || rtr.Ifaces[0].PeerIndex != c1.Index {
		t.Errorf("cli eth1 %+v, rtr eth0 %+v", c1, rtr.Ifaces[0])
	}
	for _, i := range append(cli.Ifaces, srv.Ifaces...) {
		h := i.LAN
		link, err := h.Netlink().LinkByIndex(i.PeerIndex)
		if err != nil || link.Attrs().Name != i.Peer || !bytes.Equal(link.Attrs().HardwareAddr, i.PeerMAC) {
			t.Errorf("peer of %s: %v, %v", i.Name, link, err)
		}
	}
	if mode, err := lan.XDPAttachMode(c0.Peer); err != nil || mode != nl.XDP_ATTACHED_DRV {
		t.Errorf("XDP on %s: %d, %v", c0.Peer, mode, err)
	}
	if on, err := cli.TxChecksum("eth0"); err != nil || on {
		t.Errorf("tx checksum on=%v, %v", on, err)
	}
	if on, err := srv.TxChecksum("eth0"); err != nil || !on {
		t.Errorf("untouched tx checksum on=%v, %v", on, err)
	}
	routes, err := rtr.Netlink().RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	if !hasDefaultVia(routes, OuterClientIP) {
		t.Errorf("rtr routes %v", routes)
	}

	// TCP across the bridge, and over the pair.
	for _, c := range []struct {
		from, to *Host
		addr     string
	}{{cli, srv, "192.0.2.31:7"}, {rtr, cli, "203.0.113.10:7"}} {
		s, err := c.to.Serve(":7", Echo)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.from.EchoCheck(c.addr, []byte("hello through "+c.to.Name), waitLong); err != nil {
			t.Errorf("%s -> %s: %v", c.from.Name, c.addr, err)
		}
		if st, err := s.WaitCompleted(longCtx(t), 1); err != nil || st.Remotes[c.from.IP()] != 1 {
			t.Errorf("%s stats %+v, %v", c.to.Name, st, err)
		}
	}
	if err := tn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tn.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func hasDefaultVia(routes []netlink.Route, gw netip.Addr) bool {
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw.Equal(net.IP(gw.AsSlice())) {
			return true
		}
	}
	return false
}

// A failing step stops the build, names the step, runs the OnClose
// functions and removes every namespace already created.
func TestBuildFailureLeavesNothing(t *testing.T) {
	tn := newTopology(t)
	prefix := tn.Prefix
	undone := false
	tn.OnClose(func() error { undone = true; return nil })
	boom := errors.New("boom")
	err := tn.Build([]Step{
		{Name: "hosts", Run: func() error {
			a, err := tn.AddHost("a")
			if err == nil {
				err = tn.AddBridge(a, "br", nil)
			}
			return err
		}},
		{Name: "fails", Run: func() error { return boom }},
		{Name: "never", Run: func() error { t.Error("step after the failure ran"); return nil }},
	}, nil)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), prefix+": fails:") {
		t.Errorf("Build: %v", err)
	}
	if !undone {
		t.Error("OnClose function did not run")
	}
	checkGone(t, prefix)
}

// A namespace name in use is an error and the namespace is not touched.
func TestPrefixCollisionKeepsOther(t *testing.T) {
	p := newPair(t)
	second, err := New(Config{Prefix: p.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.AddHost("a"); err == nil {
		t.Error("second host PREFIX-a created")
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.a.Path); err != nil {
		t.Errorf("first topology lost %s: %v", p.a.NS, err)
	}
	if _, err := p.b.Serve(":7", Echo); err != nil {
		t.Fatal(err)
	}
	if err := WaitTCP(p.a, "192.0.2.31:7", waitLong); err != nil {
		t.Fatal(err)
	}
}

func TestPrefixes(t *testing.T) {
	for _, bad := range []string{"", "Bad!", "waytoolongprefix", "a-b"} {
		if _, err := New(Config{Prefix: bad}); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	p, err := RandomPrefix("xt")
	if err != nil || len(p) != 8 || !strings.HasPrefix(p, "xt") {
		t.Errorf("RandomPrefix: %q, %v", p, err)
	}
	if _, err := RandomPrefix("x"); err == nil {
		t.Error("RandomPrefix with a 1-character base accepted")
	}
}

// An added address answers like the first one (ARP included).
func TestAddAddress(t *testing.T) {
	p := newPair(t)
	extra := XLBExtraIP(0)
	if err := p.b.AddAddress("eth0", netip.PrefixFrom(extra, 24)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.b.Serve(":8080", Echo); err != nil {
		t.Fatal(err)
	}
	if err := p.a.EchoCheck(netip.AddrPortFrom(extra, 8080).String(), []byte("hello"), waitLong); err != nil {
		t.Fatal(err)
	}
}
