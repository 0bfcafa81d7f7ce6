package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// onePeer is the smallest bgp block, on lines 7-10 after minimal.
const onePeer = `bgp:
  local_asn: 64512
  peers:
    - {address: 198.51.100.1, asn: 64513}
`

// TestBGPDefaults: an omitted block is no speaker; a block gets the
// defaults of issue 15 (router id auto, hold time 9 s, restart time
// 120 s, announce [listen], port 179).
func TestBGPDefaults(t *testing.T) {
	ip := netip.MustParseAddr
	pfx := netip.MustParsePrefix
	peer := BGPPeer{Address: ip("198.51.100.1"), ASN: 64513, Port: 179}
	def := func(edit func(b *BGP)) *BGP {
		b := &BGP{LocalASN: 64512, HoldTime: 9 * time.Second, GracefulRestart: 120 * time.Second, AnnounceListen: true, Peers: []BGPPeer{peer},
			WithdrawDelay: 5 * time.Second}
		edit(b)
		return b
	}
	tests := []struct {
		name string
		yaml string
		want *BGP
	}{
		{"absent", minimal, nil},
		{"null", minimal + "bgp:\n", nil},
		{"defaults", minimal + onePeer, def(func(*BGP) {})},
		{"router_id auto", minimal + onePeer + "  router_id: auto\n", def(func(*BGP) {})},
		{"router_id explicit", minimal + onePeer + "  router_id: 192.0.2.10\n", def(func(b *BGP) { b.RouterID = ip("192.0.2.10") })},
		{"prefixes only", minimal + onePeer + "  announce: [203.0.113.0/24, 192.0.2.10/32]\n",
			def(func(b *BGP) {
				b.AnnounceListen, b.Announce = false, []netip.Prefix{pfx("203.0.113.0/24"), pfx("192.0.2.10/32")}
			})},
		{"listen and a prefix", minimal + onePeer + "  announce: [203.0.113.0/24, listen]\n",
			def(func(b *BGP) { b.Announce = []netip.Prefix{pfx("203.0.113.0/24")} })},
		{"bounds", minimal + "bgp:\n  local_asn: 4294967295\n  hold_time_secs: 3\n  graceful_restart_secs: 4095\n  peers:\n    - {address: 198.51.100.1, asn: 1, port: 65535, password_env: _X1}\n",
			def(func(b *BGP) {
				b.LocalASN, b.HoldTime, b.GracefulRestart = 4294967295, 3*time.Second, 4095*time.Second
				b.Peers = []BGPPeer{{ip("198.51.100.1"), 1, 65535, "_X1"}}
			})},
		{"upper bounds of the times", minimal + onePeer + "  hold_time_secs: 65535\n  graceful_restart_secs: 1\n  withdraw_delay_secs: 600\n",
			def(func(b *BGP) {
				b.HoldTime, b.GracefulRestart, b.WithdrawDelay = 65535*time.Second, time.Second, 600*time.Second
			})},
		{"no withdraw delay", minimal + onePeer + "  withdraw_delay_secs: 0\n", def(func(b *BGP) { b.WithdrawDelay = 0 })},
		{"iBGP", minimal + "bgp:\n  local_asn: 64512\n  peers: [{address: 198.51.100.1, asn: 64512}]\n",
			def(func(b *BGP) { b.Peers[0].ASN = 64512 })},
		{"sixteen peers", minimal + "bgp:\n  local_asn: 64512\n  peers:\n" + peers(16), def(func(b *BGP) {
			b.Peers = nil
			for i := 1; i <= 16; i++ {
				b.Peers = append(b.Peers, BGPPeer{netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), 64513, 179, ""})
			}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParse(t, tt.yaml).BGP; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("BGP = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// peers returns n peer items 198.51.100.1.. in AS 64513, one per line.
func peers(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "    - {address: 198.51.100.%d, asn: 64513}\n", i)
	}
	return b.String()
}

// TestBGPRules has one case per rule of bgp, each with the complete error
// text (file, line, field).
func TestBGPRules(t *testing.T) {
	bgp := func(body string) string { return minimal + "bgp:\n" + body }
	withPeer := func(body string) string { return minimal + onePeer + body }
	listen := "listen: {ip: 192.0.2.10}\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"not a mapping", minimal + "bgp: true\n", `t.yaml:7: bgp: must be a mapping, got boolean true`},
		{"empty", minimal + "bgp: {}\n", "t.yaml:7: bgp: missing field \"local_asn\"\nt.yaml:7: bgp: missing field \"peers\""},
		{"unknown field", withPeer("  graceful_restart: true\n"), `t.yaml:11: bgp: unknown field "graceful_restart" (did you mean "graceful_restart_secs"?)`},
		{"local_asn missing", bgp("  peers: [{address: 198.51.100.1, asn: 64513}]\n"), `t.yaml:7: bgp: missing field "local_asn"`},
		{"local_asn 0", bgp("  local_asn: 0\n  peers: [{address: 198.51.100.1, asn: 64513}]\n"), `t.yaml:8: bgp.local_asn: must be between 1 and 4294967295, got 0`},
		{"local_asn too big", bgp("  local_asn: 4294967296\n  peers: [{address: 198.51.100.1, asn: 64513}]\n"), `t.yaml:8: bgp.local_asn: must be between 1 and 4294967295, got 4294967296`},
		{"local_asn dotted", bgp("  local_asn: 1.10\n  peers: [{address: 198.51.100.1, asn: 64513}]\n"), `t.yaml:8: bgp.local_asn: must be an integer, got number 1.10`},
		{"router_id not an address", withPeer("  router_id: lb1\n"), `t.yaml:11: bgp.router_id: "lb1" is not an IP address`},
		{"router_id IPv6", withPeer("  router_id: \"2001:db8::1\"\n"), `t.yaml:11: bgp.router_id: must be "auto" or an IPv4 address, got 2001:db8::1`},
		{"router_id zero", withPeer("  router_id: 0.0.0.0\n"), `t.yaml:11: bgp.router_id: must not be 0.0.0.0 (RFC 6286: a non-zero identifier)`},
		{"hold time 0", withPeer("  hold_time_secs: 0\n"), `t.yaml:11: bgp.hold_time_secs: must be between 3 and 65535 seconds, got 0`},
		{"hold time 2", withPeer("  hold_time_secs: 2\n"), `t.yaml:11: bgp.hold_time_secs: must be between 3 and 65535 seconds, got 2`},
		{"hold time 65536", withPeer("  hold_time_secs: 65536\n"), `t.yaml:11: bgp.hold_time_secs: must be between 3 and 65535 seconds, got 65536`},
		{"restart time 0", withPeer("  graceful_restart_secs: 0\n"), `t.yaml:11: bgp.graceful_restart_secs: must be between 1 and 4095 seconds, got 0`},
		{"restart time 4096", withPeer("  graceful_restart_secs: 4096\n"), `t.yaml:11: bgp.graceful_restart_secs: must be between 1 and 4095 seconds, got 4096`},
		{"withdraw delay negative", withPeer("  withdraw_delay_secs: -1\n"), `t.yaml:11: bgp.withdraw_delay_secs: must be between 0 and 600 seconds, got -1`},
		{"withdraw delay 601", withPeer("  withdraw_delay_secs: 601\n"), `t.yaml:11: bgp.withdraw_delay_secs: must be between 0 and 600 seconds, got 601`},
		{"withdraw delay fractional", withPeer("  withdraw_delay_secs: 2.5\n"), `t.yaml:11: bgp.withdraw_delay_secs: must be an integer, got number 2.5`},
		{"announce empty", withPeer("  announce: []\n"), `t.yaml:11: bgp.announce: must list at least 1 entry ("listen" or a prefix); omit bgp to announce nothing`},
		{"announce not a list", withPeer("  announce: listen\n"), `t.yaml:11: bgp.announce: must be a sequence, got string "listen"`},
		{"announce item not a string", withPeer("  announce:\n    - {listen: true}\n"), `t.yaml:12: bgp.announce[0]: must be a string, got a mapping`},
		{"announce garbage", withPeer("  announce: [vip]\n"), `t.yaml:11: bgp.announce[0]: must be "listen" or an IPv4 prefix such as 192.0.2.10/32, got "vip"`},
		{"announce an address", withPeer("  announce: [192.0.2.10]\n"), `t.yaml:11: bgp.announce[0]: "192.0.2.10" is an address, not a prefix; write 192.0.2.10/32`},
		{"announce IPv6", withPeer("  announce: [\"2001:db8::/64\"]\n"), `t.yaml:11: bgp.announce[0]: 2001:db8::/64: IPv6 is not supported yet; use an IPv4 prefix`},
		{"announce default route", withPeer("  announce: [0.0.0.0/0]\n"), `t.yaml:11: bgp.announce[0]: must not be the default route 0.0.0.0/0`},
		{"announce host bits", withPeer("  announce: [203.0.113.7/24]\n"), `t.yaml:11: bgp.announce[0]: 203.0.113.7/24 has host bits set; write 203.0.113.0/24`},
		{"announce loopback", withPeer("  announce: [127.0.0.0/8]\n"), `t.yaml:11: bgp.announce[0]: must be a unicast prefix, got 127.0.0.0/8`},
		{"announce multicast", withPeer("  announce: [224.0.0.0/4]\n"), `t.yaml:11: bgp.announce[0]: must be a unicast prefix, got 224.0.0.0/4`},
		{"announce duplicate prefix", withPeer("  announce:\n    - 203.0.113.0/24\n    - listen\n    - 203.0.113.0/24\n"), `t.yaml:14: bgp.announce[2]: duplicate entry 203.0.113.0/24 (also bgp.announce[0])`},
		{"announce listen twice", withPeer("  announce: [listen, listen]\n"), `t.yaml:11: bgp.announce[1]: duplicate entry listen (also bgp.announce[0])`},
		{"announce listen and its /32", listen + minimal + onePeer + "  announce: [listen, 192.0.2.10/32]\n", `t.yaml:12: bgp.announce: "listen" and 192.0.2.10/32 both announce the listen address; keep one`},
		{"peers missing", bgp("  local_asn: 64512\n"), `t.yaml:7: bgp: missing field "peers"`},
		{"peers empty", bgp("  local_asn: 64512\n  peers: []\n"), `t.yaml:9: bgp.peers: at least 1 peer is required`},
		{"seventeen peers", bgp("  local_asn: 64512\n  peers:\n" + peers(17)), `t.yaml:9: bgp.peers: at most 16 peers are supported, got 17`},
		{"peer not a mapping", bgp("  local_asn: 64512\n  peers: [198.51.100.1]\n"), `t.yaml:9: bgp.peers[0]: must be a mapping, got string "198.51.100.1"`},
		{"peer unknown field", bgp("  local_asn: 64512\n  peers:\n    - {address: 198.51.100.1, asn: 64513, hold_time_secs: 9}\n"), `t.yaml:10: bgp.peers[0]: unknown field "hold_time_secs" (valid fields: address, asn, port, password_env)`},
		{"peer address missing", bgp("  local_asn: 64512\n  peers:\n    - asn: 64513\n"), `t.yaml:10: bgp.peers[0]: missing field "address"`},
		{"peer address a name", bgp("  local_asn: 64512\n  peers:\n    - {address: tor1, asn: 64513}\n"), `t.yaml:10: bgp.peers[0].address: "tor1" is not an IP address`},
		{"peer address IPv6", bgp("  local_asn: 64512\n  peers:\n    - {address: \"2001:db8::1\", asn: 64513}\n"), `t.yaml:10: bgp.peers[0].address: 2001:db8::1: IPv6 is not supported yet; use an IPv4 address`},
		{"peer address loopback", bgp("  local_asn: 64512\n  peers:\n    - {address: 127.0.0.1, asn: 64513}\n"), `t.yaml:10: bgp.peers[0].address: must not be a loopback address, got 127.0.0.1`},
		{"peer address the listen address", listen + minimal + "bgp:\n  local_asn: 64512\n  peers:\n    - {address: 192.0.2.10, asn: 64513}\n", `t.yaml:11: bgp.peers[0].address: must not be the listen address 192.0.2.10`},
		{"duplicate peer", bgp("  local_asn: 64512\n  peers:\n    - {address: 198.51.100.1, asn: 64513}\n    - {address: 198.51.100.1, asn: 64514, port: 1179}\n"), `t.yaml:11: bgp.peers[1].address: duplicate peer 198.51.100.1 (also bgp.peers[0])`},
		{"peer asn missing", bgp("  local_asn: 64512\n  peers:\n    - address: 198.51.100.1\n"), `t.yaml:10: bgp.peers[0]: missing field "asn"`},
		{"peer asn 0", bgp("  local_asn: 64512\n  peers:\n    - {address: 198.51.100.1, asn: 0}\n"), `t.yaml:10: bgp.peers[0].asn: must be between 1 and 4294967295, got 0`},
		{"peer port 0", bgp("  local_asn: 64512\n  peers:\n    - {address: 198.51.100.1, asn: 64513, port: 0}\n"), `t.yaml:10: bgp.peers[0].port: must be between 1 and 65535, got 0`},
		{"password_env empty", bgp("  local_asn: 64512\n  peers:\n    - {address: 198.51.100.1, asn: 64513, password_env: \"\"}\n"), `t.yaml:10: bgp.peers[0].password_env: must name an environment variable (letters, digits and '_', not starting with a digit), got ""`},
		{"password_env a password", bgp("  local_asn: 64512\n  peers:\n    - {address: 198.51.100.1, asn: 64513, password_env: \"s3cr3t!\"}\n"), `t.yaml:10: bgp.peers[0].password_env: must name an environment variable (letters, digits and '_', not starting with a digit), got "s3cr3t!"`},
		{"password_env leading digit", bgp("  local_asn: 64512\n  peers:\n    - {address: 198.51.100.1, asn: 64513, password_env: 1PW}\n"), `t.yaml:10: bgp.peers[0].password_env: must name an environment variable (letters, digits and '_', not starting with a digit), got "1PW"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantError(t, tt.yaml, tt.want) })
	}
}

// An announce entry that fails to decode is reported once and does not
// count as a duplicate or as "listen"'s /32.
func TestBGPOneErrorPerMistake(t *testing.T) {
	wantError(t, "listen: {ip: 192.0.2.10}\n"+minimal+onePeer+"  announce: [listen, 192.0.2.10/33, 192.0.2.10/33]\n",
		"t.yaml:12: bgp.announce[1]: must be \"listen\" or an IPv4 prefix such as 192.0.2.10/32, got \"192.0.2.10/33\"\n"+
			"t.yaml:12: bgp.announce[2]: must be \"listen\" or an IPv4 prefix such as 192.0.2.10/32, got \"192.0.2.10/33\"")
}

// TestMarshalBGP pins how `xlb check` prints the bgp block (last, every
// field, "listen" first, password_env only where set) and that it reads
// back equal.
func TestMarshalBGP(t *testing.T) {
	src := minimal + "bgp:\n  local_asn: 64512\n  announce: [203.0.113.0/24, listen]\n  peers:\n    - {address: 198.51.100.1, asn: 64513, password_env: XLB_BGP_PASSWORD}\n    - {address: 198.51.100.2, asn: 64513, port: 1179}\n"
	out := string(roundTrip(t, mustParse(t, src)))
	want := `state_dir: /sys/fs/bpf/xlb
bgp:
  local_asn: 64512
  router_id: auto
  hold_time_secs: 9
  graceful_restart_secs: 120
  announce: [listen, 203.0.113.0/24]
  peers:
    - address: 198.51.100.1
      asn: 64513
      port: 179
      password_env: XLB_BGP_PASSWORD
    - address: 198.51.100.2
      asn: 64513
      port: 1179
  withdraw_delay_secs: 5
`
	if i := strings.Index(out, "state_dir:"); i < 0 || out[i:] != want {
		t.Errorf("Marshal =\n%s\nwant the end\n%s", out, want)
	}
	for name, src := range map[string]string{
		"defaults":           minimal + onePeer,
		"prefixes only":      minimal + onePeer + "  announce: [203.0.113.0/24]\n",
		"explicit router id": minimal + onePeer + "  router_id: 192.0.2.10\n  hold_time_secs: 3\n  graceful_restart_secs: 4095\n",
	} {
		t.Run(name, func(t *testing.T) { roundTrip(t, mustParse(t, src)) })
	}
}

func TestMarshalBGPErrors(t *testing.T) {
	c := mustParse(t, minimal+onePeer)
	c.BGP.HoldTime = 9500 * time.Millisecond
	if _, err := c.Marshal(); err == nil || !strings.Contains(err.Error(), "bgp.hold_time_secs: 9.5s is not a whole number of seconds") {
		t.Errorf("Marshal(fractional hold time) error = %v", err)
	}
	c = mustParse(t, minimal+onePeer)
	c.BGP.Peers[0].Address = netip.Addr{}
	if _, err := c.Marshal(); err == nil || !strings.Contains(err.Error(), "bgp.peers[0].address: no address") {
		t.Errorf("Marshal(no peer address) error = %v", err)
	}
}

// Any change under bgp is the key "bgp": like every key, it takes effect
// on the next reload (a hot upgrade), whose new speaker starts with the
// new block while graceful restart keeps the routes (DESIGN §6a).
func TestDiffBGP(t *testing.T) {
	none := mustParse(t, minimal)
	one := mustParse(t, minimal+onePeer)
	spelled := mustParse(t, minimal+"bgp:\n  local_asn: 64512\n  router_id: auto\n  hold_time_secs: 9\n  graceful_restart_secs: 120\n  announce: [listen]\n  peers:\n    - {address: 198.51.100.1, asn: 64513, port: 179}\n  withdraw_delay_secs: 5\n")
	checkDiffs(t, []diffCase{
		{"added", none, one, []string{"bgp"}},
		{"removed", one, none, []string{"bgp"}},
		{"equal, defaults spelled out", one, spelled, nil},
		{"hold time", one, mustParse(t, minimal+onePeer+"  hold_time_secs: 30\n"), []string{"bgp"}},
		{"announce", one, mustParse(t, minimal+onePeer+"  announce: [listen, 203.0.113.0/24]\n"), []string{"bgp"}},
		{"router id", one, mustParse(t, minimal+onePeer+"  router_id: 192.0.2.10\n"), []string{"bgp"}},
		{"withdraw delay", one, mustParse(t, minimal+onePeer+"  withdraw_delay_secs: 0\n"), []string{"bgp"}},
		{"peer password_env", one, mustParse(t, minimal+"bgp:\n  local_asn: 64512\n  peers:\n    - {address: 198.51.100.1, asn: 64513, password_env: PW}\n"), []string{"bgp"}},
	})
}
