package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// dropForeignLinksLocked detaches and unpins the links pinned for
// interfaces this process has not attached (removed from the config), and
// takes their interfaces out of the redirect map.
func (d *Dataplane) dropForeignLinksLocked() error {
	entries, err := os.ReadDir(filepath.Join(d.stateDir, linksDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dataplane: state_dir %s: %w", d.stateDir, err)
	}
	var errs []error
	for _, e := range entries {
		name := ifnameOfLink(e.Name())
		if a, ok := d.attached[name]; ok && a.link != nil {
			continue
		}
		errs = append(errs, d.dropLinkPin(linkPath(d.stateDir, name)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: detach the links of interfaces no longer configured: %w", err)
	}
	return nil
}

// dropLinkPin detaches the link pinned at path and removes the pin.
func (d *Dataplane) dropLinkPin(path string) error {
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return errors.Join(err, os.Remove(path))
	}
	defer l.Close()
	if info, err := l.Info(); err == nil && info.XDP() != nil {
		idx := info.XDP().Ifindex
		if !d.attachedIndexLocked(int(idx)) {
			if err := d.objs.XlbTxPorts.Delete(idx); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
		}
	}
	if err := l.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) && !errors.Is(err, unix.ENOLINK) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return l.Unpin()
}

func (d *Dataplane) attachedIndexLocked(ifindex int) bool {
	for _, a := range d.attached {
		if a.Ifindex == ifindex {
			return true
		}
	}
	return false
}

// unpinAllLocked removes everything under state_dir and the directory
// itself (Close: SIGTERM's end). Links still pinned there are detached
// first. The directory stays, empty, when it is a mount point (EBUSY) or
// its parent is read-only (EROFS): the packaged unit's sandbox
// (ProtectKernelTunables=yes) leaves only state_dir writable in
// /sys/fs/bpf, bound onto itself.
func (d *Dataplane) unpinAllLocked() error {
	if d.stateDir == "" {
		return nil
	}
	errs := []error{d.dropForeignLinksLocked()}
	entries, err := os.ReadDir(d.stateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(d.stateDir, e.Name())))
	}
	if err := os.Remove(d.stateDir); err != nil && !errors.Is(err, os.ErrNotExist) &&
		!errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EROFS) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: remove the pins under %s: %w", d.stateDir, err)
	}
	return nil
}
