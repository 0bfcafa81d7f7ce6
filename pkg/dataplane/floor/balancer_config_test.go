package floor_test

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/dataplane/floor"
)

// TestBalancerRefusesConfig: what the program cannot serve is refused
// before anything loads, with ErrBalancerConfig.
func TestBalancerRefusesConfig(t *testing.T) {
	good := func() floor.BalancerConfig {
		return floor.BalancerConfig{VIP: dt.ListenIP, SNAT: dt.ListenIP, Client: dt.ClientIP, Port: 80,
			SelfMAC: dt.MAC(dt.ListenIP), ClientMAC: dt.MAC(dt.ClientIP),
			Backends: []floor.BalancerBackend{{IP: dt.OneArmBackends[0], Port: 8080, MAC: dt.MAC(dt.OneArmBackends[0])}}}
	}
	many := make([]floor.BalancerBackend, floor.MaxBalancerBackends+1)
	for i := range many {
		many[i] = good().Backends[0]
	}
	cases := map[string]func(*floor.BalancerConfig){
		"IPv6 VIP":          func(c *floor.BalancerConfig) { c.VIP = netip.MustParseAddr("2001:db8::10") },
		"no SNAT":           func(c *floor.BalancerConfig) { c.SNAT = netip.Addr{} },
		"4in6 client":       func(c *floor.BalancerConfig) { c.Client = netip.AddrFrom16(dt.ClientIP.As16()) },
		"port 0":            func(c *floor.BalancerConfig) { c.Port = 0 },
		"no backends":       func(c *floor.BalancerConfig) { c.Backends = nil },
		"too many backends": func(c *floor.BalancerConfig) { c.Backends = many },
		"short self MAC":    func(c *floor.BalancerConfig) { c.SelfMAC = net.HardwareAddr{2, 0, 0} },
		"no client MAC":     func(c *floor.BalancerConfig) { c.ClientMAC = nil },
		"backend port 0":    func(c *floor.BalancerConfig) { c.Backends[0].Port = 0 },
		"backend IPv6":      func(c *floor.BalancerConfig) { c.Backends[0].IP = netip.MustParseAddr("2001:db8::20") },
		"backend EUI-64":    func(c *floor.BalancerConfig) { c.Backends[0].MAC = make(net.HardwareAddr, 8) },
	}
	for name, mod := range cases {
		c := good()
		mod(&c)
		b, err := floor.LoadBalancer(c)
		if !errors.Is(err, floor.ErrBalancerConfig) {
			if b != nil {
				b.Close()
			}
			t.Errorf("%s: err %v, want ErrBalancerConfig", name, err)
		}
	}
}

// TestBalancerBackendIndexRange: every client port maps into 0..n-1 for
// every backend count the program takes, and -1 without backends.
func TestBalancerBackendIndexRange(t *testing.T) {
	var c floor.BalancerConfig
	if got := c.BackendIndex(1); got != -1 {
		t.Fatalf("no backends: %d, want -1", got)
	}
	for n := 1; n <= floor.MaxBalancerBackends; n++ {
		c.Backends = make([]floor.BalancerBackend, n)
		seen := make([]bool, n)
		for p := 0; p <= 0xffff; p++ {
			i := c.BackendIndex(uint16(p))
			if i < 0 || i >= n {
				t.Fatalf("%d backends, port %d: index %d", n, p, i)
			}
			seen[i] = true
		}
		for i, ok := range seen {
			if !ok {
				t.Errorf("%d backends: no port maps to backend %d", n, i)
			}
		}
	}
}
