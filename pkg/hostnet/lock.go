package hostnet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrInstanceRunning is LockNetns's error when another process holds the
// namespace's instance lock: an xlb runs there.
var ErrInstanceRunning = errors.New("another xlb is running in this network namespace")

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
				return nil, fmt.Errorf("%w (lock %s held); one instance per network namespace", ErrInstanceRunning, path)
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

// NamespaceFile is the path of the caller's network namespace's file in
// dir (dir is created, mode 0700, if missing): name with the namespace's
// cookie (unique for the boot) for its %d. Several instances on one host,
// each in its own namespace, keep their state in one directory this way.
func NamespaceFile(dir, name string) (string, error) { return namespaceFile(dir, name) }

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

// AdoptLock takes over the instance lock a running predecessor handed
// over (hot upgrade): f is the predecessor's lock file, inherited as a
// file descriptor. flock locks belong to the open file, which both
// processes now share, so the lock stays held without a gap; AdoptLock
// checks that f is this network namespace's lock file in dir.
func AdoptLock(dir string, f *os.File) (*NetnsLock, error) {
	path, err := namespaceFile(dir, "netns-%d.lock")
	if err != nil {
		return nil, fmt.Errorf("instance lock: %w", err)
	}
	var held, named unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		return nil, fmt.Errorf("instance lock: inherited descriptor: %w", err)
	}
	if err := unix.Stat(path, &named); err != nil || held.Ino != named.Ino || held.Dev != named.Dev {
		return nil, fmt.Errorf("instance lock: the inherited descriptor is not %s, this network namespace's lock (a hand-off across namespaces?)", path)
	}
	return &NetnsLock{f: f, path: path}, nil
}

// File is the lock's open file, to hand over to a successor (hot
// upgrade), which then holds the same lock.
func (l *NetnsLock) File() *os.File { return l.f }

// Abandon closes this process's descriptor of the lock without removing
// the file: a successor that shares the open file keeps the lock.
func (l *NetnsLock) Abandon() error { return l.f.Close() }

// NetnsCookie returns the caller's network namespace cookie
// (SO_NETNS_COOKIE): unique for the boot, never reused.
func NetnsCookie() (uint64, error) { return netnsCookie() }
