package e2e

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/test/lab"
)

func readSysctl(t *testing.T, h *lab.Host, path string) string {
	t.Helper()
	var v string
	if err := h.Do(func() error {
		b, err := os.ReadFile(path)
		v = strings.TrimSpace(string(b))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func managedNeighbours(t *testing.T, h *lab.Host) int {
	t.Helper()
	ns, err := h.Netlink().NeighList(h.Ifindex(), netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range ns {
		if x.FlagsExt&netlink.NTF_EXT_MANAGED != 0 {
			n++
		}
	}
	return n
}

// The daemon reserves the SNAT range, enables FIB lookups, manages backend
// neighbours, skips an unreachable backend with a log line naming it, and
// restores all of it on SIGTERM.
func TestHostSettingsAndUnreachableBackend(t *testing.T) {
	const reserved = "/proc/sys/net/ipv4/ip_local_reserved_ports"
	const loFwd = "/proc/sys/net/ipv4/conf/lo/forwarding"
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	before := map[string]string{reserved: readSysctl(t, l.XLB, reserved), loFwd: readSysctl(t, l.XLB, loFwd)}

	// 192.0.2.99 is on-link but nobody answers ARP for it
	p := startXLB(t, l, labConfig(l, "", "ghost=192.0.2.99"))

	if got := readSysctl(t, l.XLB, reserved); !strings.Contains(got, "40000-59999") {
		t.Fatalf("ip_local_reserved_ports = %q while running, want it to hold 40000-59999", got)
	}
	if got := readSysctl(t, l.XLB, loFwd); got != "1" {
		t.Fatalf("lo forwarding = %q while running", got)
	}
	if err := p.WaitLog(`interface=eth0 mode=native`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog(`backend=ghost`, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("does not answer ARP", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := managedNeighbours(t, l.XLB); n < 3 {
		t.Fatalf("%d managed neighbours while running, want the 3 backends (and the ghost)", n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 30; i++ {
		if err := echoThrough(l.Client(), rng, 512); err != nil {
			t.Fatalf("connection %d with an unreachable backend configured: %v", i, err)
		}
	}
	waitCompleted(t, l, 30)
	for _, b := range l.Backends {
		if got := b.Stats().Accepted; got != 10 {
			t.Fatalf("backend %s got %d of 30 connections, want 10 (the ghost is skipped)", b.IP(), got)
		}
	}

	stopXLB(t, l, p)
	for path, want := range before {
		if got := readSysctl(t, l.XLB, path); got != want {
			t.Fatalf("%s = %q after exit, want the original %q", path, got, want)
		}
	}
	if n := managedNeighbours(t, l.XLB); n != 0 {
		t.Fatalf("%d managed neighbours left after exit", n)
	}
}

// After a crash (SIGKILL) the host settings stay changed (and XDP stays
// attached through the pinned link); the next instance finds its
// predecessor's journal, and its clean stop restores the values from
// before the first instance.
func TestHostSettingsSurviveCrash(t *testing.T) {
	const reserved = "/proc/sys/net/ipv4/ip_local_reserved_ports"
	const loFwd = "/proc/sys/net/ipv4/conf/lo/forwarding"
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	before := map[string]string{reserved: readSysctl(t, l.XLB, reserved), loFwd: readSysctl(t, l.XLB, loFwd)}

	p := startXLB(t, l, labConfig(l, ""))
	p.Kill()
	if got := readSysctl(t, l.XLB, reserved); !strings.Contains(got, "40000-59999") {
		t.Fatalf("after SIGKILL the reservation is gone (%q): nothing to recover, the test is moot", got)
	}
	if mode, _ := l.XLB.XDPAttachMode("eth0"); mode == 0 {
		t.Fatal("XDP detached after SIGKILL: the pinned link should keep it attached")
	}

	p = startXLB(t, l, labConfig(l, ""))
	if err := p.WaitLog("did not undo its host settings", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	if err := echoThrough(l.Client(), rng, 100); err != nil {
		t.Fatal(err)
	}
	stopXLB(t, l, p)
	for path, want := range before {
		if got := readSysctl(t, l.XLB, path); got != want {
			t.Fatalf("%s = %q after crash, restart and clean stop; want the original %q", path, got, want)
		}
	}
	if n := managedNeighbours(t, l.XLB); n != 0 {
		t.Fatalf("%d managed neighbours left after crash, restart and clean stop", n)
	}
}

// One instance per network namespace: a second one is refused before it
// touches anything, and the first keeps its settings and its traffic.
func TestSecondInstanceRefused(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	a := startXLB(t, l, labConfig(l, ""))
	cfgB := labConfig(l, "admin:\n  address: 127.0.0.1\n  port: 9091\n  socket: "+adminSocket(l)+"-b\nmetrics:\n  address: 127.0.0.1\n  port: 9643\n")
	b, err := startXLBEnv(t, l, cfgB, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := b.Wait(60 * time.Second); err != nil || code != 1 {
		t.Fatalf("second instance: exit %d err %v, want 1", code, err)
	}
	if !strings.Contains(b.Log(), "another xlb is running in this network namespace") {
		t.Fatalf("second instance's error:\n%s", b.Log())
	}
	if got := readSysctl(t, l.XLB, "/proc/sys/net/ipv4/conf/lo/forwarding"); got != "1" {
		t.Fatalf("lo forwarding %q after the refused instance: it undid the first one's settings", got)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 6; i++ {
		if err := echoThrough(l.Client(), rng, 200); err != nil {
			t.Fatalf("the first instance after a refused second one: %v", err)
		}
	}
	stopXLB(t, l, a)
}

// SIGTERM while the daemon is still starting (here: waiting for a backend
// whose next hop never answers) is a clean stop: exit 0, nothing attached,
// settings restored.
func TestStopDuringStartup(t *testing.T) {
	const loFwd = "/proc/sys/net/ipv4/conf/lo/forwarding"
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	before := readSysctl(t, l.XLB, loFwd)
	p, err := startXLBEnv(t, l, labConfig(l, "", "ghost=192.0.2.99"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("XDP program attached", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Log(), "xlb running") {
		t.Skip("the daemon finished starting before the signal; nothing to test this time")
	}
	stopXLB(t, l, p)
	if !strings.Contains(p.Log(), "stopped during startup") {
		t.Fatalf("log:\n%s", p.Log())
	}
	if got := readSysctl(t, l.XLB, loFwd); got != before {
		t.Fatalf("lo forwarding %q after a stop during startup, want %q", got, before)
	}
}
