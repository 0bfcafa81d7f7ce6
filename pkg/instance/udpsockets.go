package instance

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
)

// udpSocketsFile lists the UDP sockets of the calling thread's network
// namespace (proc(5) /proc/net/udp; thread-self: the instance starts on a
// thread switched into its namespace in tests).
const udpSocketsFile = "/proc/thread-self/net/udp"

// warnUDPSockets warns once per local UDP socket bound where a UDP
// service's datagrams arrive: the datagrams the data path passes to the
// host (no pair for them: over udp_unreplied_max, no routable backend, a
// full table or SNAT space) reach that socket instead of a port
// unreachable (issue 31).
func (in *Instance) warnUDPSockets(svcs []config.Service, r Resolved) {
	if !hasUDP(svcs) {
		return
	}
	socks, err := localUDPSockets()
	if err != nil {
		in.log.WithError(err).Warn("could not list the local UDP sockets to check the UDP services' ports")
		return
	}
	listen := make([]netip.Addr, len(r.Services))
	for i, s := range r.Services {
		listen[i] = s.Listen
	}
	for _, c := range udpSocketClashes(svcs, listen, socks) {
		in.log.WithFields(logrus.Fields{"service": c.Service, "socket": c.Socket}).
			Warn("a local UDP socket is bound to the service's address and port: the datagrams XLB passes to the host (over udp_unreplied_max, no routable backend, table or SNAT ports full) reach it instead of an ICMP port unreachable")
	}
}

// udpSocketClash is a local UDP socket bound where a UDP service's
// datagrams arrive (issue 31): the data path passes the datagrams that get
// no pair (over udp_unreplied_max, no routable backend, a full table or
// SNAT space) to the host stack, so that socket receives them.
type udpSocketClash struct {
	Service string
	Socket  netip.AddrPort // as bound: the service's address or 0.0.0.0
}

// udpSocketClashes are the sockets of socks bound to a UDP service's
// listen address (svcs[i] listens on listen[i]) or to 0.0.0.0, on one of
// its local ports.
func udpSocketClashes(svcs []config.Service, listen []netip.Addr, socks []netip.AddrPort) []udpSocketClash {
	var out []udpSocketClash
	for i, s := range svcs {
		if s.Proto != dataplane.ProtoUDP {
			continue
		}
		for _, p := range s.Ports {
			for _, so := range socks {
				if so.Port() == p.LocalPort && (so.Addr() == listen[i] || so.Addr().IsUnspecified()) {
					out = append(out, udpSocketClash{Service: s.Name, Socket: so})
				}
			}
		}
	}
	return out
}

// readUDPSockets reads the local addresses of the IPv4 UDP sockets from
// r, a /proc/net/udp (each line's local_address: the address as the host
// prints the __be32 in hex, a colon, the port in hex).
func readUDPSockets(r io.Reader) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	sc := bufio.NewScanner(r)
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) < 2 {
			continue // the header
		}
		ip, port, ok := strings.Cut(f[1], ":")
		a, err1 := strconv.ParseUint(ip, 16, 32)
		p, err2 := strconv.ParseUint(port, 16, 16)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad local address %q", udpSocketsFile, f[1])
		}
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], uint32(a))
		out = append(out, netip.AddrPortFrom(netip.AddrFrom4(b), uint16(p)))
	}
	return out, sc.Err()
}

// localUDPSockets reads udpSocketsFile.
func localUDPSockets() ([]netip.AddrPort, error) {
	f, err := os.Open(udpSocketsFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readUDPSockets(f)
}
