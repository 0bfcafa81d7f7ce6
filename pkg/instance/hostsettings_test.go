package instance

import (
	"context"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/test/lab"
)

// Every explicit snat.ip address must be this host's: Resolve names the
// list item that is not, before anything on the host changes.
func TestSNATAddressesMustBeLocal(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	for _, c := range []struct {
		name string
		ips  []netip.Addr
		want string
	}{
		{"one address", []netip.Addr{netip.MustParseAddr("192.0.2.250")},
			"snat.ip: 192.0.2.250 is not an address of this host"},
		{"second of a list", []netip.Addr{l.XLB.IP(), netip.MustParseAddr("192.0.2.250")},
			"snat.ip[1]: 192.0.2.250 is not an address of this host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := labConfig(l)
			cfg.SNAT.IPs = c.ips
			err := l.XLB.Do(func() error { _, err := Resolve(cfg); return err })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Resolve: %v, want %q", err, c.want)
			}
		})
	}
}

// Several SNAT addresses of this host are resolved in config order and
// given to the data path.
func TestSeveralSNATAddresses(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	extra := netip.MustParseAddr("192.0.2.12")
	link, err := l.XLB.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: extra.AsSlice(), Mask: net.CIDRMask(24, 32)}}
	if err := l.XLB.Netlink().AddrAdd(link, addr); err != nil {
		t.Fatal(err)
	}
	cfg := labConfig(l)
	cfg.SNAT.IPs = []netip.Addr{extra, l.XLB.IP()}
	in, err := start(l, context.Background(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.XLB.Do(in.Stop)
	if !slices.Equal(in.Resolved.SNAT, cfg.SNAT.IPs) {
		t.Errorf("Resolved.SNAT = %v, want %v", in.Resolved.SNAT, cfg.SNAT.IPs)
	}
}

// The guard started with the instance puts lo.forwarding back after a
// write of all.forwarding turned it off, counts the repair, and stops with
// the instance, which then restores the original value.
func TestGuardKeepsFIBLookupsOn(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	before := readHost(t, l)
	in, err := start(l, context.Background(), labConfig(l), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// all.forwarding 1 -> 0, as `sysctl --system` with a file setting it
	// does: the kernel sets every interface's forwarding to 0, lo's too.
	err = l.XLB.Do(func() error {
		if err := testnet.Sysctl("net.ipv4.conf.all.forwarding", "1"); err != nil {
			return err
		}
		return testnet.Sysctl("net.ipv4.conf.all.forwarding", "0")
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for repairs(in) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := repairs(in); got != 1 {
		t.Fatalf("lo.forwarding repairs = %d, want 1", got)
	}
	var lo string
	err = l.XLB.Do(func() error {
		b, err := os.ReadFile(hostnet.FIBLookupSysctl)
		lo = strings.TrimSpace(string(b))
		return err
	})
	if err != nil || lo != "1" {
		t.Fatalf("lo.forwarding = %q (%v) after the repair, want 1", lo, err)
	}
	if err := l.XLB.Do(in.Stop); err != nil {
		t.Fatal(err)
	}
	if after := readHost(t, l); after.sysctls[hostnet.FIBLookupSysctl] != before.sysctls[hostnet.FIBLookupSysctl] {
		t.Errorf("after Stop lo.forwarding = %q, want the original %q", after.sysctls[hostnet.FIBLookupSysctl], before.sysctls[hostnet.FIBLookupSysctl])
	}
}

// repairs is the instance's count of lo.forwarding repairs.
func repairs(in *Instance) uint64 {
	for _, r := range in.HostSettings() {
		if r.Setting == hostnet.FIBLookupSetting {
			return r.Repairs
		}
	}
	return 0
}
