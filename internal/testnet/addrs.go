package testnet

import (
	"fmt"
	"net"
	"net/netip"
)

// The address plan of every test network (DESIGN §7). Only the RFC 5737
// documentation ranges are used, so nothing here can reach a real network.
//
//	FrontNet 192.0.2.0/24:    .1 fleet router, .10 XLB (eth0),
//	                          .11–.19 fleet XLB hosts, .20–.29 clients,
//	                          .31–.94 one-arm (and fleet) backends,
//	                          .100–.115 XLB's extra addresses (eth0),
//	                          .120–.219 the first client's extra addresses
//	BackNet  198.51.100.0/24: .1 XLB eth1 (two-arm), .10 fleet service
//	                          address, .11–.74 two-arm backends
//	OuterNet 203.0.113.0/24:  .1 fleet router (client side), .10 fleet client
var (
	FrontNet = netip.MustParsePrefix("192.0.2.0/24")
	BackNet  = netip.MustParsePrefix("198.51.100.0/24")
	OuterNet = netip.MustParsePrefix("203.0.113.0/24")

	// XLBFrontIP is XLB's address on its client-side interface: the
	// listen address, and the SNAT address of the one-arm shape.
	XLBFrontIP = netip.MustParseAddr("192.0.2.10")
	// XLBBackIP is XLB's address on its backend-side interface in the
	// two-arm shape: the SNAT address there.
	XLBBackIP = netip.MustParseAddr("198.51.100.1")

	// RouterIP is the fleet router on FrontNet, the XLB hosts' gateway.
	RouterIP = netip.MustParseAddr("192.0.2.1")
	// ServiceIP is the fleet's shared service address behind the router.
	ServiceIP = netip.MustParseAddr("198.51.100.10")
	// OuterRouterIP is the fleet router on OuterNet, the client's gateway.
	OuterRouterIP = netip.MustParseAddr("203.0.113.1")
	// OuterClientIP is the fleet client.
	OuterClientIP = netip.MustParseAddr("203.0.113.10")
)

// Sizes of the numbered ranges of the plan.
const (
	MaxClients  = 10 // ClientIP(0 … 9)
	MaxBackends = 64 // OneArmBackendIP and TwoArmBackendIP (0 … 63)
	MaxHosts    = 9  // HostIP(0 … 8)
	MaxExtraIPs = 16 // XLBExtraIP(0 … 15)
	// MaxClientExtraIPs: ClientExtraIP(0 … 99), 100 clients' addresses
	// (issue 30: client affinity for 100 clients).
	MaxClientExtraIPs = 100
)

const (
	firstHost          = 11  // 192.0.2.11, …
	firstClient        = 20  // 192.0.2.20, …
	firstOneArmBackend = 31  // 192.0.2.31, …
	firstTwoArmBackend = 11  // 198.51.100.11, …
	firstExtra         = 100 // 192.0.2.100, …
	firstClientExtra   = 120 // 192.0.2.120, …
)

// ClientIP is client i (from 0) on FrontNet: 192.0.2.20+i.
func ClientIP(i int) netip.Addr { return nth(FrontNet, firstClient, i, MaxClients) }

// OneArmBackendIP is backend i (from 0) on FrontNet, beside the clients
// (the one-arm shape, and the fleet): 192.0.2.31+i.
func OneArmBackendIP(i int) netip.Addr {
	return nth(FrontNet, firstOneArmBackend, i, MaxBackends)
}

// TwoArmBackendIP is backend i (from 0) on BackNet, behind XLB's second
// interface (the two-arm shape): 198.51.100.11+i.
func TwoArmBackendIP(i int) netip.Addr {
	return nth(BackNet, firstTwoArmBackend, i, MaxBackends)
}

// XLBExtraIP is extra address i (from 0) of XLB's client-side interface
// on FrontNet: 192.0.2.100+i. Labs add them as further SNAT addresses
// (snat.ip as a list, issue 13): each multiplies the ports toward every
// backend.
func XLBExtraIP(i int) netip.Addr { return nth(FrontNet, firstExtra, i, MaxExtraIPs) }

// ClientExtraIP is extra address i (from 0) of a client's interface on
// FrontNet: 192.0.2.120+i. A lab adds them to one client (lab.Lab's
// AddClientAddresses), whose connections then leave from many source
// addresses of one namespace (loadgen.Config.Sources), as from many
// clients whose TCP timestamps are unrelated (issue 36).
func ClientExtraIP(i int) netip.Addr {
	return nth(FrontNet, firstClientExtra, i, MaxClientExtraIPs)
}

// HostIP is fleet XLB host i (from 0) on FrontNet: 192.0.2.11+i.
func HostIP(i int) netip.Addr { return nth(FrontNet, firstHost, i, MaxHosts) }

// nth is host number first+i of the /24 net; i outside [0, limit) is a
// programming error and panics.
func nth(net netip.Prefix, first, i, limit int) netip.Addr {
	if i < 0 || i >= limit {
		panic(fmt.Sprintf("testnet: address %d of a range of %d", i, limit))
	}
	b := net.Addr().As4()
	b[3] = byte(first + i)
	return netip.AddrFrom4(b)
}

// EndpointMAC is the MAC of the endpoint interface with IPv4 address ip:
// 02:00 followed by the four address bytes.
func EndpointMAC(ip netip.Addr) net.HardwareAddr { return macFor(0x00, ip) }

// PeerMAC is the MAC of the bridge-side veth end facing the endpoint with
// IPv4 address ip: 02:01 followed by the four address bytes.
func PeerMAC(ip netip.Addr) net.HardwareAddr { return macFor(0x01, ip) }

func macFor(kind byte, ip netip.Addr) net.HardwareAddr {
	b := ip.As4()
	return net.HardwareAddr{0x02, kind, b[0], b[1], b[2], b[3]}
}
