package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// run runs a command on the host and returns its combined output; the
// error includes the output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// inNetns runs f on an OS thread switched into the namespace at path and
// switches it back afterwards (the thread is discarded if that fails).
// Sockets created in f stay in the namespace.
func inNetns(path string, f func() error) error {
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter netns %s: %w", path, err)
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			// Stay locked: the runtime drops this thread with the goroutine.
			done <- errors.Join(ferr, fmt.Errorf("restore netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// dialIn opens a TCP connection from inside the namespace at path.
func dialIn(ctx context.Context, path, addr string) (*net.TCPConn, error) {
	var c net.Conn
	err := inNetns(path, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// listenIn opens a TCP listener inside the namespace at path; accepted
// connections get the keepalive settings ka.
func listenIn(path, addr string, ka net.KeepAliveConfig) (net.Listener, error) {
	var l net.Listener
	err := inNetns(path, func() error {
		var err error
		lc := net.ListenConfig{KeepAliveConfig: ka}
		l, err = lc.Listen(context.Background(), "tcp", addr)
		return err
	})
	return l, err
}
