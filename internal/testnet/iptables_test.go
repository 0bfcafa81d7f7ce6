package testnet

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// natLab is a client, a balancer host (XLBFrontIP) and two backends on
// one bridge; each backend runs a TCP echo on 8080 and a UDP named echo
// (b0, b1) on 5353.
type natLab struct {
	client, nat *Host
	servers     []*Server
	udpServers  []*UDPServer
}

func newNATLab(t *testing.T) natLab {
	t.Helper()
	tn := newTopology(t)
	var l natLab
	var lan *Host
	var backends []*Host
	on := func(ip netip.Addr) netip.Prefix { return netip.PrefixFrom(ip, 24) }
	err := tn.Build([]Step{
		{Name: "hosts", Run: func() (err error) {
			for _, h := range []**Host{&lan, &l.client, &l.nat} {
				if *h, err = tn.AddHost(fmt.Sprintf("h%d", len(tn.Hosts()))); err != nil {
					return err
				}
			}
			for i := range 2 {
				b, err := tn.AddHost(fmt.Sprintf("b%d", i))
				if err != nil {
					return err
				}
				backends = append(backends, b)
			}
			return nil
		}},
		{Name: "links", Run: func() error {
			if err := tn.AddBridge(lan, "br", nil); err != nil {
				return err
			}
			if _, err := tn.Attach(l.client, "eth0", on(ClientIP(0)), lan, "c"); err != nil {
				return err
			}
			if _, err := tn.Attach(l.nat, "eth0", on(XLBFrontIP), lan, "x"); err != nil {
				return err
			}
			for i, b := range backends {
				if _, err := tn.Attach(b, "eth0", on(OneArmBackendIP(i)), lan, fmt.Sprint("b", i)); err != nil {
					return err
				}
			}
			return nil
		}},
		{Name: "servers", Run: func() error {
			for i, b := range backends {
				s, err := b.Serve(":8080", Echo)
				if err != nil {
					return err
				}
				u, err := b.ServeUDP(":5353", UDPNameEcho(fmt.Sprint("b", i)))
				if err != nil {
					return err
				}
				l.servers, l.udpServers = append(l.servers, s), append(l.udpServers, u)
			}
			return nil
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// backends are the backends' addresses at port.
func natBackends(port uint16) []netip.AddrPort {
	return []netip.AddrPort{netip.AddrPortFrom(OneArmBackendIP(0), port), netip.AddrPortFrom(OneArmBackendIP(1), port)}
}

// checkTCP: n connections through the balancer at XLBFrontIP:80 all
// reach a backend, from the balancer's address, and both backends get
// some.
func (l natLab) checkTCP(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		if err := l.client.EchoCheck(netip.AddrPortFrom(XLBFrontIP, 80).String(), []byte("through the NAT"), waitLong); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	total := 0
	for i, s := range l.servers {
		st := s.Stats()
		if st.Accepted == 0 || len(st.Remotes) != 1 || st.Remotes[XLBFrontIP] != st.Accepted {
			t.Fatalf("backend %d: %d accepted from %v; want some, all from %v", i, st.Accepted, st.Remotes, XLBFrontIP)
		}
		total += st.Accepted
	}
	if total != n {
		t.Fatalf("%d of %d connections reached a backend", total, n)
	}
}

// checkUDP: n client ports exchange through the balancer at
// XLBFrontIP:53; every reply comes from there (a connected socket takes
// no other) with a backend's name and the request, each port keeps its
// backend, and both backends get some ports, all from the balancer's
// address.
func (l natLab) checkUDP(t *testing.T, n int) {
	t.Helper()
	picked := map[string]int{}
	for i := range n {
		c, err := l.client.DialUDP(netip.AddrPortFrom(netip.Addr{}, uint16(20000+i)), netip.AddrPortFrom(XLBFrontIP, 53).String())
		if err != nil {
			t.Fatal(err)
		}
		first := ""
		for x := range 3 {
			req := fmt.Sprintf("q%d.%d", i, x)
			var got []byte
			for try := 0; ; try++ { // the first datagram may wait for ARP
				if got, err = UDPExchange(c, []byte(req), time.Second); err == nil || try == 10 {
					break
				}
			}
			name, rest, ok := strings.Cut(string(got), UDPNameSep)
			if err != nil || !ok || rest != req {
				c.Close()
				t.Fatalf("port %d exchange %d: %q, %v", 20000+i, x, got, err)
			}
			if first == "" {
				first = name
			} else if name != first {
				t.Errorf("port %d: answered by %s, then %s", 20000+i, first, name)
			}
		}
		c.Close()
		picked[first]++
	}
	if picked["b0"] == 0 || picked["b1"] == 0 || picked["b0"]+picked["b1"] != n {
		t.Errorf("ports per backend %v, want both of %d", picked, n)
	}
	for i, u := range l.udpServers {
		for from := range u.Stats().Peers {
			if from.Addr() != XLBFrontIP {
				t.Errorf("backend %d: a datagram from %v, want %v", i, from, XLBFrontIP)
			}
		}
	}
}

// The kernel NAT balancer spreads connections over the backends, which
// see the balancer's address as the source; with proto udp, datagrams.
func TestNATBalancer(t *testing.T) {
	l := newNATLab(t)
	if err := l.nat.NATBalancer(netip.AddrPortFrom(XLBFrontIP, 80), natBackends(8080)); err != nil {
		t.Fatal(err)
	}
	if err := l.nat.NATBalancerProto(netip.AddrPortFrom(XLBFrontIP, 53), natBackends(5353), "udp"); err != nil {
		t.Fatal(err)
	}
	l.checkTCP(t, 40)
	l.checkUDP(t, 40)
}

// The nftables balancer (kube-proxy's nftables mode; issue 31) does the
// same for TCP and UDP.
func TestNFTBalancer(t *testing.T) {
	l := newNATLab(t)
	if err := l.nat.NFTBalancer(netip.AddrPortFrom(XLBFrontIP, 80), natBackends(8080), "tcp"); err != nil {
		t.Fatal(err)
	}
	if err := l.nat.NFTBalancer(netip.AddrPortFrom(XLBFrontIP, 53), natBackends(5353), "udp"); err != nil {
		t.Fatal(err)
	}
	l.checkTCP(t, 40)
	l.checkUDP(t, 40)
}
