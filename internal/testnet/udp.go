package testnet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// UDPHandler answers one datagram: req is its payload (valid only during
// the call), from the peer's address. It returns the reply to send back
// from the server's socket, or nil to send none. New behaviours are one
// UDPHandler each; see UDPEcho, UDPNameEcho and UDPSink.
type UDPHandler func(from netip.AddrPort, req []byte) []byte

// UDPEcho answers every datagram with its own payload.
func UDPEcho(_ netip.AddrPort, req []byte) []byte { return append([]byte(nil), req...) }

// UDPNameEcho answers every datagram with name, UDPNameSep and the
// request's payload ("b1|hello"), so a client learns which backend
// answered (issue 31's DNS-style lab load).
func UDPNameEcho(name string) UDPHandler {
	prefix := name + UDPNameSep
	return func(_ netip.AddrPort, req []byte) []byte {
		return append([]byte(prefix), req...)
	}
}

// UDPNameSep separates UDPNameEcho's name from the echoed payload.
const UDPNameSep = "|"

// UDPSink never answers; the server only counts what it receives
// (UDPStats), so a load's delivered bytes and a flood's pairs are read
// there.
func UDPSink(netip.AddrPort, []byte) []byte { return nil }

// UDPStats summarise a UDP server's datagrams since it started or since
// the last ResetStats.
type UDPStats struct {
	Datagrams int64 // received
	BytesIn   int64 // payload bytes received
	Replies   int64 // replies sent (counted as they go out)
	BytesOut  int64 // payload bytes sent
	Errors    int64 // replies that could not be sent
	// Peers counts the datagrams received per peer address and port (an
	// XLB SNAT address and port per pair in e2e tests), for at most
	// MaxRecords peers; PeersDropped counts datagrams from further ones.
	Peers        map[netip.AddrPort]int
	PeersDropped int64
}

// UDPServer answers the datagrams sent to one UDP socket inside a
// namespace with a UDPHandler, from one goroutine.
type UDPServer struct {
	conn    *net.UDPConn
	handler UDPHandler
	done    chan struct{}

	mu     sync.Mutex
	cond   *sync.Cond // signalled when a datagram was counted
	stats  UDPStats
	gen    uint64 // ResetStats calls
	closed bool
}

// UDPServerReadBuffer is the receive buffer ServeUDP asks for
// (SO_RCVBUFFORCE, so above net.core.rmem_max): a bulk load's bursts
// should not be lost at the server's socket.
const UDPServerReadBuffer = 8 << 20

// ServeUDP starts handler on the UDP address addr (":port" or "ip:port")
// inside h's namespace. Closing the topology closes the server.
func (h *Host) ServeUDP(addr string, handler UDPHandler) (*UDPServer, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, UDPServerReadBuffer)
		})
		return errors.Join(err, serr)
	}}
	var pc net.PacketConn
	err := h.Do(func() error {
		var err error
		pc, err = lc.ListenPacket(context.Background(), "udp4", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testnet: listen udp %s in %s: %w", addr, h.NS, err)
	}
	s := &UDPServer{
		conn:    pc.(*net.UDPConn),
		handler: handler,
		done:    make(chan struct{}),
		stats:   UDPStats{Peers: map[netip.AddrPort]int{}},
	}
	s.cond = sync.NewCond(&s.mu)
	h.addUDPServer(s)
	go s.loop()
	return s, nil
}

// Addr is the server's local address.
func (s *UDPServer) Addr() netip.AddrPort { return udpAddrPort(s.conn.LocalAddr()) }

func (s *UDPServer) loop() {
	defer close(s.done)
	buf := make([]byte, 64<<10)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. an ICMP error queued on the socket
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		reply := s.handler(from, buf[:n])
		// Counted before the reply goes out: a client that has its reply
		// finds its datagram and the reply in Stats.
		s.mu.Lock()
		st := &s.stats
		st.Datagrams++
		st.BytesIn += int64(n)
		if _, ok := st.Peers[from]; ok || len(st.Peers) < MaxRecords {
			st.Peers[from]++
		} else {
			st.PeersDropped++
		}
		if reply != nil {
			st.Replies++
			st.BytesOut += int64(len(reply))
		}
		gen := s.gen
		s.cond.Broadcast()
		s.mu.Unlock()
		if reply == nil {
			continue
		}
		if _, err := s.conn.WriteToUDPAddrPort(reply, from); err != nil {
			s.mu.Lock()
			if s.gen == gen { // not reset meanwhile
				s.stats.Replies--
				s.stats.BytesOut -= int64(len(reply))
			}
			s.stats.Errors++
			s.mu.Unlock()
		}
	}
}

