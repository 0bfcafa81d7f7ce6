package testnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted (as by
// `ip netns add`), so `ip -n NAME` and `nsenter --net=NetnsDir/NAME` find
// them.
const NetnsDir = "/run/netns"

// createNamed creates the named namespace NetnsDir/name and returns an
// open handle to it. setup, if not nil, runs inside the new namespace
// before the thread switches back (e.g. to write sysctls). A name already
// in use is an error (the other namespace is left alone). On error nothing
// is left behind.
func createNamed(name string, setup func() error) (netns.NsHandle, error) {
	path := filepath.Join(NetnsDir, name)
	if _, err := os.Lstat(path); err == nil {
		return netns.None(), fmt.Errorf("testnet: netns %s already exists", name)
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
		return netns.None(), fmt.Errorf("testnet: create netns %s: %w", name, err)
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
		return fmt.Errorf("testnet: %w", err)
	}
	err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point yet
		if err = unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("testnet: make %s a shared mount: %w", NetnsDir, err)
	}
	return nil
}

// deleteNamed unmounts and removes NetnsDir/name. A missing namespace is
// not an error. The kernel frees the namespace (and its links) once no
// process, socket or handle refers to it.
func deleteNamed(name string) error {
	err := netns.DeleteNamed(name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Not a mount point (half-created): remove the file anyway.
	if rmErr := os.Remove(filepath.Join(NetnsDir, name)); rmErr == nil || errors.Is(rmErr, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("testnet: delete netns %s: %w", name, err)
}
