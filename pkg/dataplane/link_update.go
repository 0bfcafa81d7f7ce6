package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// replaceLocked replaces a predecessor's program on a.Interface in place:
// its pinned link's (updatePinnedLinkLocked), else its netlink-attached
// one (replaceStaleLocked). It reports whether there was one.
func (d *Dataplane) replaceLocked(a *Attachment, mode Mode) (bool, error) {
	if ok, err := d.updatePinnedLinkLocked(a, mode); ok || err != nil {
		return ok, err
	}
	return d.replaceStaleLocked(a, mode)
}

// updatePinnedLinkLocked swaps the program of the link pinned for
// a.Interface for this process's: one atomic replacement (BPF_LINK_UPDATE),
// never a detach. A pin whose link no longer runs on this interface (the
// interface was removed, or re-created under another index) is dropped.
func (d *Dataplane) updatePinnedLinkLocked(a *Attachment, mode Mode) (bool, error) {
	if !d.fromPins {
		return false, nil
	}
	p := linkPath(d.stateDir, a.Interface)
	l, err := link.LoadPinnedLink(p, nil)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dataplane: open the pinned link %s: %w", p, err)
	}
	info, err := l.Info()
	if err != nil || info.XDP() == nil || int(info.XDP().Ifindex) != a.Ifindex {
		err = errors.Join(err, l.Unpin(), l.Close())
		if err != nil {
			return false, fmt.Errorf("dataplane: drop the stale link pin %s: %w", p, err)
		}
		return false, nil
	}
	nl, err := netlink.LinkByIndex(a.Ifindex)
	if err == nil && nl.Attrs().Xdp == nil {
		err = errors.New("netlink reports no XDP program")
	}
	if err != nil {
		l.Close()
		return false, fmt.Errorf("dataplane: interface %q: %w", a.Interface, err)
	}
	cur, err := d.keepModeLocked(a, mode, nl.Attrs().Xdp.AttachMode)
	if err != nil {
		l.Close()
		return false, err
	}
	if err := d.updateLink(l, a); err != nil {
		l.Close()
		return false, fmt.Errorf("dataplane: replace the program of the link pinned at %s: %w", p, err)
	}
	a.link, a.pinned, a.Mode, a.Via, a.Adopted = l, true, cur, PathBPFLink, true
	d.setFeatureLocked(FeatureXDPLink, StateAvailable, "")
	return true, nil
}

// updateLink points l at this process's program. The kernel refuses
// (EINVAL) a program whose expected attach type differs from the one the
// link was created with (a predecessor built with another cilium/ebpf,
// cilium/cilium#44063): the program is then loaded with the other attach
// type and the update tried once more.
func (d *Dataplane) updateLink(l link.Link, a *Attachment) error {
	err := l.Update(a.prog)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	alt, aerr := d.altProgramLocked()
	if aerr != nil {
		return fmt.Errorf("%w; loading the program with the other attach type failed: %v", err, aerr)
	}
	if err2 := l.Update(alt); err2 != nil {
		return fmt.Errorf("%w; with the other attach type too: %v", err, err2)
	}
	a.prog = alt
	return nil
}

// altProgramLocked loads the XDP program once more, against the same maps,
// with the other expected attach type (AttachNone for AttachXDP, and back).
func (d *Dataplane) altProgramLocked() (*ebpf.Program, error) {
	if d.altProg != nil {
		return d.altProg, nil
	}
	spec := d.spec.Copy()
	ps := spec.Programs[xlbProgXlbXdp]
	if ps.AttachType == ebpf.AttachNone {
		ps.AttachType = ebpf.AttachXDP
	} else {
		ps.AttachType = ebpf.AttachNone
	}
	var objs struct {
		Prog *ebpf.Program `ebpf:"xlb_xdp"`
	}
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: d.mapsByName()}); err != nil {
		return nil, err
	}
	d.altProg = objs.Prog
	return d.altProg, nil
}

// Reclaim takes the interfaces back after a failed hand-off, in the
// process that handed over (DESIGN §6): the successor may have swapped
// its program in and rewritten the config before it failed. It points
// every link back at this process's program (link.Update; a netlink
// attachment is replaced by one netlink call) after recording each
// interface's MAC again (ifmacs.go), puts its interfaces back
// into the redirect map, rewrites its config and its services (records
// and listen keys), and, when it had pinned,
// restores its pins where the successor replaced them. The caller
// republishes its routable set. Like Attach, it runs in the network
// namespace of the interfaces.
func (d *Dataplane) Reclaim() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return errClosed
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(d.attached)) {
		if err := d.reclaimLocked(d.attached[name]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	errs = append(errs, d.writeConfigLocked(d.cfg), d.reclaimServicesLocked())
	if d.pinned && d.stateDir != "" {
		errs = append(errs, d.pinLocked(d.lastPin))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: reclaim the data path: %w", err)
	}
	return nil
}

// reclaimLocked takes one interface back: its MAC recorded again (it may
// have changed while the successor ran), this process's program on it,
// and its redirect map entry.
func (d *Dataplane) reclaimLocked(a *Attachment) error {
	ifc, err := net.InterfaceByIndex(a.Ifindex)
	if err != nil {
		return err
	}
	if err := d.writeIfMACLocked(a.Ifindex, ifc.HardwareAddr); err != nil {
		return err
	}
	if a.link != nil {
		err = a.link.Update(a.prog)
	} else {
		var nl netlink.Link
		if nl, err = netlink.LinkByIndex(a.Ifindex); err == nil {
			err = netlink.LinkSetXdpFdWithFlags(nl, a.prog.FD(), netlinkMode(a.Mode))
		}
	}
	if err != nil {
		return err
	}
	idx := uint32(a.Ifindex)
	return d.objs.XlbTxPorts.Update(idx, idx, 0)
}
