package hostnet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/internal/testnet"
)

// fakeSysctls lays out the guarded settings as plain files under a
// temporary root, as the instance leaves them: lo.forwarding 1, the SNAT
// range 40000-40999 reserved next to a port of the host's own.
func fakeSysctls(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, v := range map[string]string{
		FIBLookupSetting:     "1",
		allForwardingSetting: "0",
		ReservedPortsSetting: "8080,40000-40999",
	} {
		setFile(t, root, name, v)
	}
	return root
}

func setFile(t *testing.T, root, name, v string) {
	t.Helper()
	p := sysctlPath(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(sysctlPath(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// guardOn opens a guard on root with a test log.
func guardOn(t *testing.T, root string) (*SysctlGuard, *logtest.Hook) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	g, err := GuardSysctls(GuardOptions{SNATPortLo: 40000, SNATPortHi: 40999, Root: root, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, hook
}

// warnings returns the warning messages logged since the last call.
func warnings(hook *logtest.Hook) []string {
	var out []string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			out = append(out, e.Message)
		}
	}
	hook.Reset()
	return out
}

func repairsOf(g *SysctlGuard) map[string]uint64 {
	out := map[string]uint64{}
	for _, r := range g.Repairs() {
		out[r.Setting] = r.Repairs
	}
	return out
}

// A reset is put back with one warning naming the setting and what reset
// it; the following checks find it right and say nothing.
func TestGuardRepairsEachResetOnce(t *testing.T) {
	root := fakeSysctls(t)
	g, hook := guardOn(t, root)
	if n := g.Check(); n != 0 || len(warnings(hook)) != 0 {
		t.Fatalf("settings as XLB left them: %d repairs", n)
	}

	// sysctl -w net.ipv4.conf.all.forwarding=0 as sysctl --system does:
	// the kernel turns every interface's forwarding off.
	setFile(t, root, FIBLookupSetting, "0")
	if n := g.Check(); n != 1 {
		t.Fatalf("after the reset: %d repairs, want 1", n)
	}
	if got := readFile(t, root, FIBLookupSetting); got != "1\n" {
		t.Errorf("lo.forwarding = %q after the repair, want 1", got)
	}
	w := warnings(hook)
	if len(w) != 1 || !strings.Contains(w[0], FIBLookupSetting) || !strings.Contains(w[0], "net.ipv4.conf.all.forwarding (or net.ipv4.ip_forward) changed it to 0") {
		t.Errorf("warnings = %q, want one naming the setting and the all.forwarding write", w)
	}
	for range 3 {
		if n := g.Check(); n != 0 {
			t.Fatalf("a repaired setting repaired again (%d)", n)
		}
	}
	if w := warnings(hook); len(w) != 0 {
		t.Errorf("checks after the repair warned: %q", w)
	}

	// A second reset, by a direct write this time (all.forwarding is 1).
	setFile(t, root, allForwardingSetting, "1")
	setFile(t, root, FIBLookupSetting, "0")
	g.Check()
	if w := warnings(hook); len(w) != 1 || !strings.Contains(w[0], "something wrote net.ipv4.conf.lo.forwarding itself") {
		t.Errorf("warnings = %q, want one naming a direct write", w)
	}
	if got := repairsOf(g); got[FIBLookupSetting] != 2 || got[ReservedPortsSetting] != 0 {
		t.Errorf("Repairs = %v, want lo.forwarding 2, reserved ports 0", got)
	}
}

// A reserved ports list rewritten without the SNAT range gets the range
// back, merged with what the list now holds; a list that still covers it
// (merged into a wider range) is left alone.
func TestGuardKeepsTheSNATRangeReserved(t *testing.T) {
	root := fakeSysctls(t)
	g, hook := guardOn(t, root)
	setFile(t, root, ReservedPortsSetting, "22,8080")
	if n := g.Check(); n != 1 {
		t.Fatalf("%d repairs, want 1", n)
	}
	if got := readFile(t, root, ReservedPortsSetting); got != "22,8080,40000-40999\n" {
		t.Errorf("reserved ports = %q", got)
	}
	if w := warnings(hook); len(w) != 1 || !strings.Contains(w[0], ReservedPortsSetting) || !strings.Contains(w[0], "without the SNAT range 40000-40999") {
		t.Errorf("warnings = %q", w)
	}
	for _, fine := range []string{"39000-41000", "40000-40499,40500-40999", "1-65535"} {
		setFile(t, root, ReservedPortsSetting, fine)
		if n := g.Check(); n != 0 {
			t.Errorf("%q covers the range, but the guard repaired it", fine)
		}
	}
	for _, partial := range []string{"40000-40998", "", "40001-41000"} {
		setFile(t, root, ReservedPortsSetting, partial)
		if n := g.Check(); n != 1 {
			t.Errorf("%q misses part of the range: %d repairs", partial, n)
		}
	}
	if got := repairsOf(g)[ReservedPortsSetting]; got != 4 {
		t.Errorf("repairs = %d, want 4", got)
	}
}

// Retired SNAT ranges (ports of an earlier config that live connection
// pairs still hold) stay reserved too, for as long as they are retired.
func TestGuardKeepsRetiredSNATRangesReserved(t *testing.T) {
	root := fakeSysctls(t)
	retired := []PortRange{{30000, 30099}}
	log, hook := logtest.NewNullLogger()
	g, err := GuardSysctls(GuardOptions{SNATPortLo: 40000, SNATPortHi: 40999, Root: root, Log: log,
		RetiredSNAT: func() []PortRange { return retired }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if n := g.Check(); n != 1 {
		t.Fatalf("%d repairs, want 1: the retired range is missing", n)
	}
	if got := readFile(t, root, ReservedPortsSetting); got != "8080,30000-30099,40000-40999\n" {
		t.Errorf("reserved ports = %q", got)
	}
	if w := warnings(hook); len(w) != 1 || !strings.Contains(w[0], "30000-30099,40000-40999") {
		t.Errorf("warnings = %q", w)
	}
	setFile(t, root, ReservedPortsSetting, "8080,40000-40999")
	retired = nil // the last pair on it ended
	if n := g.Check(); n != 0 {
		t.Fatalf("%d repairs of a list without a range no longer retired", n)
	}
}

func TestGuardNeedsItsFiles(t *testing.T) {
	root := fakeSysctls(t)
	if err := os.Remove(sysctlPath(root, ReservedPortsSetting)); err != nil {
		t.Fatal(err)
	}
	if _, err := GuardSysctls(GuardOptions{Root: root, SNATPortLo: 1, SNATPortHi: 2}); err == nil || !strings.Contains(err.Error(), "ip_local_reserved_ports") {
		t.Errorf("GuardSysctls without the reserved ports file: %v", err)
	}
}

// In a real network namespace: the guard opened there repairs that
// namespace's lo.forwarding after a write of all.forwarding turned it off,
// though its checks run on a thread in another namespace.
func TestGuardInNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	ns, err := testnet.NewAnon()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	var g *SysctlGuard
	log, hook := logtest.NewNullLogger()
	err = testnet.In(ns, func() error {
		for _, kv := range [][2]string{{allForwardingSetting, "1"}, {FIBLookupSetting, "1"}, {ReservedPortsSetting, "40000-40999"}} {
			if err := testnet.Sysctl(kv[0], kv[1]); err != nil {
				return err
			}
		}
		g, err = GuardSysctls(GuardOptions{SNATPortLo: 40000, SNATPortHi: 40999, Log: log})
		if err != nil {
			return err
		}
		// The reset: all.forwarding 1 -> 0 turns lo's off too.
		return testnet.Sysctl(allForwardingSetting, "0")
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n := g.Check(); n != 1 {
		t.Fatalf("%d repairs, want 1", n)
	}
	var lo string
	err = testnet.In(ns, func() error {
		b, err := os.ReadFile(FIBLookupSysctl)
		lo = strings.TrimSpace(string(b))
		return err
	})
	if err != nil || lo != "1" {
		t.Fatalf("lo.forwarding in the namespace = %q (%v), want 1", lo, err)
	}
	if w := warnings(hook); len(w) != 1 || !strings.Contains(w[0], "changed it to 0") {
		t.Errorf("warnings = %q", w)
	}
}
