package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Iface is one endpoint interface of a Host, the inner end of a veth pair
// whose other end (Peer) is a port of the bridge in namespace LAN.
type Iface struct {
	Name  string           // inside the host's namespace: "eth0", "eth1"
	Index int              // ifindex inside the host's namespace
	MAC   net.HardwareAddr // 02:00 followed by the four IPv4 address bytes
	Addr  netip.Prefix     // e.g. 192.0.2.20/24

	LAN       *Host            // bridge namespace holding Peer
	Peer      string           // bridge-side veth end: PREFIX-TAG
	PeerIndex int              // ifindex of Peer inside LAN's namespace
	PeerMAC   net.HardwareAddr // 02:01 followed by the four IPv4 address bytes
}

// Host is one network namespace of a lab: a client, the XLB host, a
// backend, or a bridge ("lan") namespace.
type Host struct {
	Name   string  // role: "client1", "xlb", "backend2", "lan", "lan-front", "lan-back"
	NS     string  // namespace name: PREFIX-Name
	Path   string  // NetnsDir/NS, for nsenter --net=Path
	Ifaces []Iface // endpoint interfaces in creation order; none for bridge namespaces
	Bridge string  // bridge namespaces only: the bridge's name, PREFIX-br[f|b]

	handle netns.NsHandle
	nl     *netlink.Handle

	mu      sync.Mutex
	servers []*Server
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
// valid until the lab is closed. Do not close it.
func (h *Host) Netlink() *netlink.Handle { return h.nl }

// Do runs f on an OS thread locked and switched into the host's namespace,
// then switches the thread back (discarding it if that fails). f runs on
// its own goroutine: it must not call t.FailNow (t.Fatal) itself. Sockets
// created in f stay in the namespace for their whole life.
func (h *Host) Do(f func() error) error {
	return inNamespace(h.handle, f)
}

// Dial opens a TCP connection from inside the host's namespace to addr
// ("ip:port"), from an ephemeral local port.
func (h *Host) Dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := h.DialFrom(ctx, 0, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DialFrom is Dial from a fixed local port (0: ephemeral). The socket has
// SO_REUSEADDR set so a port can be reused while an older connection on a
// different 4-tuple lingers in TIME_WAIT.
func (h *Host) DialFrom(ctx context.Context, localPort int, addr string) (*net.TCPConn, error) {
	d := net.Dialer{}
	if localPort != 0 {
		d.LocalAddr = &net.TCPAddr{Port: localPort}
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			})
			return errors.Join(err, serr)
		}
	}
	var c net.Conn
	err := h.Do(func() error {
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lab: dial %s from %s: %w", addr, h.NS, err)
	}
	return c.(*net.TCPConn), nil
}

// Listen opens a TCP listener inside the host's namespace on addr
// ("ip:port" or ":port").
func (h *Host) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := h.Do(func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lab: listen %s in %s: %w", addr, h.NS, err)
	}
	return l, nil
}

// Command returns a command that runs name inside the host's network
// namespace via `nsenter --net=PATH --` (only the network namespace changes:
// unlike `ip netns exec`, /sys and /sys/fs/bpf pins stay the host's).
// The process outlives the namespace's name: stop it before Lab.Close.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := append([]string{"--net=" + h.Path, "--", name}, args...)
	return exec.CommandContext(ctx, "nsenter", argv...)
}

// WaitTCP polls, every 50 ms, until a TCP connection from h to addr
// succeeds (and closes it) or timeout passes. Use generous timeouts: the
// machine is shared and noisy. The probe is a real connection: a lab server
// counts it (wait for it with WaitCompleted, then ResetStats).
func WaitTCP(h *Host, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		c, err := h.Dial(attempt, addr)
		cancelAttempt()
		if err == nil {
			return c.Close()
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab: %s: no TCP connection to %s within %v: %w", h.NS, addr, timeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// addServer records s so that closing the lab closes it.
func (h *Host) addServer(s *Server) {
	h.mu.Lock()
	h.servers = append(h.servers, s)
	h.mu.Unlock()
}

// closeServers closes every server started on h.
func (h *Host) closeServers() error {
	h.mu.Lock()
	ss := h.servers
	h.servers = nil
	h.mu.Unlock()
	var errs []error
	for _, s := range ss {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// close releases the namespace handle and netlink handle.
func (h *Host) close() {
	if h.nl != nil {
		h.nl.Close()
		h.nl = nil
	}
	if h.handle.IsOpen() {
		h.handle.Close()
	}
}
