package bgp

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/pkg/config"
)

var (
	vip  = netip.MustParsePrefix("192.0.2.10/32")
	vip2 = netip.MustParsePrefix("192.0.2.11/32") // a second service's address
	peer = netip.MustParseAddr("198.51.100.254")
	self = netip.MustParseAddr("198.51.100.253")
)

// options is a valid Options with one peer and the given password_env.
func options(passwordEnv string) Options {
	log, _ := test.NewNullLogger()
	return Options{
		Config: config.BGP{
			LocalASN: 64512, HoldTime: 9 * time.Second, GracefulRestart: 120 * time.Second, AnnounceListen: true,
			Peers: []config.BGPPeer{{Address: peer, ASN: 64513, Port: 179, PasswordEnv: passwordEnv}},
		},
		RouterID: vip.Addr(),
		Prefixes: []netip.Prefix{vip},
		NextHop:  func(netip.Addr) (netip.Addr, error) { return self, nil },
		Log:      log,
		Password: func(string) string { return "" },
	}
}

// TestNewRefuses has one case per option New checks, the missing
// password first (issue 15: startup fails when it is empty).
func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		edit func(o *Options)
		want string
	}{
		{"password unset", func(o *Options) { *o = options("XLB_BGP_PASSWORD") },
			"bgp: bgp.peers[0] (198.51.100.254): password_env XLB_BGP_PASSWORD: the environment variable is empty or unset"},
		{"password too long", func(o *Options) {
			*o = options("XLB_BGP_PASSWORD")
			o.Password = func(string) string { return strings.Repeat("x", 81) }
		}, "bgp: bgp.peers[0] (198.51.100.254): password_env XLB_BGP_PASSWORD: the password is 81 bytes, TCP MD5 takes at most 80"},
		{"router id 0.0.0.0", func(o *Options) { o.RouterID = netip.IPv4Unspecified() }, "bgp: router id 0.0.0.0: want an IPv4 address other than 0.0.0.0"},
		{"IPv6 router id", func(o *Options) { o.RouterID = netip.MustParseAddr("2001:db8::1") }, "bgp: router id 2001:db8::1: want an IPv4 address other than 0.0.0.0"},
		{"no prefix", func(o *Options) { o.Prefixes = nil }, "bgp: no prefix to announce"},
		{"IPv6 prefix", func(o *Options) { o.Prefixes = []netip.Prefix{netip.MustParsePrefix("2001:db8::/64")} }, "bgp: prefix 2001:db8::/64: want an IPv4 prefix"},
		{"a prefix twice", func(o *Options) { o.Prefixes = []netip.Prefix{vip, vip} }, "bgp: prefix 192.0.2.10/32 given twice"},
		{"no peer", func(o *Options) { o.Config.Peers = nil }, "bgp: no peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options("")
			tt.edit(&o)
			if _, err := New(o); err == nil || err.Error() != tt.want {
				t.Errorf("New: error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestRouterIDAuto (issue 28, RFC 6286): without a configured router id
// the speaker takes this host's own address toward the first peer, not
// the listen address every host of the fleet shares; a configured one is
// used as it is.
func TestRouterIDAuto(t *testing.T) {
	second := netip.MustParseAddr("203.0.113.254")
	own := map[netip.Addr]netip.Addr{peer: self, second: netip.MustParseAddr("203.0.113.253")}
	for _, tt := range []struct {
		name       string
		configured netip.Addr
		want       netip.Addr
	}{
		{"auto: the address toward the first peer", netip.Addr{}, self},
		{"configured", netip.MustParseAddr("192.0.2.77"), netip.MustParseAddr("192.0.2.77")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := options("")
			o.RouterID = tt.configured
			o.Config.Peers = append(o.Config.Peers, config.BGPPeer{Address: second, ASN: 64514, Port: 179})
			o.NextHop = func(p netip.Addr) (netip.Addr, error) { return own[p], nil }
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer s.Stop(false)
			if got := s.RouterID(); got != tt.want {
				t.Errorf("RouterID = %v, want %v", got, tt.want)
			}
			g, err := s.srv.GetBgp(context.Background(), &api.GetBgpRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := g.GetGlobal().GetRouterId(); got != tt.want.String() {
				t.Errorf("GoBGP's router id = %s, want %v", got, tt.want)
			}
		})
	}
}

// The password comes from the environment variable password_env names,
// by default through os.Getenv.
func TestNewReadsPasswordFromEnvironment(t *testing.T) {
	t.Setenv("XLB_TEST_BGP_PASSWORD", "s3cret")
	o := options("XLB_TEST_BGP_PASSWORD")
	o.Password = nil
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.peer(o.Config.Peers[0]).GetConf().GetAuthPassword(); got != "s3cret" {
		t.Errorf("peer password = %q, want the environment's", got)
	}
}

// TestPeerDefinition pins what GoBGP is told about a peer: the hold time
// and a keepalive every third of it, graceful restart with the restart
// time and the Restart State bit, the local address from NextHop and the
// peer's port.
func TestPeerDefinition(t *testing.T) {
	o := options("")
	o.Config.HoldTime, o.Config.GracefulRestart, o.Config.Peers[0].Port = 30*time.Second, 300*time.Second, 1179
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if s.locals, err = s.localAddresses(); err != nil {
		t.Fatal(err)
	}
	p := s.peer(o.Config.Peers[0])
	if got := p.GetConf(); got.GetNeighborAddress() != "198.51.100.254" || got.GetPeerAsn() != 64513 || got.GetAuthPassword() != "" {
		t.Errorf("conf = %v", got)
	}
	if got := p.GetTimers().GetConfig(); got.GetHoldTime() != 30 || got.GetKeepaliveInterval() != 10 || got.GetConnectRetry() != 5 {
		t.Errorf("timers = %v", got)
	}
	if got := p.GetTransport(); got.GetLocalAddress() != "198.51.100.253" || got.GetRemotePort() != 1179 {
		t.Errorf("transport = %v", got)
	}
	gr := p.GetGracefulRestart()
	if !gr.GetEnabled() || gr.GetRestartTime() != 300 || !gr.GetLocalRestarting() || gr.GetDeferralTime() != 1 || gr.GetNotificationEnabled() {
		t.Errorf("graceful restart = %v", gr)
	}
	if len(p.GetAfiSafis()) != 1 || !p.GetAfiSafis()[0].GetMpGracefulRestart().GetConfig().GetEnabled() {
		t.Errorf("afi-safis = %v", p.GetAfiSafis())
	}
}

// Start refuses a next hop that is not this host's own address: one
// inside an announced prefix (the VIP), or none at all.
func TestStartRefusesNextHop(t *testing.T) {
	tests := []struct {
		name    string
		nextHop func(netip.Addr) (netip.Addr, error)
		want    string
	}{
		{"the VIP", func(netip.Addr) (netip.Addr, error) { return vip.Addr(), nil },
			"bgp: this host's address toward peer 198.51.100.254 is 192.0.2.10, inside the announced 192.0.2.10/32: it must be the host's own address, not the VIP"},
		{"no route", func(netip.Addr) (netip.Addr, error) { return netip.Addr{}, errors.New("network is unreachable") },
			"bgp: this host's address toward peer 198.51.100.254: network is unreachable"},
		{"IPv6", func(netip.Addr) (netip.Addr, error) { return netip.MustParseAddr("2001:db8::1"), nil },
			"bgp: this host's address toward peer 198.51.100.254 is 2001:db8::1: want an IPv4 address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options("")
			o.NextHop = tt.nextHop
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err == nil || err.Error() != tt.want {
				t.Errorf("Start: error %v, want %q", err, tt.want)
			}
			if err := s.SetAnnounced(o.Prefixes); err == nil {
				t.Errorf("SetAnnounced after a failed Start: no error")
			}
		})
	}
}

// The life cycle without a reachable peer: nothing but Stop and Status
// before Start; the first verdict adds the peer; Stop is idempotent and
// ends everything else.
func TestLifeCycle(t *testing.T) {
	s, err := New(options(""))
	if err != nil {
		t.Fatal(err)
	}
	idle := Status{Peers: []PeerStatus{{Address: peer, ASN: 64513, State: "idle"}}}
	if got := s.Status(); !reflect.DeepEqual(got, idle) {
		t.Errorf("Status before Start = %+v, want %+v", got, idle)
	}
	if err := s.SetAnnounced([]netip.Prefix{vip}); err == nil || err.Error() != "bgp: speaker not started" {
		t.Errorf("SetAnnounced before Start: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Errorf("second Start: no error")
	}
	if got := s.Status(); !reflect.DeepEqual(got, idle) {
		t.Errorf("Status before the first verdict = %+v, want %+v", got, idle)
	}
	if err := s.SetAnnounced([]netip.Prefix{netip.MustParsePrefix("192.0.2.99/32")}); err == nil || err.Error() != "bgp: 192.0.2.99/32 is not one of the speaker's prefixes [192.0.2.10/32]" {
		t.Errorf("SetAnnounced of a prefix not in Options.Prefixes: %v", err)
	}
	if err := s.SetAnnounced([]netip.Prefix{vip}); err != nil {
		t.Fatal(err)
	}
	st := s.Status()
	if len(st.Peers) != 1 || st.Peers[0].State == Established || len(st.Announced) != 0 {
		t.Errorf("Status with the peer unreachable = %+v: want it not established and nothing announced", st)
	}
	if err := s.Withdraw(); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAnnounced([]netip.Prefix{vip}); err != nil || len(s.announced) != 0 {
		t.Errorf("SetAnnounced after Withdraw: error %v, announced %v; want withdrawn for good", err, s.announced)
	}
	if err := s.Stop(false); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(true); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.SetAnnounced([]netip.Prefix{vip}); err == nil || err.Error() != "bgp: speaker stopped" {
		t.Errorf("SetAnnounced after Stop: %v", err)
	}
	if got := s.Status(); !reflect.DeepEqual(got, idle) {
		t.Errorf("Status after Stop = %+v, want %+v", got, idle)
	}
}

// GoBGP's records reach logrus at their level with their attributes as
// fields (a group's under "group.key"); its debug records are dropped.
func TestLogging(t *testing.T) {
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	l := newSlogLogger(log).With("Topic", "Peer").WithGroup("g")
	l.Debug("dropped")
	l.Info("Peer Up", "Key", "198.51.100.254")
	l.Warn("w", "n", 3)
	l.Error("e")
	var got []string
	for _, e := range hook.AllEntries() {
		got = append(got, e.Level.String()+" "+e.Message)
	}
	if want := []string{"info Peer Up", "warning w", "error e"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("entries = %q, want %q", got, want)
	}
	if f := hook.AllEntries()[0].Data; f["Topic"] != "Peer" || f["g.Key"] != "198.51.100.254" {
		t.Errorf("fields = %v", f)
	}
}
