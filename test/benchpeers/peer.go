package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/test/lab"
)

// The virtual service every peer balances: clients connect to servicePort
// on lab.XLBFrontIP, the balancer's address; backends listen on
// backendPort.
const (
	servicePort = 80
	backendPort = 8080
)

// vip is the service address clients connect to through a balancer.
var vip = netip.AddrPortFrom(lab.XLBFrontIP, servicePort)

// peer is one way from the clients to the backends.
type peer struct {
	name  string
	about string // one line for the report
	// maxClients is how many client addresses the peer serves (0: any).
	maxClients int
	// newConnsOnly: the peer differs from another in what only the
	// new-connection loads use (its SNAT space), and sits the others out.
	newConnsOnly bool
	// socketsPerPair is how many descriptors of one process a connection
	// through the peer takes (a proxy: two), 0 for none.
	socketsPerPair int
	// needs are the programs (on PATH) and files it runs with, and the
	// Debian package of each.
	needs []need
	// start sets the peer up in l (its backends already serve on
	// backendPort) and returns the addresses clients connect to (round
	// robin: one per connection) and how to stop it. stop must undo
	// everything start did outside the lab's namespaces.
	start func(e *env, l *lab.Lab) (targets []netip.AddrPort, stop func() error, err error)
	// udp is start for the UDP loads (the service is VIP:servicePort/udp,
	// the backends serve backendPort/udp); nil: the peer does not balance
	// UDP and sits those loads out.
	udp func(e *env, l *lab.Lab) (targets []netip.AddrPort, stop func() error, err error)
}

// peers in the report's order; the first four are the ratio references.
var peers = []peer{
	{name: "floor", about: "the floor balancer (pkg/dataplane/floor, bpf/floor_lb.c): stateless XDP full NAT, backend by a hash of the client port, XDP_TX; what XLB would cost if its state were free", maxClients: 1, start: startFloor},
	{name: "direct", about: "no balancer: the clients connect to the backends themselves (the new-connection loads to the first backend only)", start: startDirect, udp: startDirect},
	{name: "iptables", about: "the kernel's NAT in the balancer namespace as kube-proxy sets it up: nf_conntrack DNAT to a random endpoint and MASQUERADE", needs: []need{{"iptables-restore", "iptables"}}, start: startIptables, udp: startIptablesUDP},
	{name: "nftables", about: "the kernel's NAT through nftables as kube-proxy's nftables mode sets it up: numgen random vmap to an endpoint chain, DNAT, masquerade fully-random", needs: []need{{"nft", "nftables"}}, start: startNFT("tcp"), udp: startNFT("udp")},
	{name: "haproxy", socketsPerPair: 2, about: "HAProxy in TCP mode, round robin, a thread per CPU", needs: []need{{"haproxy", "haproxy"}}, start: startHAProxy},
	{name: "xlb-native", about: "the xlb daemon, xdp_mode native, 8 SNAT addresses", start: func(e *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) { return startXLB(e, l, "native") },
		udp: func(e *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) { return startXLBUDP(e, l, "native") }},
	{name: defaultPeer, newConnsOnly: true, about: fmt.Sprintf("the xlb daemon, xdp_mode native, with the snat section of the packages' /etc/xlb/xlb.yaml (packaging/xlb.yaml: one address, ip auto, ports 40000-59999): a port toward a backend that closed first is held %v (maintenance.SNATHold) unless the pair negotiated TCP timestamps, when a client SYN with timestamps reuses it %v after the old pair's last packet (dataplane.SNATReuseGuard, issue 36); it differs from xlb-native in its SNAT space only and runs the new-connection loads only", maintenance.SNATHold, dataplane.SNATReuseGuard), start: startXLBDefault},
	{name: "xlb-generic", about: "the xlb daemon, xdp_mode generic (the kernel's generic XDP)", start: func(e *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) { return startXLB(e, l, "generic") },
		udp: func(e *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) { return startXLBUDP(e, l, "generic") }},
	{name: baselinePeer, about: "the xlb daemon of -baseline, an earlier build (its version above), xdp_mode native: the before of the change, measured in the same run", start: func(e *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) {
		return startXLBBinary(e, l, e.opts.Baseline, "native")
	}},
	{name: "nginx", socketsPerPair: 2, about: "nginx stream proxy, round robin, a worker per CPU", needs: []need{{"nginx", "nginx"}, {nginxStreamModule, "libnginx-mod-stream"}}, start: startNginx},
}

// references are the peers every other is divided by, in column order.
var references = []string{"floor", "direct", "iptables", "haproxy"}

func (p peer) key() string { return p.name }

// defaultPeer is XLB with the packaged SNAT space.
const defaultPeer = "xlb-default"

// baselinePeer runs the -baseline binary; it is not among the default
// peers without one.
const baselinePeer = "xlb-baseline"

func peerNames() []string { return names(peers) }

// defaultPeers are the peers a run measures when -peers is not given.
func defaultPeers(withBaseline bool) []string {
	var out []string
	for _, n := range peerNames() {
		if n != baselinePeer || withBaseline {
			out = append(out, n)
		}
	}
	return out
}

// peerByName is the peer called name (parseOptions checked the names).
func peerByName(name string) peer { return byName(peers, name) }

// backendTargets are the backends' service addresses.
func backendTargets(l *lab.Lab) []netip.AddrPort {
	var out []netip.AddrPort
	for _, b := range l.Backends {
		out = append(out, netip.AddrPortFrom(b.IP(), backendPort))
	}
	return out
}

// startDirect: no balancer, the clients spread their connections over the
// backends themselves.
func startDirect(_ *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) {
	return backendTargets(l), func() error { return nil }, nil
}

// startIptables: the kernel's NAT in the balancer namespace, as
// kube-proxy's iptables mode sets it up (the rules go with the namespace).
func startIptables(_ *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) {
	if err := l.XLB.NATBalancer(vip, backendTargets(l)); err != nil {
		return nil, nil, err
	}
	return []netip.AddrPort{vip}, func() error { return nil }, nil
}

// startIptablesUDP is startIptables for the UDP service.
func startIptablesUDP(_ *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) {
	if err := l.XLB.NATBalancerProto(vip, backendTargets(l), "udp"); err != nil {
		return nil, nil, err
	}
	return []netip.AddrPort{vip}, func() error { return nil }, nil
}

// startNFT: the kernel's NAT in the balancer namespace through nftables,
// as kube-proxy's nftables mode sets it up, for proto (the table goes
// with the namespace).
func startNFT(proto string) func(*env, *lab.Lab) ([]netip.AddrPort, func() error, error) {
	return func(_ *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) {
		if err := l.XLB.NFTBalancer(vip, backendTargets(l), proto); err != nil {
			return nil, nil, err
		}
		return []netip.AddrPort{vip}, func() error { return nil }, nil
	}
}

// need is a program on PATH, or a file when it is an absolute path, and
// the Debian package that brings it.
type need struct{ file, pkg string }

// checkNeeds fails, naming the Debian packages to install, when a peer of
// names lacks what it runs with.
func checkNeeds(names []string) error {
	var missing []string
	for _, name := range names {
		for _, n := range peerByName(name).needs {
			var err error
			if filepath.IsAbs(n.file) {
				_, err = os.Stat(n.file)
			} else {
				_, err = exec.LookPath(n.file)
			}
			if err != nil {
				missing = append(missing, fmt.Sprintf("%s (peer %s, Debian package %s)", n.file, name, n.pkg))
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %v: install them or leave those peers out (-peers)", missing)
	}
	return nil
}
