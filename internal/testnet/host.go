package testnet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Iface is one endpoint interface of a Host: the inner end of a veth pair
// whose other end (Peer) is a port of the bridge in namespace LAN, or, for
// a direct pair (Topology.Pair), the other host's interface.
type Iface struct {
	Name  string           // inside the host's namespace: "eth0", "eth1"
	Index int              // ifindex inside the host's namespace
	MAC   net.HardwareAddr // EndpointMAC of the address
	Addr  netip.Prefix     // e.g. 192.0.2.20/24

	LAN       *Host            // namespace holding Peer
	Peer      string           // the other end: PREFIX-TAG on a bridge, or the other host's interface
	PeerIndex int              // ifindex of Peer inside LAN's namespace
	PeerMAC   net.HardwareAddr // PeerMAC of the address on a bridge; the other host's MAC
}

// Host is one named network namespace of a Topology: an endpoint (client,
// XLB host, backend, router) or a bridge namespace.
type Host struct {
	Name   string  // role, e.g. "client1", "xlb", "lan"
	NS     string  // namespace name: PREFIX-Name
	Path   string  // NetnsDir/NS, for nsenter --net=Path and systemd-nspawn
	Ifaces []Iface // endpoint interfaces in creation order
	Bridge string  // bridge namespaces only: the bridge's name, PREFIX-TAG

	handle netns.NsHandle
	nl     *netlink.Handle

	mu         sync.Mutex
	servers    []*Server
	udpServers []*UDPServer
}

// IP is the address of the first interface (zero for bridge namespaces).
func (h *Host) IP() netip.Addr {
	if len(h.Ifaces) == 0 {
		return netip.Addr{}
	}
	return h.Ifaces[0].Addr.Addr()
}

// MAC is the hardware address of the first interface.
func (h *Host) MAC() net.HardwareAddr {
	if len(h.Ifaces) == 0 {
		return nil
	}
	return h.Ifaces[0].MAC
}

// Ifindex is the ifindex of the first interface inside the namespace.
func (h *Host) Ifindex() int {
	if len(h.Ifaces) == 0 {
		return 0
	}
	return h.Ifaces[0].Index
}

// Iface returns the interface with the given name.
func (h *Host) Iface(name string) (Iface, bool) {
	for _, i := range h.Ifaces {
		if i.Name == name {
			return i, true
		}
	}
	return Iface{}, false
}

// Netlink returns a netlink handle bound to the host's namespace; it is
// valid until the topology is closed. Do not close it.
func (h *Host) Netlink() *netlink.Handle { return h.nl }

// Do runs f on an OS thread locked and switched into the host's namespace
// (see In). f runs on its own goroutine: it must not call t.FailNow
// (t.Fatal) itself. Sockets created in f stay in the namespace.
func (h *Host) Do(f func() error) error { return In(h.handle, f) }

// Command returns a command that runs name inside the host's network
// namespace via `nsenter --net=PATH --` (only the network namespace
// changes: unlike `ip netns exec`, /sys and /sys/fs/bpf pins stay the
// host's). The process keeps the namespace alive after its name is
// removed: stop it before closing the topology.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := append([]string{"--net=" + h.Path, "--", name}, args...)
	return exec.CommandContext(ctx, "nsenter", argv...)
}

// addServer records s so that closing the topology closes it.
func (h *Host) addServer(s *Server) {
	h.mu.Lock()
	h.servers = append(h.servers, s)
	h.mu.Unlock()
}

// addUDPServer records s so that closing the topology closes it.
func (h *Host) addUDPServer(s *UDPServer) {
	h.mu.Lock()
	h.udpServers = append(h.udpServers, s)
	h.mu.Unlock()
}

// closeServers closes every server started on h, TCP and UDP.
func (h *Host) closeServers() error {
	h.mu.Lock()
	ss, us := h.servers, h.udpServers
	h.servers, h.udpServers = nil, nil
	h.mu.Unlock()
	var errs []error
	for _, s := range ss {
		errs = append(errs, s.Close())
	}
	for _, s := range us {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// release closes the namespace handle and the netlink handle.
func (h *Host) release() {
	if h.nl != nil {
		h.nl.Close()
		h.nl = nil
	}
	if h.handle.IsOpen() {
		h.handle.Close()
	}
}
