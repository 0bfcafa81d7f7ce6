package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	nlflags "github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/limits"
)

// Mode is an XDP attach mode.
type Mode string

// Attach modes (config xdp_mode).
const (
	ModeAuto    Mode = limits.XDPModeAuto    // native, falling back to generic
	ModeNative  Mode = limits.XDPModeNative  // driver mode only
	ModeGeneric Mode = limits.XDPModeGeneric // SKB mode only
)

// Attachment is the program attached to one interface.
type Attachment struct {
	Interface string
	Ifindex   int
	Mode      Mode // ModeNative or ModeGeneric: what is attached
	// Via is how the program is attached: PathBPFLink (detached by the
	// kernel when XLB's process ends) or PathNetlink (stays attached until
	// detached; see Options.StaleXDP).
	Via string
	// ProgID is the attached program's kernel id.
	ProgID uint32
	// Fallback is the native-mode error that made ModeAuto fall back to
	// generic; nil otherwise. The caller logs it once.
	Fallback error
	// Adopted: a predecessor's program was replaced in place, never
	// detached (DESIGN §6): the program of its pinned bpf_link swapped
	// with link.Update, or its netlink-attached program (Options.StaleXDP)
	// replaced with one netlink call.
	Adopted bool
	link    link.Link     // PathBPFLink only
	pinned  bool          // link is pinned (at state_dir/links/Interface)
	prog    *ebpf.Program // the program attached (link_update.go: either attach type)
}

// Attach attaches the program to the named interface (in the caller's network
// namespace) with the requested mode and adds the interface to the redirect
// map. The interface's own MAC is recorded before the program runs there
// (ifmacs.go): frames addressed to another MAC pass to the kernel. ModeAuto tries native first and falls back to generic, reporting the
// native error in Attachment.Fallback; ModeNative and ModeGeneric are strict.
//
// The program is attached through a bpf_link when the kernel allows it
// (FeatureXDPLink; the first attach is its probe) and through netlink
// otherwise. A predecessor's program is replaced in place, never detached
// (Attachment.Adopted): the program of the interface's link pinned under
// state_dir is swapped with link.Update (once more with the other program
// attach type when the kernel refuses the first, cilium/cilium#44063), and
// a program a predecessor attached through netlink (Options.StaleXDP,
// matched by program id) is replaced by one netlink call. Its mode is kept:
// a strict mode that differs is an error (changing it needs a restart).
// Any other program already attached is an error: XLB never replaces a
// stranger. After a replacement during a migration, the predecessor's
// flows and counters are copied a second time (its program no longer runs
// here).
func (d *Dataplane) Attach(ifname string, mode Mode) (*Attachment, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("dataplane: interface %q: %w", ifname, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.attached[ifname]; ok {
		return nil, fmt.Errorf("dataplane: interface %q is already attached", ifname)
	}
	switch mode {
	case ModeNative, ModeGeneric, ModeAuto, "":
	default:
		return nil, fmt.Errorf("dataplane: unknown XDP mode %q", mode)
	}
	a := &Attachment{Interface: ifname, Ifindex: ifc.Index, prog: d.objs.XlbXdp}
	if err := d.writeIfMACLocked(ifc.Index, ifc.HardwareAddr); err != nil {
		return nil, err
	}
	replaced, err := d.replaceLocked(a, mode)
	if err != nil {
		d.dropIfMACLocked(ifc.Index)
		return nil, err
	}
	if !replaced {
		switch mode {
		case ModeNative, ModeGeneric:
			a.Mode = mode
			err = d.attachLocked(a)
		default:
			a.Mode = ModeNative
			if err = d.attachLocked(a); err != nil {
				a.Fallback = err
				a.Mode = ModeGeneric
				err = d.attachLocked(a)
			}
		}
		if err != nil {
			d.dropIfMACLocked(ifc.Index)
			return nil, fmt.Errorf("dataplane: attach XDP (%s) to %s: %w%s", a.Mode, ifname, err, attachHint(ifname, a.Mode, err))
		}
	}
	idx := uint32(ifc.Index)
	if err := d.objs.XlbTxPorts.Update(idx, idx, 0); err != nil {
		if replaced && a.link != nil {
			a.link.Close() // pinned: stays attached
		} else if !replaced {
			d.detachAttachment(a)
			d.dropIfMACLocked(ifc.Index)
		}
		return nil, fmt.Errorf("dataplane: add %s to the redirect map: %w", ifname, err)
	}
	if info, err := a.prog.Info(); err == nil {
		if id, ok := info.ID(); ok {
			a.ProgID = uint32(id)
		}
	}
	d.attached[ifname] = a
	if replaced && d.migration != nil {
		if err := d.migration.CatchUp(); err != nil {
			return nil, fmt.Errorf("dataplane: migrate: the second copy after replacing the program on %s: %w (the pins are not replaced before Pin)", ifname, err)
		}
	}
	return a, nil
}

// attachLocked attaches in a.Mode through a bpf_link, or through netlink
// when XDP links are refused (the first refusal is recorded as the
// FeatureXDPLink probe's outcome).
func (d *Dataplane) attachLocked(a *Attachment) error {
	if st := d.features.Get(FeatureXDPLink).State; st == StateAvailable || st == StateUnknown {
		flags := link.XDPDriverMode
		if a.Mode == ModeGeneric {
			flags = link.XDPGenericMode
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: a.prog, Interface: a.Ifindex, Flags: flags})
		if err == nil {
			d.setFeatureLocked(FeatureXDPLink, StateAvailable, "")
			a.link, a.Via = l, PathBPFLink
			return nil
		}
		if !linkRefused(err) {
			return err
		}
		d.setFeatureLocked(FeatureXDPLink, StateRefused, probeError(err))
	}
	nl, err := netlink.LinkByIndex(a.Ifindex)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetXdpFdWithFlags(nl, a.prog.FD(), nlflags.XDP_FLAGS_UPDATE_IF_NOEXIST|netlinkMode(a.Mode)); err != nil {
		return err
	}
	a.Via = PathNetlink
	return nil
}

