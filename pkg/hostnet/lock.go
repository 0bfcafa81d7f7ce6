package hostnet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NetnsLock is the instance lock of one network namespace.
type NetnsLock struct {
	f    *os.File
	path string
}

// LockNetns takes the instance lock of the caller's network namespace in
// dir: one XLB per namespace, since two would share the sysctls,
// neighbours and interfaces and each would undo the other's settings on
// stop. The lock (flock) lasts until Release or the end of the process,
// crash included.
func LockNetns(dir string) (*NetnsLock, error) {
	path, err := namespaceFile(dir, "netns-%d.lock")
	if err != nil {
		return nil, fmt.Errorf("instance lock: %w", err)
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("instance lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("another xlb is running in this network namespace (lock %s held); one instance per network namespace", path)
			}
			return nil, fmt.Errorf("instance lock %s: %w", path, err)
		}
		// The holder before us may have removed the file between our open
		// and our flock: then we hold a lock on a file nobody else can
		// find. Retry on the file now at the path.
		var held, named unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &named) == nil && held.Ino == named.Ino {
			return &NetnsLock{f: f, path: path}, nil
		}
		f.Close()
	}
}

// Release removes the lock file and releases the lock.
func (l *NetnsLock) Release() error {
	err := os.Remove(l.path)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// namespaceFile is the path of the caller's network namespace's file in dir
// (created if missing): name with the namespace cookie for its %d.
func namespaceFile(dir, name string) (string, error) {
	cookie, err := netnsCookie()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return filepath.Join(dir, fmt.Sprintf(name, cookie)), nil
}

// netnsCookie returns the caller's network namespace cookie (SO_NETNS_COOKIE).
func netnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("netns cookie: %w", err)
	}
	defer unix.Close(fd)
	var cookie uint64
	l := uint32(8)
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_NETNS_COOKIE,
		uintptr(unsafe.Pointer(&cookie)), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("netns cookie: %w", errno)
	}
	return cookie, nil
}
