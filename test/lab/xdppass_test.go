package lab

import (
	"context"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// The reason for the XDP_PASS programs (LAB-NOTES "XDP on veth"): frames
// that XLB sends with native XDP_TX (one-arm) or a native redirect to its
// other interface (two-arm) must arrive on the bridge-side peer. A program
// that bounces or redirects every frame is attached to XLB's eth0; the
// client's ARP requests then show up as received packets on the peer of
// the egress interface.
func TestXDPTxReachesBridge(t *testing.T) {
	l := New(t, Options{Backends: 1})
	bounce := asm.Instructions{asm.Mov.Imm(asm.R0, 3), asm.Return()} // XDP_TX
	checkXDPEgress(t, l, bounce, l.XLB.Ifaces[0])
}

func TestXDPRedirectReachesBridge(t *testing.T) {
	l := New(t, Options{Topology: TwoArm, Backends: 1})
	eth1, _ := l.XLB.Iface("eth1")
	redirect := asm.Instructions{ // return bpf_redirect(eth1, 0)
		asm.Mov.Imm(asm.R1, int32(eth1.Index)),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRedirect.Call(),
		asm.Return(),
	}
	checkXDPEgress(t, l, redirect, eth1)
}

// checkXDPEgress attaches insns natively to XLB's eth0, makes the client
// send ARP requests to 192.0.2.10 and waits until out's bridge-side peer
// has received a frame.
func checkXDPEgress(t *testing.T, l *Lab, insns asm.Instructions, out Iface) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	err = l.XLB.Do(func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.LinkSetXdpFdWithFlags(eth0, prog.FD(), nl.XDP_FLAGS_DRV_MODE)
	})
	if err != nil {
		t.Fatal(err)
	}
	rx := func() uint64 {
		link, err := out.LAN.Netlink().LinkByName(out.Peer)
		if err != nil {
			t.Fatal(err)
		}
		return link.Attrs().Statistics.RxPackets
	}
	before := rx()
	deadline := time.Now().Add(waitLong)
	for rx() == before && time.Now().Before(deadline) {
		// Each attempt makes the client ARP for 192.0.2.10 again.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		if c, err := l.Client().Dial(ctx, "192.0.2.10:9"); err == nil {
			c.Close()
		}
		cancel()
	}
	if rx() == before {
		t.Fatalf("no frame from %s/eth0's XDP program arrived on %s", l.XLB.NS, out.Peer)
	}
}
