package lab

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// LoadXDPPass loads a two-instruction XDP program that returns XDP_PASS,
// for the peer ends of veths that receive XDP_TX or redirected frames
// (LAB-NOTES: native XDP_TX on veth needs a native program on the peer).
// The caller closes it once it is attached everywhere; attachments made
// with AttachXDPPass keep the program alive.
func LoadXDPPass() (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "xlb_lab_pass",
		Type: ebpf.XDP,
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2), // XDP_PASS
			asm.Return(),
		},
		License: "GPL",
	})
	if err != nil {
		return nil, fmt.Errorf("lab: load XDP_PASS program: %w", err)
	}
	return prog, nil
}

// AttachXDPPass attaches prog in native (driver) mode to the named links of
// the calling thread's namespace, with the legacy netlink attach: the
// attachment needs no open FD and goes away with the link. Must run inside
// the target namespace (netlink's package-level calls use the thread's
// namespace).
func AttachXDPPass(prog *ebpf.Program, names ...string) error {
	for _, name := range names {
		link, err := netlink.LinkByName(name)
		if err != nil {
			return fmt.Errorf("lab: XDP attach: %s: %w", name, err)
		}
		if err := netlink.LinkSetXdpFdWithFlags(link, prog.FD(), nl.XDP_FLAGS_DRV_MODE); err != nil {
			return fmt.Errorf("lab: XDP attach (native) to %s: %w", name, err)
		}
	}
	return nil
}

// XDPAttachMode reports how an XDP program is attached to the named link
// in h's namespace: 0 none, nl.XDP_ATTACHED_DRV (1) native,
// nl.XDP_ATTACHED_SKB (2) generic, nl.XDP_ATTACHED_HW (3) offloaded.
func (h *Host) XDPAttachMode(link string) (uint32, error) {
	l, err := h.nl.LinkByName(link)
	if err != nil {
		return 0, fmt.Errorf("lab: %s: %s: %w", h.NS, link, err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		return x.AttachMode, nil
	}
	return 0, nil
}
