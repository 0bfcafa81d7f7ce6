package daemon

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/bgp"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// The speaker's prefixes: every service address once as a /32 with
// announce: [listen], then the configured prefixes.
func TestBGPPrefixes(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")
	extra := netip.MustParsePrefix("203.0.113.0/28")
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name  string
		c     config.BGP
		addrs []netip.Addr
		want  []netip.Prefix
	}{
		{"one service", config.BGP{AnnounceListen: true}, []netip.Addr{a}, []netip.Prefix{p("192.0.2.10/32")}},
		{"two services, one address shared", config.BGP{AnnounceListen: true, Announce: []netip.Prefix{extra}}, []netip.Addr{a, b, a},
			[]netip.Prefix{p("192.0.2.10/32"), p("192.0.2.11/32"), extra}},
		{"no listen entry", config.BGP{Announce: []netip.Prefix{extra}}, []netip.Addr{a, b}, []netip.Prefix{extra}},
	} {
		if got := bgpPrefixes(&tc.c, tc.addrs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The verdict (issue 29 item 5): a service that loses readiness (its
// last backend) withdraws only its own address; a drained or shutting
// down instance announces nothing.
func TestBGPVerdict(t *testing.T) {
	web, apiAddr := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")
	prefixes := bgpPrefixes(&config.BGP{AnnounceListen: true}, []netip.Addr{web, apiAddr})
	ready := map[string]bool{"web": true, "api": true}
	input := func(*snapshot.Snapshot, time.Time) []bgp.ServiceReadiness {
		return []bgp.ServiceReadiness{{Name: "web", Address: web, Ready: ready["web"]}, {Name: "api", Address: apiAddr, Ready: ready["api"]}}
	}
	now := time.Now()
	s := &snapshot.Snapshot{Lifecycle: api.Running}
	if got := bgpVerdict(s, now, prefixes, input); !reflect.DeepEqual(got, prefixes) {
		t.Errorf("both ready: %v, want %v", got, prefixes)
	}
	ready["api"] = false
	if got, want := bgpVerdict(s, now, prefixes, input), prefixes[:1]; !reflect.DeepEqual(got, want) {
		t.Errorf("api without backends: %v, want %v", got, want)
	}
	ready["api"] = true
	for _, s := range []*snapshot.Snapshot{{Lifecycle: api.Running, Drained: true}, {Lifecycle: api.ShuttingDown}} {
		if got := bgpVerdict(s, now, prefixes, input); len(got) != 0 {
			t.Errorf("drained %v, lifecycle %s: %v, want nothing", s.Drained, s.Lifecycle, got)
		}
	}
}
