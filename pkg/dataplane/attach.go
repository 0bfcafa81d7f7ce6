package dataplane

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Mode is an XDP attach mode.
type Mode string

// Attach modes (config xdp_mode).
const (
	ModeAuto    Mode = "auto"    // native, falling back to generic
	ModeNative  Mode = "native"  // driver mode only
	ModeGeneric Mode = "generic" // SKB mode only
)

// Attachment is the program attached to one interface.
type Attachment struct {
	Interface string
	Ifindex   int
	Mode      Mode // ModeNative or ModeGeneric: what is attached
	// Fallback is the native-mode error that made ModeAuto fall back to
	// generic; nil otherwise. The caller logs it once.
	Fallback error
	link     link.Link
}

// Attach attaches the program to the named interface (in the caller's network
// namespace) with the requested mode and adds the interface to the redirect
// map. ModeAuto tries native first and falls back to generic, reporting the
// native error in Attachment.Fallback; ModeNative and ModeGeneric are strict.
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
	a := &Attachment{Interface: ifname, Ifindex: ifc.Index}
	attach := func(flags link.XDPAttachFlags) (link.Link, error) {
		return link.AttachXDP(link.XDPOptions{Program: d.objs.XlbXdp, Interface: ifc.Index, Flags: flags})
	}
	switch mode {
	case ModeNative:
		a.link, err = attach(link.XDPDriverMode)
		a.Mode = ModeNative
	case ModeGeneric:
		a.link, err = attach(link.XDPGenericMode)
		a.Mode = ModeGeneric
	case ModeAuto, "":
		a.link, err = attach(link.XDPDriverMode)
		a.Mode = ModeNative
		if err != nil {
			a.Fallback = err
			a.link, err = attach(link.XDPGenericMode)
			a.Mode = ModeGeneric
		}
	default:
		return nil, fmt.Errorf("dataplane: unknown XDP mode %q", mode)
	}
	if err != nil {
		return nil, fmt.Errorf("dataplane: attach XDP (%s) to %s: %w%s", a.Mode, ifname, err, attachHint(ifname, a.Mode, err))
	}
	idx := uint32(ifc.Index)
	if err := d.objs.XlbTxPorts.Update(idx, idx, 0); err != nil {
		a.link.Close()
		return nil, fmt.Errorf("dataplane: add %s to the redirect map: %w", ifname, err)
	}
	d.attached[ifname] = a
	return a, nil
}

// Attachments lists what is attached, in no particular order.
func (d *Dataplane) Attachments() []Attachment {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Attachment, 0, len(d.attached))
	for _, a := range d.attached {
		out = append(out, *a)
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
	errs := []error{a.link.Close()}
	if err := d.objs.XlbTxPorts.Delete(idx); err != nil && !errors.Is(err, errKeyNotExist) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: detach %s: %w", ifname, err)
	}
	return nil
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
