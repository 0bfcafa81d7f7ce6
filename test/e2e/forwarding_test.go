package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// The warning the daemon's host settings guard logs when it puts
// lo.forwarding back (pkg/hostnet SysctlGuard), and the setting's label.
const (
	loForwarding      = "net.ipv4.conf.lo.forwarding"
	loForwardingReset = "host settings guard: " + loForwarding + " was reset and is put back"
)

// `sysctl -w net.ipv4.conf.all.forwarding=0` in XLB's namespace (what
// `sysctl --system` does on many hosts) also resets lo.forwarding, which
// the data path's FIB lookups need (issue 13): every new SYN was dropped
// while /readyz stayed 200. The daemon puts lo.forwarding back with one
// warning, counts the repair, and new connections keep working.
func TestForwardingReset(t *testing.T) {
	l := newTupleLab(t)
	p := startXLB(t, l.Lab, labConfig(l.Lab, ""))
	const loFwdPath = "/proc/sys/net/ipv4/conf/lo/forwarding"
	if got := readSysctl(t, l.XLB, loFwdPath); got != "1" {
		t.Fatalf("lo forwarding %q while running, want 1", got)
	}
	held := holdConnections(t, l.Client(), 5, 100*time.Millisecond)
	// What sysctl -w does: a write to the file under /proc/sys. The
	// kernel copies all.forwarding to every interface (lo included) only
	// when the value changes, and it is 0 in a fresh namespace: first
	// turn it on, as on a host that forwards, then off.
	var loAfter string
	if err := l.XLB.Do(func() error {
		if err := testnet.Sysctl("net.ipv4.conf.all.forwarding", "1"); err != nil {
			return err
		}
		if err := testnet.Sysctl("net.ipv4.conf.all.forwarding", "0"); err != nil {
			return err
		}
		b, err := os.ReadFile(loFwdPath)
		loAfter = strings.TrimSpace(string(b))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	reset := time.Now()
	t.Logf("lo.forwarding right after the write: %s", loAfter)
	// Connections opened right after the reset: a SYN the data path drops
	// meanwhile is sent again after 1 s, and must then get through.
	early := make(chan error, 5)
	for range cap(early) {
		go func() { early <- echoOnce(l.Lab, 30*time.Second) }()
	}
	if err := p.WaitLog(loForwardingReset, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("the daemon logged the repair %v after the reset", time.Since(reset).Round(time.Millisecond))
	if got := readSysctl(t, l.XLB, loFwdPath); got != "1" {
		t.Fatalf("lo forwarding %q after the repair, want 1", got)
	}
	for range cap(early) {
		if err := <-early; err != nil {
			t.Fatalf("new connection opened right after the reset: %v", err)
		}
	}
	for i := range 50 {
		if err := echoOnce(l.Lab, 30*time.Second); err != nil {
			t.Fatalf("new connection %d after the reset: %v", i, err)
		}
	}
	if v, ok := waitCounter(t, l.Lab, "xlb_host_setting_repairs_total", map[string]string{"setting": loForwarding}, 30*time.Second,
		func(v float64) bool { return v >= 1 }); !ok || v != 1 {
		t.Fatalf("xlb_host_setting_repairs_total{setting=%q} %v, want 1", loForwarding, v)
	}
	if n := p.Count(loForwardingReset); n != 1 {
		t.Fatalf("the daemon logged the repair %d times, want once:\n%s", n, grepLines(p.Log(), loForwarding))
	}
	held.finish(t)
	stopXLB(t, l.Lab, p)
}