// Stats returns a copy of the current statistics.
func (s *UDPServer) Stats() UDPStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot()
}

func (s *UDPServer) snapshot() UDPStats {
	st := s.stats
	st.Peers = maps.Clone(s.stats.Peers)
	return st
}

// ResetStats zeroes the statistics.
func (s *UDPServer) ResetStats() {
	s.mu.Lock()
	s.stats = UDPStats{Peers: map[netip.AddrPort]int{}}
	s.gen++
	s.mu.Unlock()
}

// WaitDatagrams waits until at least n datagrams were received since the
// last ResetStats, or ctx ends, and returns the statistics at that moment.
func (s *UDPServer) WaitDatagrams(ctx context.Context, n int64) (UDPStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	waitLocked(ctx, &s.mu, s.cond, func() bool { return s.stats.Datagrams >= n })
	st := s.snapshot()
	if st.Datagrams < n {
		return st, fmt.Errorf("testnet: %d of %d datagrams received on %v: %w", st.Datagrams, n, s.Addr(), ctx.Err())
	}
	return st, nil
}

// Close closes the socket and waits for the server's goroutine. It is
// idempotent.
func (s *UDPServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.conn.Close()
	<-s.done
	return err
}

// DialUDP opens a connected UDP socket from inside the host's namespace to
// addr ("ip:port"), from the local address and port src (the kernel's
// choice of address when src's is the zero Addr, an ephemeral port when
// its port is 0). A fixed port is bound with SO_REUSEADDR. On a connected
// socket an ICMP port unreachable for its peer makes the next read or
// write fail with ECONNREFUSED (IsRefused).
func (h *Host) DialUDP(src netip.AddrPort, addr string) (*net.UDPConn, error) {
	d := dialerFrom(src, net.UDPAddrFromAddrPort(src))
	var c net.Conn
	err := h.Do(func() error {
		var err error
		c, err = d.Dial("udp4", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testnet: dial udp %s from %s: %w", addr, h.NS, err)
	}
	return c.(*net.UDPConn), nil
}

// UDPExchange sends req on the connected socket c and reads one reply,
// within timeout. ECONNREFUSED (a port unreachable) is returned as is.
func UDPExchange(c *net.UDPConn, req []byte, timeout time.Duration) ([]byte, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// WaitUDP polls, every 50 ms, until an exchange of req from h to addr (a
// UDP server that answers, directly or through XLB) gets a reply, or
// timeout passes, and returns the reply. The probes are real datagrams: a
// UDPServer counts them (ResetStats afterwards).
func WaitUDP(h *Host, addr string, req []byte, timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		c, err := h.DialUDP(netip.AddrPort{}, addr)
		if err == nil {
			var reply []byte
			reply, err = UDPExchange(c, req, 500*time.Millisecond)
			c.Close()
			if err == nil {
				return reply, nil
			}
		}
		last = err
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("testnet: %s: no UDP reply from %s within %v: %w", h.NS, addr, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// IsRefused reports whether err is ECONNREFUSED: on a connected UDP
// socket, an ICMP port unreachable from its peer.
func IsRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// udpAddrPort converts a *net.UDPAddr to an unmapped netip.AddrPort.
func udpAddrPort(a net.Addr) netip.AddrPort {
	ua, ok := a.(*net.UDPAddr)
	if !ok || ua == nil {
		return netip.AddrPort{}
	}
	ap := ua.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