// linkRefused tells whether a bpf_link attach failed because XDP links are
// unavailable (old kernel, or refused by a policy), as opposed to a reason
// that netlink would meet too (another program attached, no native XDP).
func linkRefused(err error) bool {
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) ||
		errors.Is(err, unix.EINVAL)
}

func netlinkMode(m Mode) int {
	if m == ModeGeneric {
		return nlflags.XDP_FLAGS_SKB_MODE
	}
	return nlflags.XDP_FLAGS_DRV_MODE
}

// replaceStaleLocked replaces the program a predecessor attached to the
// interface through netlink, if it is still the one attached, with one
// netlink call in the predecessor's mode (no XDP_FLAGS_UPDATE_IF_NOEXIST:
// the kernel swaps the programs atomically).
func (d *Dataplane) replaceStaleLocked(a *Attachment, mode Mode) (bool, error) {
	id := d.staleXDP[a.Interface]
	if id == 0 {
		return false, nil
	}
	nl, err := netlink.LinkByIndex(a.Ifindex)
	if err != nil {
		return false, fmt.Errorf("dataplane: interface %q: %w", a.Interface, err)
	}
	x := nl.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId != id {
		return false, nil // gone, or someone else's now
	}
	cur, err := d.keepModeLocked(a, mode, x.AttachMode)
	if err != nil {
		return false, err
	}
	if err := netlink.LinkSetXdpFdWithFlags(nl, a.prog.FD(), netlinkMode(cur)); err != nil {
		return false, fmt.Errorf("dataplane: replace the XDP program (id %d) a previous xlb left on %s: %w", id, a.Interface, err)
	}
	a.Mode, a.Via, a.Adopted = cur, PathNetlink, true
	if d.features.Get(FeatureXDPLink).State == StateUnknown {
		d.setPathLocked(FeatureXDPLink, PathNetlink)
	}
	return true, nil
}

// keepModeLocked is the mode of the program attached now (attached, as
// netlink reports it): a replacement keeps it. A strict mode that differs
// is an error.
func (d *Dataplane) keepModeLocked(a *Attachment, mode Mode, attached uint32) (Mode, error) {
	cur := ModeNative
	switch attached {
	case nlflags.XDP_ATTACHED_DRV:
	case nlflags.XDP_ATTACHED_SKB:
		cur = ModeGeneric
	default:
		return "", fmt.Errorf("dataplane: %s: the previous xlb's program is attached in XDP mode %d, which XLB does not replace", a.Interface, attached)
	}
	if (mode == ModeNative || mode == ModeGeneric) && mode != cur {
		return "", fmt.Errorf("dataplane: %s: xdp_mode is %s but the running program is attached in %s mode, which a replacement in place keeps; restart xlb (systemctl restart xlb) to change the mode", a.Interface, mode, cur)
	}
	return cur, nil
}

// Attachments lists what is attached, sorted by interface name.
func (d *Dataplane) Attachments() []Attachment {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Attachment
	for _, name := range slices.Sorted(maps.Keys(d.attached)) {
		out = append(out, *d.attached[name])
	}
	return out
}

// Detach removes the program from one interface.
func (d *Dataplane) Detach(ifname string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.detachLocked(ifname)
}

func (d *Dataplane) detachLocked(ifname string) error {
	a, ok := d.attached[ifname]
	if !ok {
		return nil
	}
	delete(d.attached, ifname)
	idx := uint32(a.Ifindex)
	errs := []error{d.detachAttachment(a)}
	if err := d.objs.XlbTxPorts.Delete(idx); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, err)
	}
	errs = append(errs, d.dropIfMACLocked(a.Ifindex))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: detach %s: %w", ifname, err)
	}
	return nil
}

// detachAttachment removes the program: closes its bpf_link (unpinned and
// detached first when pinned, so that no pin keeps it), or detaches it
// through netlink if it is still XLB's program on the interface.
func (d *Dataplane) detachAttachment(a *Attachment) error {
	if a.link != nil {
		var errs []error
		if a.pinned {
			errs = append(errs, removePin(linkPath(d.stateDir, a.Interface)))
			if err := a.link.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
				errs = append(errs, err)
			}
		}
		return errors.Join(append(errs, a.link.Close())...)
	}
	nl, err := netlink.LinkByIndex(a.Ifindex)
	if err != nil {
		return err
	}
	if x := nl.Attrs().Xdp; x == nil || !x.Attached || (a.ProgID != 0 && x.ProgId != a.ProgID) {
		return nil
	}
	return netlink.LinkSetXdpFdWithFlags(nl, -1, netlinkMode(a.Mode))
}

// DetachAll removes the program from every interface.
func (d *Dataplane) DetachAll() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for name := range d.attached {
		errs = append(errs, d.detachLocked(name))
	}
	return errors.Join(errs...)
}

// attachHint turns the kernel's attach errors into what an operator can do.
func attachHint(ifname string, mode Mode, err error) string {
	switch {
	case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EEXIST):
		return fmt.Sprintf(" (another XDP program is attached to %s; see `ip link show %s`; XLB does not replace it)", ifname, ifname)
	case errors.Is(err, unix.EOPNOTSUPP) && mode == ModeNative:
		return fmt.Sprintf(" (%s has no native XDP support; use xdp_mode: auto or generic)", ifname)
	}
	return ""
}
