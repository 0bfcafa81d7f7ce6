package bgp

import (
	"net/netip"
	"reflect"
	"testing"
)

// TestAnnounceInstance is the instance-wide part of the announce rule
// (issue 15): drained × shutting down × the one service ready → the
// prefixes announced. Only a ready service of an instance neither drained
// nor shutting down announces.
func TestAnnounceInstance(t *testing.T) {
	listen, extra := netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("203.0.113.0/28")
	prefixes := []netip.Prefix{listen, extra}
	for _, tt := range []struct {
		drained, shuttingDown, ready bool
		want                         []netip.Prefix
	}{
		{false, false, true, prefixes},
		{false, false, false, nil},
		{false, true, true, nil},
		{false, true, false, nil},
		{true, false, true, nil},
		{true, false, false, nil},
		{true, true, true, nil},
		{true, true, false, nil},
	} {
		got := Announce(tt.drained, tt.shuttingDown, prefixes, []ServiceReadiness{{"web", listen.Addr(), tt.ready}})
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("drained=%v shutting_down=%v ready=%v: %v, want %v", tt.drained, tt.shuttingDown, tt.ready, got, tt.want)
		}
	}
}

// TestAnnounceServices is the per-service rule of DESIGN §9 (issue 29
// item 5): a service's address while some service on it is ready; a
// service that loses its last backend withdraws only its own address;
// bgp.announce prefixes while any service is ready; Options.Prefixes'
// order kept.
func TestAnnounceServices(t *testing.T) {
	p := netip.MustParsePrefix
	web, api, extra := p("192.0.2.10/32"), p("192.0.2.11/32"), p("203.0.113.0/28")
	prefixes := []netip.Prefix{web, api, extra}
	svc := func(name string, pfx netip.Prefix, ready bool) ServiceReadiness {
		return ServiceReadiness{Name: name, Address: pfx.Addr(), Ready: ready}
	}
	for _, tt := range []struct {
		name     string
		services []ServiceReadiness
		want     []netip.Prefix
	}{
		{"both ready", []ServiceReadiness{svc("web", web, true), svc("api", api, true)}, prefixes},
		{"api not ready: only its address withdrawn", []ServiceReadiness{svc("web", web, true), svc("api", api, false)}, []netip.Prefix{web, extra}},
		{"web not ready", []ServiceReadiness{svc("web", web, false), svc("api", api, true)}, []netip.Prefix{api, extra}},
		{"none ready: the extra prefix too", []ServiceReadiness{svc("web", web, false), svc("api", api, false)}, nil},
		{"a shared address stays while one of its services is ready",
			[]ServiceReadiness{svc("web", web, false), svc("web-tls", web, true), svc("api", api, false)}, []netip.Prefix{web, extra}},
		{"a shared address goes with its last ready service",
			[]ServiceReadiness{svc("web", web, false), svc("web-tls", web, false), svc("api", api, true)}, []netip.Prefix{api, extra}},
		{"order of the services does not count", []ServiceReadiness{svc("api", api, true), svc("web", web, true)}, prefixes},
		{"no services", nil, nil},
	} {
		if got := Announce(false, false, prefixes, tt.services); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestRoutes: an established peer holds the announced prefixes, a peer
// whose session is down none; each peer gets its own copy.
func TestRoutes(t *testing.T) {
	prefixes := []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32")}
	a, b := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")
	got := Routes(prefixes, []PeerState{{a, true}, {b, false}})
	want := map[netip.Addr][]netip.Prefix{a: prefixes, b: nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Routes = %v, want %v", got, want)
	}
	got[a][0] = netip.MustParsePrefix("203.0.113.0/24")
	if prefixes[0] != netip.MustParsePrefix("192.0.2.10/32") {
		t.Errorf("Routes shares its result with the caller's prefixes")
	}
	if got := Routes(nil, []PeerState{{a, true}}); !reflect.DeepEqual(got, map[netip.Addr][]netip.Prefix{a: nil}) {
		t.Errorf("Routes(nothing announced) = %v", got)
	}
	if got := Routes(prefixes, nil); len(got) != 0 {
		t.Errorf("Routes(no peers) = %v, want empty", got)
	}
}
