package instance

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/test/lab"
)

// Issue 29: each service's address is resolved; an address on lo or on
// no interface is accepted (the network routes it here), interfaces
// default to those holding the addresses, else the default route's, and
// at most one service may be auto.
func TestResolveServices(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	extra := testnet.XLBExtraIP(0)
	vip := netip.MustParseAddr("198.51.100.77")
	routed := netip.MustParseAddr("203.0.113.7")
	if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(extra, 24)); err != nil {
		t.Fatal(err)
	}
	if err := l.XLB.AddAddress("lo", netip.PrefixFrom(vip, 32)); err != nil {
		t.Fatal(err)
	}
	base := labConfig(l)
	svc := func(name string, listen config.Listen) config.Service {
		return config.Service{Name: name, Listen: listen, Proto: "tcp", Ports: base.Ports,
			Scheduler: config.SchedulerRoundRobin, Provider: base.Provider}
	}
	cfg := func(ss ...config.Service) *config.Config {
		c := *base
		c.Listen, c.Ports, c.Provider = config.Listen{}, nil, config.Provider{}
		c.Form, c.Services, c.Interfaces = config.FormServices, ss, nil
		c.SNAT.IPs, c.SNAT.Auto = nil, true
		return &c
	}
	resolve := func(c *config.Config) (Resolved, error) {
		var r Resolved
		err := l.XLB.Do(func() error {
			var err error
			r, err = Resolve(c)
			return err
		})
		return r, err
	}

	r, err := resolve(cfg(svc("web", config.Listen{IP: l.XLB.IP()}), svc("api", config.Listen{IP: extra}),
		svc("vip", config.Listen{IP: vip}), svc("routed", config.Listen{IP: routed})))
	if err != nil {
		t.Fatal(err)
	}
	where := []string{}
	for _, s := range r.Services {
		where = append(where, s.Name+"="+s.Listen.String()+" ("+s.Where()+")")
	}
	want := []string{"web=192.0.2.10 (eth0)", "api=192.0.2.100 (eth0)", "vip=198.51.100.77 (lo: must be routed here)",
		"routed=203.0.113.7 (not an address of this host: must be routed here)"}
	if !slices.Equal(where, want) {
		t.Errorf("services %q, want %q", where, want)
	}
	if r.Listen != l.XLB.IP() || !slices.Equal(r.Interfaces, []string{"eth0"}) || !slices.Equal(r.SNAT, []netip.Addr{l.XLB.IP()}) {
		t.Errorf("listen %v interfaces %v snat %v; want the first service's address, eth0 and 192.0.2.10", r.Listen, r.Interfaces, r.SNAT)
	}

	// Only addresses on lo or routed here: the default route's interface.
	r, err = resolve(cfg(svc("vip", config.Listen{IP: vip}), svc("routed", config.Listen{IP: routed})))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Interfaces, []string{"eth0"}) {
		t.Errorf("interfaces %v, want the default route's eth0", r.Interfaces)
	}

	r, err = resolve(cfg(svc("vip", config.Listen{IP: vip}), svc("auto", config.Listen{Auto: true})))
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Services[1]; s.Listen != l.XLB.IP() || s.Where() != "auto: default route, eth0" {
		t.Errorf("auto service %+v (%s), want 192.0.2.10 on eth0", s, s.Where())
	}
	_, err = resolve(cfg(svc("a", config.Listen{Auto: true}), svc("b", config.Listen{Auto: true})))
	if err == nil || !strings.Contains(err.Error(), "services[1].listen: at most one service may use listen: auto") {
		t.Errorf("two auto services: %v, want services[1].listen refused", err)
	}
}
