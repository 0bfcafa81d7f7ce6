package birdtest

import (
	"net/netip"
	"testing"
)

// TestConf pins bird's configuration: one passive BGP protocol per peer,
// graceful restart on, import all, export none, the MD5 password.
func TestConf(t *testing.T) {
	c := Config{
		Address: netip.MustParseAddr("192.0.2.1"), ASN: 64513, HoldSecs: 9,
		Peers: []Peer{
			{Name: "xlb1", Address: netip.MustParseAddr("192.0.2.11"), ASN: 64512},
			{Name: "xlb2", Address: netip.MustParseAddr("192.0.2.12"), ASN: 64512, Password: "a b"},
		},
	}
	want := `router id 192.0.2.1;
log stderr all;
protocol device {}
protocol bgp xlb1 {
  local 192.0.2.1 as 64513;
  neighbor 192.0.2.11 as 64512;
  passive on;
  hold time 9;
  graceful restart on;
  ipv4 { import all; export none; };
}
protocol bgp xlb2 {
  local 192.0.2.1 as 64513;
  neighbor 192.0.2.12 as 64512;
  passive on;
  hold time 9;
  graceful restart on;
  password "a b";
  ipv4 { import all; export none; };
}
`
	if got := c.conf(); got != want {
		t.Errorf("conf =\n%s\nwant\n%s", got, want)
	}
}
