// Package dptest is the packet-fixture harness for the XLB data path: an
// anonymous network namespace with routes and permanent neighbours shaped
// like the lab (DESIGN §7), the real BPF object loaded and configured, and
// helpers to build, run (BPF_PROG_TEST_RUN) and check TCP frames.
package dptest

import (
	"net"
	"net/netip"
)

// Addresses of the fixture topology (documentation ranges only).
var (
	ClientIP  = netip.MustParseAddr("192.0.2.20")
	Client2IP = netip.MustParseAddr("192.0.2.21")
	ListenIP  = netip.MustParseAddr("192.0.2.10")
	// OneArmBackends share the client's subnet; XLB answers with XDP_TX.
	OneArmBackends = []netip.Addr{
		netip.MustParseAddr("192.0.2.31"),
		netip.MustParseAddr("192.0.2.32"),
		netip.MustParseAddr("192.0.2.33"),
	}
	// BackIP is XLB's address on the backend-side interface (two-arm SNAT address).
	BackIP = netip.MustParseAddr("198.51.100.1")
	// TwoArmBackends sit behind the second interface; XLB redirects to it.
	TwoArmBackends = []netip.Addr{
		netip.MustParseAddr("198.51.100.11"),
		netip.MustParseAddr("198.51.100.12"),
		netip.MustParseAddr("198.51.100.13"),
	}
)

// MAC derives the fixture's deterministic MAC for an IPv4 address: 02:00 followed by the address bytes.
func MAC(ip netip.Addr) net.HardwareAddr {
	b := ip.As4()
	return net.HardwareAddr{0x02, 0x00, b[0], b[1], b[2], b[3]}
}
