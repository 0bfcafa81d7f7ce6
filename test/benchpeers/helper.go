package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
)

// The idle load holds more sockets than one process may open here (the
// descriptor limit, RLIMIT_NOFILE), so helper processes hold them: this
// binary started again, in a lab namespace, with a helper command as its
// first argument. A helper lives until its standard input ends (the
// parent closes it, or the parent dies) and reports on standard output.
const (
	helperServe = "idle-serve" // idle-serve PORT: smallEcho on :PORT, SO_REUSEPORT
	helperDial  = "idle-dial"  // idle-dial N PERIOD TARGET,…: N connections, a trickle

	helperReady = "ready" // first line of a helper that is set up
)

// helperConns is how many sockets a helper holds at most: well within
// the smallest descriptor limit a helper may inherit (20,000 seen here).
const helperConns = 15000

// runHelper runs the helper command args[0] and reports whether args
// named one.
func runHelper(args []string) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case helperServe:
		return true, serveHelper(args[1:])
	case helperDial:
		return true, dialHelper(args[1:])
	}
	return false, nil
}

// reusePort lets helpers' listeners share a port (SO_REUSEPORT): the
// kernel spreads new connections over them.
func reusePort(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
	return errors.Join(err, serr)
}

// serveHelper serves smallEcho on :PORT until standard input ends.
func serveHelper(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s PORT", helperServe)
	}
	lc := net.ListenConfig{KeepAlive: -1, Control: reusePort}
	ln, err := lc.Listen(context.Background(), "tcp", ":"+args[0])
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			go func() {
				defer c.Close()
				smallEcho(c)
			}()
		}
	}()
	fmt.Println(helperReady)
	io.Copy(io.Discard, os.Stdin)
	return ln.Close()
}

// dialHelper opens N connections to the targets (round robin) and
// writes a byte on each every PERIOD until standard input ends; then it
// prints how many trickle writes failed.
func dialHelper(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("%s N PERIOD TARGET,…", helperDial)
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	period, err := time.ParseDuration(args[1])
	if err != nil {
		return err
	}
	var targets []netip.AddrPort
	for _, s := range strings.Split(args[2], ",") {
		t, err := netip.ParseAddrPort(s)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	conns, err := openIdle(context.Background(), targets, n)
	if err != nil {
		fmt.Println(err)
		return err
	}
	fmt.Println(helperReady)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- trickle(ctx, conns, period) }()
	io.Copy(io.Discard, os.Stdin)
	stop()
	failed := <-done
	for _, c := range conns {
		c.Close()
	}
	fmt.Println(failed)
	return nil
}

// helper is a running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startHelper starts this binary as a helper in h's namespace and waits
// (up to timeout) for its ready line.
func startHelper(h *testnet.Host, timeout time.Duration, args ...string) (*helper, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := h.Command(context.Background(), exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	hp := &helper{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line := make(chan string, 1)
	go func() {
		l, _ := hp.out.ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	select {
	case l := <-line:
		if l == helperReady {
			return hp, nil
		}
		hp.stop()
		return nil, fmt.Errorf("helper %s in %s: %s", args[0], h.NS, l)
	case <-time.After(timeout):
		hp.stdin.Close()
		hp.cmd.Process.Kill()
		hp.cmd.Wait()
		return nil, fmt.Errorf("helper %s in %s: not ready within %v", args[0], h.NS, timeout)
	}
}

// stop closes the helper's standard input, waits (up to 60 s, then kills
// it) for it to exit and returns the last line it printed.
func (hp *helper) stop() (string, error) {
	hp.stdin.Close()
	rest := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(hp.out)
		rest <- strings.TrimSpace(string(b))
	}()
	select {
	case s := <-rest:
		lines := strings.Split(s, "\n")
		return lines[len(lines)-1], hp.cmd.Wait()
	case <-time.After(60 * time.Second):
		hp.cmd.Process.Kill()
		hp.cmd.Wait()
		return "", fmt.Errorf("helper %v did not exit within 60s", hp.cmd.Args)
	}
}

// stopHelpers stops every helper and returns their last lines.
func stopHelpers(hs []*helper) ([]string, error) {
	var lines []string
	var errs []error
	for _, hp := range hs {
		l, err := hp.stop()
		lines = append(lines, l)
		errs = append(errs, err)
	}
	return lines, errors.Join(errs...)
}
