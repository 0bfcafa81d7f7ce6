package testnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

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
	return h.DialFromAddr(ctx, netip.AddrPortFrom(netip.Addr{}, uint16(localPort)), addr)
}

// DialFromAddr is Dial from the local address and port src: an address
// of the host (one of a client's extra addresses: the connection comes
// from that client), the kernel's choice when src's address is the zero
// Addr, an ephemeral port when its port is 0. As DialFrom, a fixed port is
// bound with SO_REUSEADDR; to reuse a 4-tuple at once, close the
// connection with SetLinger(0) (a RST: no TIME_WAIT on either side).
func (h *Host) DialFromAddr(ctx context.Context, src netip.AddrPort, addr string) (*net.TCPConn, error) {
	d := dialerFrom(src, net.TCPAddrFromAddrPort(src))
	var c net.Conn
	err := h.Do(func() error {
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		from := h.NS
		if src.Addr().IsValid() {
			from += " " + src.Addr().String()
		}
		return nil, fmt.Errorf("testnet: dial %s from %s: %w", addr, from, err)
	}
	return c.(*net.TCPConn), nil
}

// dialerFrom is a dialer from src (local, its net.Addr form): the
// kernel's choice of address when src's is the zero Addr, an ephemeral
// port when its port is 0, a fixed port bound with SO_REUSEADDR.
func dialerFrom(src netip.AddrPort, local net.Addr) net.Dialer {
	d := net.Dialer{}
	if src.Addr().IsValid() || src.Port() != 0 {
		d.LocalAddr = local
	}
	if src.Port() != 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			})
			return errors.Join(err, serr)
		}
	}
	return d
}

// Listen opens a TCP listener inside the host's namespace on addr
// ("ip:port" or ":port").
func (h *Host) Listen(addr string) (net.Listener, error) {
	return h.listen(net.ListenConfig{}, addr)
}

func (h *Host) listen(lc net.ListenConfig, addr string) (net.Listener, error) {
	var l net.Listener
	err := h.Do(func() error {
		var err error
		l, err = lc.Listen(context.Background(), "tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testnet: listen %s in %s: %w", addr, h.NS, err)
	}
	return l, nil
}

// WaitTCP polls, every 50 ms, until a TCP connection from h to addr
// succeeds (and closes it) or timeout passes. Use generous timeouts: the
// machine is shared and noisy. The probe is a real connection: a Server
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
			return fmt.Errorf("testnet: %s: no TCP connection to %s within %v: %w", h.NS, addr, timeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// EchoCheck opens a TCP connection from h to addr (an echo server, directly
// or through XLB), sends msg while reading, and checks that exactly msg
// comes back. The whole exchange is bounded by timeout.
func (h *Host) EchoCheck(addr string, msg []byte, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := h.Dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	werr := make(chan error, 1)
	go func() { _, err := c.Write(msg); werr <- err }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo of %d bytes differs", len(msg))
	}
	return nil
}
