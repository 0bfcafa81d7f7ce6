package testnet

import (
	"fmt"
	"net/netip"
	"testing"
)

// The kernel NAT balancer spreads connections over the backends, which
// see the balancer's address as the source.
func TestNATBalancer(t *testing.T) {
	tn := newTopology(t)
	var lan, client, nat *Host
	var backends []*Host
	var servers []*Server
	on := func(ip netip.Addr) netip.Prefix { return netip.PrefixFrom(ip, 24) }
	err := tn.Build([]Step{
		{Name: "hosts", Run: func() (err error) {
			for _, h := range []**Host{&lan, &client, &nat} {
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
			if _, err := tn.Attach(client, "eth0", on(ClientIP(0)), lan, "c"); err != nil {
				return err
			}
			if _, err := tn.Attach(nat, "eth0", on(XLBFrontIP), lan, "x"); err != nil {
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
			for _, b := range backends {
				s, err := b.Serve(":8080", Echo)
				if err != nil {
					return err
				}
				servers = append(servers, s)
			}
			return nil
		}},
		{Name: "nat", Run: func() error {
			return nat.NATBalancer(netip.AddrPortFrom(XLBFrontIP, 80),
				[]netip.AddrPort{netip.AddrPortFrom(OneArmBackendIP(0), 8080), netip.AddrPortFrom(OneArmBackendIP(1), 8080)})
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		if err := client.EchoCheck(netip.AddrPortFrom(XLBFrontIP, 80).String(), []byte("through the NAT"), waitLong); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	total := 0
	for i, s := range servers {
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
