package lab

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"

	"github.com/vishvananda/netns"
)

// Fixed addresses (DESIGN §7; documentation ranges only).
var (
	FrontNet = netip.MustParsePrefix("192.0.2.0/24")    // clients and XLB eth0
	BackNet  = netip.MustParsePrefix("198.51.100.0/24") // two-arm backends and XLB eth1

	XLBFrontIP = netip.MustParseAddr("192.0.2.10")
	XLBBackIP  = netip.MustParseAddr("198.51.100.1") // two-arm only
)

const (
	firstClientHost        = 20 // 192.0.2.20, .21, …
	firstOneArmBackendHost = 31 // 192.0.2.31, .32, …
	firstTwoArmBackendHost = 11 // 198.51.100.11, .12, …
	endpointMACByte        = 0x00
	peerMACByte            = 0x01
	maxTagLen              = 3 // PREFIX + "-" + tag ≤ 15 characters
)

// Host names (roles); namespace names are PREFIX-NAME.
const (
	lanName      = "lan"
	lanFrontName = "lan-front"
	lanBackName  = "lan-back"
	xlbName      = "xlb"
	clientName   = "client"  // client1, client2, …
	backendName  = "backend" // backend1, backend2, …
)

// EndpointMAC is the MAC the lab gives the endpoint interface with address
// ip: 02:00 followed by the four IPv4 bytes.
func EndpointMAC(ip netip.Addr) net.HardwareAddr { return macFor(endpointMACByte, ip) }

// PeerMAC is the MAC of the bridge-side veth end facing the endpoint with
// address ip: 02:01 followed by the four IPv4 bytes.
func PeerMAC(ip netip.Addr) net.HardwareAddr { return macFor(peerMACByte, ip) }

func macFor(kind byte, ip netip.Addr) net.HardwareAddr {
	b := ip.As4()
	return net.HardwareAddr{0x02, kind, b[0], b[1], b[2], b[3]}
}

// nicSpec is one endpoint interface to create: a veth pair between host
// (ifname, addr) and the bridge in lan (PREFIX-tag).
type nicSpec struct {
	host   *Host
	ifname string
	addr   netip.Prefix
	lan    *Host
	tag    string
}

// routeSpec is a default route for host: via gw, or on-link out of ifname
// when gw is invalid.
type routeSpec struct {
	host   *Host
	ifname string
	gw     netip.Addr
}

// plan is the shape of a lab before anything is created.
type plan struct {
	lans      []*Host
	clients   []*Host
	xlb       *Host
	backends  []*Host
	nics      []nicSpec
	routes    []routeSpec
	bridgeTag map[*Host]string
}

func (l *Lab) newHost(name string) *Host {
	ns := l.Prefix + "-" + name
	return &Host{Name: name, NS: ns, Path: filepath.Join(NetnsDir, ns), handle: netns.None()}
}

func hostAddr(p netip.Prefix, host int) netip.Prefix {
	b := p.Addr().As4()
	b[3] = byte(host)
	return netip.PrefixFrom(netip.AddrFrom4(b), p.Bits())
}

// plan lays out hosts, interfaces and routes for l.Options.
func (l *Lab) plan() plan {
	o := l.Options
	var p plan
	p.bridgeTag = map[*Host]string{}
	front := l.newHost(lanName)
	back := front
	if o.Topology == TwoArm {
		front = l.newHost(lanFrontName)
		back = l.newHost(lanBackName)
		p.lans = []*Host{front, back}
		p.bridgeTag[front], p.bridgeTag[back] = "brf", "brb"
	} else {
		p.lans = []*Host{front}
		p.bridgeTag[front] = "br"
	}

	for i := range o.Clients {
		h := l.newHost(clientName + strconv.Itoa(i+1))
		p.clients = append(p.clients, h)
		p.nics = append(p.nics, nicSpec{h, "eth0", hostAddr(FrontNet, firstClientHost+i), front, "c" + strconv.Itoa(i+1)})
		if o.Topology == TwoArm {
			p.routes = append(p.routes, routeSpec{h, "eth0", XLBFrontIP})
		}
	}

	p.xlb = l.newHost(xlbName)
	if o.Topology == TwoArm {
		p.nics = append(p.nics,
			nicSpec{p.xlb, "eth0", netip.PrefixFrom(XLBFrontIP, FrontNet.Bits()), front, "x0"},
			nicSpec{p.xlb, "eth1", netip.PrefixFrom(XLBBackIP, BackNet.Bits()), back, "x1"})
	} else {
		p.nics = append(p.nics, nicSpec{p.xlb, "eth0", netip.PrefixFrom(XLBFrontIP, FrontNet.Bits()), front, "x0"})
	}
	// An on-link default route so that "listen: auto" (the primary IPv4 of
	// the default-route interface) finds 192.0.2.10 on eth0.
	p.routes = append(p.routes, routeSpec{host: p.xlb, ifname: "eth0"})

	for i := range o.Backends {
		h := l.newHost(backendName + strconv.Itoa(i+1))
		p.backends = append(p.backends, h)
		tag := "b" + strconv.Itoa(i+1)
		if o.Topology == TwoArm {
			p.nics = append(p.nics, nicSpec{h, "eth0", hostAddr(BackNet, firstTwoArmBackendHost+i), back, tag})
			p.routes = append(p.routes, routeSpec{h, "eth0", XLBBackIP})
		} else {
			p.nics = append(p.nics, nicSpec{h, "eth0", hostAddr(FrontNet, firstOneArmBackendHost+i), front, tag})
		}
	}
	return p
}

// linkName is PREFIX-tag; tags are at most maxTagLen characters so the
// name fits Linux's 15-character limit.
func (l *Lab) linkName(tag string) string {
	if len(tag) > maxTagLen {
		panic(fmt.Sprintf("lab: link tag %q longer than %d", tag, maxTagLen))
	}
	return l.Prefix + "-" + tag
}
