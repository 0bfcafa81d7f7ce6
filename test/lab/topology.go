package lab

import (
	"net"
	"net/netip"
	"strconv"

	"github.com/xlbproject/xlb/internal/testnet"
)

// XLB's addresses in the lab (testnet's address plan).
var (
	XLBFrontIP = testnet.XLBFrontIP // eth0: the listen address
	XLBBackIP  = testnet.XLBBackIP  // eth1, two-arm only: the SNAT address
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

// lanSpec is a bridge namespace: its role and its bridge's tag and MAC.
type lanSpec struct {
	role string
	tag  string
	mac  net.HardwareAddr
}

// nicSpec is one endpoint interface to create: a veth pair between host
// (ifname, addr) and the bridge in lan (port PREFIX-tag).
type nicSpec struct {
	host   string
	ifname string
	addr   netip.Prefix
	lan    string
	tag    string
}

// routeSpec is a default route for host: via gw, or on-link out of ifname
// when gw is invalid.
type routeSpec struct {
	host   string
	ifname string
	gw     netip.Addr
}

// plan is the shape of a lab before anything is created: roles, links and
// routes, in creation order.
type plan struct {
	lans     []lanSpec
	clients  []string
	xlb      string
	backends []string
	nics     []nicSpec
	routes   []routeSpec
}

// roles lists every namespace in creation order: bridges, clients, XLB,
// backends.
func (p plan) roles() []string {
	var r []string
	for _, l := range p.lans {
		r = append(r, l.role)
	}
	r = append(append(r, p.clients...), p.xlb)
	return append(r, p.backends...)
}

func bridgeMAC(i int) net.HardwareAddr { return net.HardwareAddr{0x02, 0x02, 0, 0, 0, byte(i + 1)} }

// newPlan lays out hosts, interfaces and routes for o.
func newPlan(o Options) plan {
	var p plan
	front, back := lanName, lanName
	if o.Topology == TwoArm {
		front, back = lanFrontName, lanBackName
		p.lans = []lanSpec{{front, "brf", bridgeMAC(0)}, {back, "brb", bridgeMAC(1)}}
	} else {
		p.lans = []lanSpec{{front, "br", bridgeMAC(0)}}
	}
	frontAddr := func(ip netip.Addr) netip.Prefix { return netip.PrefixFrom(ip, testnet.FrontNet.Bits()) }
	backAddr := func(ip netip.Addr) netip.Prefix { return netip.PrefixFrom(ip, testnet.BackNet.Bits()) }

	for i := range o.Clients {
		h := clientName + strconv.Itoa(i+1)
		p.clients = append(p.clients, h)
		p.nics = append(p.nics, nicSpec{h, "eth0", frontAddr(testnet.ClientIP(i)), front, "c" + strconv.Itoa(i+1)})
		if o.Topology == TwoArm {
			p.routes = append(p.routes, routeSpec{h, "eth0", XLBFrontIP})
		}
	}

	p.xlb = xlbName
	p.nics = append(p.nics, nicSpec{p.xlb, "eth0", frontAddr(XLBFrontIP), front, "x0"})
	if o.Topology == TwoArm {
		p.nics = append(p.nics, nicSpec{p.xlb, "eth1", backAddr(XLBBackIP), back, "x1"})
	}
	// An on-link default route so that "listen: auto" (the primary IPv4 of
	// the default-route interface) finds 192.0.2.10 on eth0.
	p.routes = append(p.routes, routeSpec{host: p.xlb, ifname: "eth0"})

	for i := range o.Backends {
		h := backendName + strconv.Itoa(i+1)
		p.backends = append(p.backends, h)
		tag := "b" + strconv.Itoa(i+1)
		if o.Topology == TwoArm {
			p.nics = append(p.nics, nicSpec{h, "eth0", backAddr(testnet.TwoArmBackendIP(i)), back, tag})
			p.routes = append(p.routes, routeSpec{h, "eth0", XLBBackIP})
		} else {
			p.nics = append(p.nics, nicSpec{h, "eth0", frontAddr(testnet.OneArmBackendIP(i)), front, tag})
		}
	}
	return p
}
