package health

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/config"
)

// errTimeout is the Result.Err of a check that did not finish within
// timeout_ms.
var errTimeout = errors.New("timeout")

// probe runs one check of kind against t within timeout; the error's text
// becomes Result.Err ("connect: connection refused", "status 503",
// "timeout"). The socket is created on the calling goroutine (so in its
// thread's network namespace, which the namespace tests rely on).
func probe(ctx context.Context, cfg config.HealthCheck, t Target, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if cfg.Type == config.HealthCheckUDP {
		return probeUDP(ctx, cfg, t)
	}
	c, err := dial(ctx, t)
	if err != nil {
		return err
	}
	defer c.Close()
	if cfg.Type != config.HealthCheckHTTP {
		return nil
	}
	return exchange(ctx, c, cfg, t)
}

// dial connects to t from the address and interface the data path uses
// toward the backend (Target.Source, Target.Interface).
func dial(ctx context.Context, t Target) (net.Conn, error) {
	d := net.Dialer{Control: bindControl(t)}
	if t.Source.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: t.Source.AsSlice()}
	}
	c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(t.IP, t.Port).String())
	if err != nil {
		return nil, describe(ctx, "connect", err)
	}
	return c, nil
}

// bindControl sets SO_BINDTODEVICE (the route's egress interface) and,
// for TCP with a source address, IP_BIND_ADDRESS_NO_PORT: the local port
// is picked at connect time per destination, not reserved per source
// address at bind time. A UDP socket binds its port from the ephemeral
// range at bind time. Either way the kernel picks it outside
// snat.port_range, which XLB reserves (net.ipv4.ip_local_reserved_ports
// covers TCP and UDP; DESIGN §1).
func bindControl(t Target) func(network, address string, rc syscall.RawConn) error {
	return func(network, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if t.Source.IsValid() && strings.HasPrefix(network, "tcp") {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
			}
			if serr == nil && t.Interface != "" {
				serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, t.Interface)
				if serr != nil {
					serr = fmt.Errorf("bind to device %s: %w", t.Interface, serr)
				}
			}
		})
		return errors.Join(err, serr)
	}
}

// errUnexpectedReply is the Result.Err of a udp check whose reply does
// not start with expect_hex.
var errUnexpectedReply = errors.New("reply does not start with expect_hex")

// probeUDP runs one type udp check (issue 31): from a connected UDP socket
// (bound as dial binds), it sends cfg.Payload to t and reads one datagram
// before ctx's deadline, which must start with cfg.Expect when that is
// set (any reply passes otherwise). A port unreachable from the backend
// fails the read on the connected socket: "read: connection refused".
func probeUDP(ctx context.Context, cfg config.HealthCheck, t Target) error {
	d := net.Dialer{Control: bindControl(t)}
	if t.Source.IsValid() {
		d.LocalAddr = &net.UDPAddr{IP: t.Source.AsSlice()}
	}
	c, err := d.DialContext(ctx, "udp4", netip.AddrPortFrom(t.IP, t.Port).String())
	if err != nil {
		return describe(ctx, "connect", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write([]byte(cfg.Payload)); err != nil {
		return describe(ctx, "write", err)
	}
	// A longer reply is truncated to the buffer, which still holds the
	// longest expect_hex.
	buf := make([]byte, udpReplyBuffer)
	n, err := c.Read(buf)
	if err != nil {
		return describe(ctx, "read", err)
	}
	if !bytes.HasPrefix(buf[:n], []byte(cfg.Expect)) {
		return errUnexpectedReply
	}
	return nil
}

// udpReplyBuffer is the part of a udp check's reply that is read: more
// than any expect_hex (at most config's 64 bytes).
const udpReplyBuffer = 2048

// exchange sends GET path on c and checks the response's status: the
// request has Host: ip:port and Connection: close; the status line and
// headers must arrive before ctx's deadline (the body is not read).
func exchange(ctx context.Context, c net.Conn, cfg config.HealthCheck, t Target) error {
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	host := netip.AddrPortFrom(t.IP, t.Port).String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+cfg.Path, nil)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	req.Close = true // Connection: close
	req.Header.Set("User-Agent", "xlb-health-check")
	if err := req.Write(c); err != nil {
		return describe(ctx, "write", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return describe(ctx, "read", err)
	}
	resp.Body.Close()
	if resp.StatusCode != cfg.ExpectStatus {
		return errors.New("status " + strconv.Itoa(resp.StatusCode))
	}
	return nil
}

// describe names a failed step: "timeout" when the deadline or ctx ended
// it; otherwise the failed system call and its error when there is one
// ("connect: connection refused", "bind: cannot assign requested
// address"), else "<step>: <cause>".
func describe(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
		return errTimeout
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return fmt.Errorf("%s: %w", se.Syscall, se.Err)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("%s: %w", step, oe.Err)
	}
	return fmt.Errorf("%s: %w", step, err)
}
