package birdtest

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestConf pins bird's configuration: one passive BGP protocol per peer,
// graceful restart on, import all, export none, the MD5 password; with
// Kernel and ErrorWaitSecs, the kernel protocol merging equal paths and
// the error wait time.
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

func TestConfKernel(t *testing.T) {
	c := Config{
		Address: netip.MustParseAddr("192.0.2.1"), ASN: 64513, HoldSecs: 3, Kernel: true, ErrorWaitSecs: 2,
		Peers: []Peer{{Name: "xlb1", Address: netip.MustParseAddr("192.0.2.11"), ASN: 64512}},
	}
	want := `router id 192.0.2.1;
log stderr all;
protocol device {}
protocol kernel {
  ipv4 { export all; };
  merge paths on;
}
protocol bgp xlb1 {
  local 192.0.2.1 as 64513;
  neighbor 192.0.2.11 as 64512;
  passive on;
  hold time 3;
  graceful restart on;
  error wait time 2, 2;
  ipv4 { import all; export none; };
}
`
	if got := c.conf(); got != want {
		t.Errorf("conf =\n%s\nwant\n%s", got, want)
	}
}

// TestConfParses has bird itself parse both configurations (bird -p).
func TestConfParses(t *testing.T) {
	Require(t)
	for _, c := range []Config{
		{Address: netip.MustParseAddr("192.0.2.1"), ASN: 64513, HoldSecs: 9,
			Peers: []Peer{{Name: "xlb1", Address: netip.MustParseAddr("192.0.2.11"), ASN: 64512, Password: "a b"}}},
		{Address: netip.MustParseAddr("192.0.2.1"), ASN: 64513, HoldSecs: 3, Kernel: true, ErrorWaitSecs: 2,
			Peers: []Peer{{Name: "xlb1", Address: netip.MustParseAddr("192.0.2.11"), ASN: 64512}}},
	} {
		path := filepath.Join(t.TempDir(), "bird.conf")
		if err := os.WriteFile(path, []byte(c.conf()), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("bird", "-p", "-c", path).CombinedOutput(); err != nil {
			t.Errorf("bird -p rejects\n%s: %v\n%s", c.conf(), err, out)
		}
	}
}
