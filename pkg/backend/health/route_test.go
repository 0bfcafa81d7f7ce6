package health

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
)

// anycast is the backend address both backends of routeLab serve.
var anycast = netip.MustParseAddr("203.0.113.50")

const anycastPort = 8080

// arrival is one connection a routeLab backend accepted.
type arrival struct {
	backend string // "b0" or "b1"
	from    netip.Addr
}

// routeLab is host a with two ways to one backend address: eth0
// (192.0.2.20/24, plus 192.0.2.21) to b0 (192.0.2.31), the preferred route
// (metric 100), and eth1 (198.51.100.1/24) to b1 (198.51.100.11), the
// other (metric 200). b0 and b1 both serve anycast:8080 and report every
// connection on arrivals, so a test sees which way a check went and from
// which address.
type routeLab struct {
	a        *testnet.Host
	arrivals chan arrival
}

func newRouteLab(t *testing.T) routeLab {
	t.Helper()
	tn := testnet.NewForTest(t, "hc")
	lab := routeLab{arrivals: make(chan arrival, 100)}
	var b0, b1 *testnet.Host
	a0, a1 := testnet.ClientIP(0), testnet.XLBBackIP
	gw0, gw1 := testnet.OneArmBackendIP(0), testnet.TwoArmBackendIP(0)
	err := tn.Build([]testnet.Step{
		{Name: "hosts", Run: func() (err error) {
			if lab.a, err = tn.AddHost("a"); err != nil {
				return err
			}
			if b0, err = tn.AddHost("b0"); err != nil {
				return err
			}
			b1, err = tn.AddHost("b1")
			return err
		}},
		{Name: "links", Run: func() error {
			if err := tn.Pair(lab.a, "eth0", netip.PrefixFrom(a0, 24), b0, "eth0", netip.PrefixFrom(gw0, 24)); err != nil {
				return err
			}
			if err := tn.Pair(lab.a, "eth1", netip.PrefixFrom(a1, 24), b1, "eth0", netip.PrefixFrom(gw1, 24)); err != nil {
				return err
			}
			return lab.a.AddAddress("eth0", netip.PrefixFrom(testnet.ClientIP(1), 24))
		}},
		{Name: "routes", Run: func() error {
			for _, b := range []struct {
				h  *testnet.Host
				gw netip.Addr
			}{{b0, a0}, {b1, a1}} {
				if err := b.h.AddAddress("lo", netip.PrefixFrom(anycast, 32)); err != nil {
					return err
				}
				if err := b.h.AddDefaultRoute("eth0", b.gw); err != nil {
					return err
				}
			}
			if err := addHostRoute(lab.a, "eth0", gw0, 100); err != nil {
				return err
			}
			return addHostRoute(lab.a, "eth1", gw1, 200)
		}},
		{Name: "rp_filter off in a", Run: func() error {
			return lab.a.Do(func() error {
				for _, k := range []string{"all", "eth0", "eth1"} {
					if err := testnet.Sysctl("net.ipv4.conf."+k+".rp_filter", "0"); err != nil {
						return err
					}
				}
				return nil
			})
		}},
		{Name: "servers", Run: func() error {
			for name, h := range map[string]*testnet.Host{"b0": b0, "b1": b1} {
				ln, err := h.Listen(netip.AddrPortFrom(anycast, anycastPort).String())
				if err != nil {
					return err
				}
				tn.OnClose(ln.Close)
				go lab.serve(name, ln)
			}
			return nil
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return lab
}

// addHostRoute adds anycast/32 via gw out of ifname with metric in h.
func addHostRoute(h *testnet.Host, ifname string, gw netip.Addr, metric int) error {
	link, err := h.Netlink().LinkByName(ifname)
	if err != nil {
		return err
	}
	return h.Netlink().RouteAdd(&netlink.Route{
		LinkIndex: link.Attrs().Index,
		Dst:       &net.IPNet{IP: anycast.AsSlice(), Mask: net.CIDRMask(32, 32)},
		Gw:        gw.AsSlice(),
		Priority:  metric,
	})
}

func (l routeLab) serve(name string, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		from := netip.MustParseAddrPort(c.RemoteAddr().String()).Addr()
		c.Close()
		l.arrivals <- arrival{name, from}
	}
}

// next is the next connection a backend accepted.
func (l routeLab) next(t *testing.T) arrival {
	t.Helper()
	return receive(t, l.arrivals, "connection at a backend")
}

// TestCheckRoute: a check leaves by Target.Interface (SO_BINDTODEVICE)
// from Target.Source, not by the host's preferred route; without them
// routing decides. Then a running checker follows SetTarget.
func TestCheckRoute(t *testing.T) {
	lab := newRouteLab(t)
	cfg := tcpCheck(time.Second, 2*time.Second, 1, 1)
	dst := Target{IP: anycast, Port: anycastPort}
	with := func(src netip.Addr, ifname string) Target {
		t := dst
		t.Source, t.Interface = src, ifname
		return t
	}
	for _, tc := range []struct {
		name   string
		target Target
		want   arrival
	}{
		{"routing decides", dst, arrival{"b0", testnet.ClientIP(0)}},
		{"interface eth1", with(netip.Addr{}, "eth1"), arrival{"b1", testnet.XLBBackIP}},
		{"interface eth1, source 198.51.100.1", with(testnet.XLBBackIP, "eth1"), arrival{"b1", testnet.XLBBackIP}},
		{"source 192.0.2.21", with(testnet.ClientIP(1), ""), arrival{"b0", testnet.ClientIP(1)}},
		{"interface eth0, source 192.0.2.21", with(testnet.ClientIP(1), "eth0"), arrival{"b0", testnet.ClientIP(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := lab.a.Do(func() error { return probe(context.Background(), cfg, tc.target, cfg.Timeout) })
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if got := lab.next(t); got != tc.want {
				t.Errorf("arrived %+v, want %+v", got, tc.want)
			}
		})
	}

	t.Run("SetTarget on a running checker", func(t *testing.T) {
		c := New(tcpCheck(100*time.Millisecond, 50*time.Millisecond, 1, 1), dst, nil, Options{Log: testLog(t)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- lab.a.Do(func() error { c.Run(ctx); return nil }) }()
		defer func() { cancel(); <-done }()
		if got := lab.next(t); got.backend != "b0" {
			t.Fatalf("first check arrived at %+v", got)
		}
		c.SetTarget(with(testnet.XLBBackIP, "eth1"))
		deadline := time.Now().Add(waitLong)
		for {
			// Checks already started toward b0 may still arrive there.
			got := lab.next(t)
			if got.backend == "b1" {
				if got.from != testnet.XLBBackIP {
					t.Errorf("check after SetTarget from %v", got.from)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("checks kept going to b0 after SetTarget")
			}
		}
		// Every later check goes to b1.
		for range 3 {
			if got := lab.next(t); got.backend != "b1" {
				t.Errorf("a later check arrived at %+v", got)
			}
		}
	})
}
