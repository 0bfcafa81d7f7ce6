package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
)

// UDPConfig describes a DNS-style UDP load (issue 31): one socket per
// client port, each a sequence of request and reply exchanges with
// Target.
type UDPConfig struct {
	// Target is where every request goes (a UDP service of XLB, a
	// backend), serving testnet.UDPEcho or testnet.UDPNameEcho.
	Target netip.AddrPort
	// FirstPort and Ports: the sockets are bound to ports FirstPort,
	// FirstPort+1, … (Ports of them) on the namespace's address toward
	// Target.
	FirstPort uint16
	Ports     int
	// Exchanges is the number of requests each port sends, one after the
	// other, each once its reply came (0: 1).
	Exchanges int
	// Workers is the number of ports exchanging at once (0:
	// DefaultWorkers).
	Workers int
	// Timeout bounds the wait for each reply (0: DefaultUDPTimeout); a
	// request that gets none is sent again, up to Retries more times.
	Timeout time.Duration
	Retries int
}

// DefaultUDPTimeout is UDPConfig.Timeout's default.
const DefaultUDPTimeout = 500 * time.Millisecond

// UDPReply is one reply a port received: where it came from (the
// source address and port as the socket saw it: unconnected, so a reply
// from anywhere is seen) and its payload.
type UDPReply struct {
	From    netip.AddrPort
	Request string
	Payload []byte
}

// UDPPort is what one client port of a UDP load saw: its replies in
// order (one per exchange that got one), the requests sent again
// (timeouts) and the error that ended it early, if any.
type UDPPort struct {
	Port    uint16
	Replies []UDPReply
	Resent  int
	Err     error
}

// RunUDP runs the UDP load cfg from h until every port is done or ctx
// ends, and returns every port's outcome, in port order. Request n of
// port p is "p.n" (a reply that does not end with its request is a stray
// one of an earlier request and is skipped). An exchange that gets no
// reply after Retries resends ends its port with an error. The sockets
// are not connected, so a reply from any source is seen (UDPReply.From)
// and an ICMP error is not (a port unreachable shows as a timeout).
func RunUDP(ctx context.Context, h *testnet.Host, cfg UDPConfig) ([]UDPPort, error) {
	if cfg.Ports < 1 || int(cfg.FirstPort)+cfg.Ports-1 > 65535 || cfg.FirstPort == 0 {
		return nil, fmt.Errorf("loadgen: UDP ports %d..+%d", cfg.FirstPort, cfg.Ports)
	}
	if cfg.Exchanges == 0 {
		cfg.Exchanges = 1
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultUDPTimeout
	}
	out := make([]UDPPort, cfg.Ports)
	conns := make([]*net.UDPConn, cfg.Ports)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	// Sockets are opened in the namespace, then used from any goroutine.
	err := h.Do(func() error {
		for i := range conns {
			port := cfg.FirstPort + uint16(i)
			out[i].Port = port
			lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				err := rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
				})
				return errors.Join(err, serr)
			}}
			pc, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf(":%d", port))
			if err != nil {
				return fmt.Errorf("loadgen: bind udp port %d in %s: %w", port, h.NS, err)
			}
			conns[i] = pc.(*net.UDPConn)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(cfg.Workers, cfg.Ports) {
		wg.Go(func() {
			for i := range next {
				out[i] = exchangeUDP(ctx, conns[i], out[i].Port, cfg)
			}
		})
	}
	for i := range conns {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	return out, ctx.Err()
}

// exchangeUDP runs one port's exchanges on c.
func exchangeUDP(ctx context.Context, c *net.UDPConn, port uint16, cfg UDPConfig) UDPPort {
	r := UDPPort{Port: port}
	buf := make([]byte, 64<<10)
	to := net.UDPAddrFromAddrPort(cfg.Target)
	for n := range cfg.Exchanges {
		req := fmt.Sprintf("%d.%d", port, n)
		got := false
		for try := 0; !got && try <= cfg.Retries; try++ {
			if ctx.Err() != nil {
				r.Err = ctx.Err()
				return r
			}
			if try > 0 {
				r.Resent++
			}
			if _, err := c.WriteToUDP([]byte(req), to); err != nil {
				r.Err = fmt.Errorf("request %q: %w", req, err)
				return r
			}
			if err := c.SetReadDeadline(time.Now().Add(cfg.Timeout)); err != nil {
				r.Err = err
				return r
			}
			for {
				m, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						break // resend
					}
					r.Err = fmt.Errorf("request %q: %w", req, err)
					return r
				}
				p := buf[:m]
				if len(p) < len(req) || string(p[len(p)-len(req):]) != req {
					continue // a late reply to an earlier request
				}
				r.Replies = append(r.Replies, UDPReply{From: netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), Request: req,
					Payload: append([]byte(nil), p...)})
				got = true
				break
			}
		}
		if !got {
			r.Err = fmt.Errorf("request %q: no reply after %d tries of %v", req, cfg.Retries+1, cfg.Timeout)
			return r
		}
	}
	return r
}
