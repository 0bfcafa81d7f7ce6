package instance

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/pkg/config"
)

// TestUDPSettings: what the data path gets of the UDP services (issue
// 31): each one's udp_unreplied_max, resolved (a quarter of the flow
// table, at least 1, unless the file sets it; 0 for TCP), and whether the
// SNAT bitmaps need their UDP half.
func TestUDPSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxc   uint32
		svc    config.Service
		want   uint32
		hasUDP bool
	}{
		{"tcp", 1_000_000, config.Service{Proto: "tcp"}, 0, false},
		{"tcp with a stray cap", 1_000_000, config.Service{Proto: "tcp", UDPUnrepliedMax: 7}, 0, false},
		{"udp default: a quarter", 1_000_000, config.Service{Proto: "udp"}, 250_000, true},
		{"udp default rounds down", 1_003, config.Service{Proto: "udp"}, 250, true},
		{"udp default of a tiny table: 1", 3, config.Service{Proto: "udp"}, 1, true},
		{"udp set", 1_000_000, config.Service{Proto: "udp", UDPUnrepliedMax: 50}, 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &config.Config{FlowTable: config.FlowTable{MaxConnections: tc.maxc}}
			if got := c.UDPUnrepliedMax(&tc.svc); got != tc.want {
				t.Errorf("UDPUnrepliedMax = %d, want %d", got, tc.want)
			}
			tcp := config.Service{Proto: "tcp"}
			if got := hasUDP([]config.Service{tcp, tc.svc}); got != tc.hasUDP {
				t.Errorf("hasUDP = %v, want %v", got, tc.hasUDP)
			}
		})
	}
	if hasUDP(nil) {
		t.Error("hasUDP(nil)")
	}
}

// The local UDP sockets bound where a UDP service's datagrams arrive (its
// address or 0.0.0.0, a local port of it) are reported; TCP services and
// other addresses and ports are not (issue 31: the datagrams the data path
// passes reach such a socket).
func TestUDPSocketClashes(t *testing.T) {
	vip, other := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")
	svcs := []config.Service{
		{Name: "web", Proto: "tcp", Ports: []config.PortMapping{{LocalPort: 53}}},
		{Name: "dns", Proto: "udp", Ports: []config.PortMapping{{LocalPort: 53}, {LocalPort: 5353}}},
	}
	socks := []netip.AddrPort{
		netip.AddrPortFrom(vip, 53),                       // dns's address and port
		netip.AddrPortFrom(netip.IPv4Unspecified(), 5353), // any address, dns's second port
		netip.AddrPortFrom(other, 53),                     // another address
		netip.AddrPortFrom(vip, 54),                       // another port
	}
	got := udpSocketClashes(svcs, []netip.Addr{other, vip}, socks)
	want := []udpSocketClash{{"dns", socks[0]}, {"dns", socks[1]}}
	if !slices.Equal(got, want) {
		t.Errorf("clashes %v, want %v", got, want)
	}
}

// localUDPSockets finds a socket bound in this thread's namespace.
func TestLocalUDPSockets(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bound := c.LocalAddr().(*net.UDPAddr).AddrPort()
	socks, err := localUDPSockets()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(socks, netip.AddrPortFrom(bound.Addr().Unmap(), bound.Port())) {
		t.Errorf("%v not among %v", bound, socks)
	}
	if _, err := readUDPSockets(strings.NewReader("  sl  local_address rem_address\n   0: nonsense 00000000:0000\n")); err == nil {
		t.Error("a bad local address was read")
	}
}
