// Package dptest is the packet-fixture harness for the XLB data path: an
// anonymous network namespace with routes and permanent neighbours shaped
// like the lab (DESIGN §7), the real BPF object loaded and configured, and
// helpers to build, run (BPF_PROG_TEST_RUN) and check TCP frames.
package dptest

import (
	"net"
	"net/netip"

	"github.com/xlbproject/xlb/internal/testnet"
)

// Addresses of the fixture topology, from testnet's address plan (the
// lab's: documentation ranges only).
var (
	ClientIP  = testnet.ClientIP(0)
	Client2IP = testnet.ClientIP(1)
	ListenIP  = testnet.XLBFrontIP
	// OneArmBackends share the client's subnet; XLB answers with XDP_TX.
	OneArmBackends = []netip.Addr{testnet.OneArmBackendIP(0), testnet.OneArmBackendIP(1), testnet.OneArmBackendIP(2)}
	// BackIP is XLB's address on the backend-side interface (two-arm SNAT address).
	BackIP = testnet.XLBBackIP
	// TwoArmBackends sit behind the second interface; XLB redirects to it.
	TwoArmBackends = []netip.Addr{testnet.TwoArmBackendIP(0), testnet.TwoArmBackendIP(1), testnet.TwoArmBackendIP(2)}
)

// MAC derives the fixture's deterministic MAC for an IPv4 address:
// 02:00 followed by the address bytes (testnet.EndpointMAC, as in the lab).
func MAC(ip netip.Addr) net.HardwareAddr { return testnet.EndpointMAC(ip) }
