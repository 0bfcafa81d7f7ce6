package dataplane

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	nlflags "github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// LeftPins is what DetachPinned found and removed under a state_dir.
type LeftPins struct {
	// Links are the interfaces whose pinned XDP link was detached, sorted
	// (an interface that is gone is named by its index, "ifindex N").
	Links []string
	// Pins counts the pinned objects removed: maps, links and the
	// metadata record, in state_dir and in its staging and retired
	// directories.
	Pins int
}

// DetachPinned takes down what a process that no longer runs left pinned
// under stateDir (DESIGN §6: a crash or SIGKILL keeps forwarding through
// the pinned links): every pinned XDP link is detached from its
// interface, then every pin and directory under stateDir is removed, and
// stateDir itself unless it is a mount point (EBUSY) or its parent is
// read-only (EROFS), as at a stop. A stateDir that does not exist holds
// nothing. The caller makes sure that no process owns the pins (the
// instance lock): a running instance would lose its data path.
func DetachPinned(stateDir string) (LeftPins, error) {
	var out LeftPins
	if stateDir == "" {
		return out, nil
	}
	var pins []string
	err := filepath.WalkDir(stateDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == stateDir {
				return fs.SkipAll
			}
			return err
		}
		if !e.IsDir() {
			pins = append(pins, path)
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("dataplane: state_dir %s: %w", stateDir, err)
	}
	var errs []error
	for _, p := range pins {
		name, err := detachPinnedLink(p)
		if err != nil {
			errs = append(errs, err)
		} else if name != "" {
			out.Links = append(out.Links, name)
		}
	}
	sort.Strings(out.Links)
	out.Pins = len(pins)
	entries, err := os.ReadDir(stateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(stateDir, e.Name())))
	}
	if err := os.Remove(stateDir); err != nil && !errors.Is(err, os.ErrNotExist) &&
		!errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EROFS) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("dataplane: detach and remove the pins under %s: %w", stateDir, err)
	}
	return out, nil
}

// detachPinnedLink detaches the link pinned at path and returns its
// interface's name; "" when the pin is not an XDP link (a map, the
// metadata record).
func detachPinnedLink(path string) (string, error) {
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return "", nil // not a link
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil || info.XDP() == nil {
		return "", nil
	}
	idx := int(info.XDP().Ifindex)
	name := fmt.Sprintf("ifindex %d", idx)
	if ifc, err := net.InterfaceByIndex(idx); err == nil {
		name = ifc.Name
	}
	if err := l.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) && !errors.Is(err, unix.ENOLINK) {
		return "", fmt.Errorf("detach the XDP link pinned at %s (%s): %w", path, name, err)
	}
	return name, nil
}

// DetachNetlinkXDP removes the XDP program with id progID from the
// interface ifname when it is still the one attached there through
// netlink (a process that crashed attached it; XDP bpf_links were
// refused). It reports whether it detached it; an interface that is gone
// or holds another program (or none) is left alone.
func DetachNetlinkXDP(ifname string, progID uint32) (bool, error) {
	nl, err := netlink.LinkByName(ifname)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return false, nil
		}
		return false, fmt.Errorf("dataplane: interface %q: %w", ifname, err)
	}
	x := nl.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId != progID {
		return false, nil
	}
	flags := nlflags.XDP_FLAGS_DRV_MODE
	if x.AttachMode == nlflags.XDP_ATTACHED_SKB {
		flags = nlflags.XDP_FLAGS_SKB_MODE
	}
	if err := netlink.LinkSetXdpFdWithFlags(nl, -1, flags); err != nil {
		return false, fmt.Errorf("dataplane: detach the XDP program (id %d) from %s: %w", progID, ifname, err)
	}
	return true, nil
}
