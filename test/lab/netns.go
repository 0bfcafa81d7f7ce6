package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted (as by
// `ip netns add`).
const NetnsDir = "/run/netns"

// onLockedThread runs f on a fresh goroutine locked to its OS thread and
// waits for it. f may switch the thread's network namespace; afterwards the
// thread is switched back to the namespace it started in. If that fails the
// goroutine exits still locked, so the Go runtime discards the thread
// instead of reusing it in the wrong namespace. A panic in f is re-raised
// on the caller's goroutine.
func onLockedThread(f func() error) error {
	type result struct {
		err      error
		panicked bool
		value    any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("lab: get current netns: %w", err)}
			return
		}
		defer orig.Close()
		var r result
		func() {
			defer func() {
				if v := recover(); v != nil {
					r = result{panicked: true, value: v}
				}
			}()
			r.err = f()
		}()
		if err := netns.Set(orig); err != nil {
			// Stay locked: the thread dies with this goroutine.
			r.err = errors.Join(r.err, fmt.Errorf("lab: restore netns (thread discarded): %w", err))
			done <- r
			return
		}
		runtime.UnlockOSThread()
		done <- r
	}()
	r := <-done
	if r.panicked {
		panic(r.value)
	}
	return r.err
}

// inNamespace runs f on a locked thread switched into ns.
func inNamespace(ns netns.NsHandle, f func() error) error {
	return onLockedThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("lab: enter netns: %w", err)
		}
		return f()
	})
}

// createNamespace creates the named namespace NetnsDir/name and returns an
// open handle to it. setup, if not nil, runs inside the new namespace
// before the thread switches back (e.g. to write sysctls). On error nothing
// is left behind.
func createNamespace(name string, setup func() error) (netns.NsHandle, error) {
	path := filepath.Join(NetnsDir, name)
	if _, err := os.Lstat(path); err == nil {
		return netns.None(), fmt.Errorf("lab: netns %s already exists", name)
	}
	if err := prepareNetnsDir(); err != nil {
		return netns.None(), err
	}
	h := netns.None()
	err := onLockedThread(func() error {
		var err error
		h, err = netns.NewNamed(name)
		if err != nil {
			return err
		}
		if setup != nil {
			return setup()
		}
		return nil
	})
	if err != nil {
		if h.IsOpen() {
			h.Close()
			_ = netns.DeleteNamed(name)
		}
		// netns.NewNamed leaves the file behind if the bind mount fails.
		_ = os.Remove(path)
		return netns.None(), fmt.Errorf("lab: create netns %s: %w", name, err)
	}
	return h, nil
}

var netnsDirMu sync.Mutex

// prepareNetnsDir makes NetnsDir a shared mount point, as `ip netns add`
// does, so namespace mounts and their removal propagate into mount
// namespaces created later (ip netns exec, containers) instead of keeping
// removed namespaces alive there.
func prepareNetnsDir() error {
	netnsDirMu.Lock()
	defer netnsDirMu.Unlock()
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point yet
		if err = unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("lab: make %s a shared mount: %w", NetnsDir, err)
	}
	return nil
}

// deleteNamespace unmounts and removes NetnsDir/name. A missing namespace
// is not an error. The kernel frees the namespace (and its links) once no
// process, socket or handle refers to it.
func deleteNamespace(name string) error {
	err := netns.DeleteNamed(name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Not a mount point (half-created): remove the file anyway.
	if rmErr := os.Remove(filepath.Join(NetnsDir, name)); rmErr == nil || errors.Is(rmErr, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("lab: delete netns %s: %w", name, err)
}

// disableIPv6 turns IPv6 off for all current and future interfaces of the
// calling thread's namespace. A kernel without IPv6 is fine.
func disableIPv6() error {
	for _, p := range []string{
		"/proc/sys/net/ipv6/conf/default/disable_ipv6",
		"/proc/sys/net/ipv6/conf/all/disable_ipv6",
	} {
		if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("lab: %s: %w", p, err)
		}
	}
	return nil
}
