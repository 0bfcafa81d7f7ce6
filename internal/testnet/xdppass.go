package testnet

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// AttachXDPPass attaches, in native (driver) mode, a two-instruction XDP
// program that returns XDP_PASS to the named links of h. A veth end needs
// it when it receives frames sent with native XDP_TX or redirected by
// native XDP on its peer: the kernel delivers those only when the
// receiving end has a native XDP program (or GRO) (LAB-NOTES "XDP on
// veth"). The attachment uses the legacy netlink call (which acts in the
// calling thread's namespace, hence h.Do), needs no open FD and goes away
// with the link.
func (h *Host) AttachXDPPass(links ...string) error {
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
		return fmt.Errorf("testnet: load XDP_PASS program: %w", err)
	}
	defer prog.Close()
	return h.Do(func() error {
		for _, name := range links {
			link, err := netlink.LinkByName(name)
			if err == nil {
				err = netlink.LinkSetXdpFdWithFlags(link, prog.FD(), nl.XDP_FLAGS_DRV_MODE)
			}
			if err != nil {
				return fmt.Errorf("testnet: XDP_PASS (native) on %s/%s: %w", h.NS, name, err)
			}
		}
		return nil
	})
}

// XDPAttachMode reports how an XDP program is attached to the named link
// in h's namespace: 0 none, nl.XDP_ATTACHED_DRV (1) native,
// nl.XDP_ATTACHED_SKB (2) generic, nl.XDP_ATTACHED_HW (3) offloaded.
func (h *Host) XDPAttachMode(link string) (uint32, error) {
	l, err := h.nl.LinkByName(link)
	if err != nil {
		return 0, fmt.Errorf("testnet: %s: %s: %w", h.NS, link, err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		return x.AttachMode, nil
	}
	return 0, nil
}
