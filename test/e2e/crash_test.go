package e2e

import (
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// Crash survival (issue 12, DESIGN §6): after a SIGKILL the pinned link
// keeps XDP attached and the pinned maps keep forwarding, so the streams
// flow and new connections are balanced while no process runs; the next
// start adopts every pair and everything continues; a SIGTERM then
// removes the state_dir.
func TestCrashRestartAdopts(t *testing.T) {
	l := greetedLab(t)
	cfg := labConfig(l, "")
	p := startPinned(t, l, xlbBinary, cfg)
	w := startWorkload(t, l)
	w.waitFlowing(t, w.received(), 30*time.Second)

	p.Kill() // SIGKILL
	killed := time.Now()
	if mode, err := l.XLB.XDPAttachMode("eth0"); err != nil || mode == 0 {
		t.Fatalf("after SIGKILL: XDP mode %d (%v), want the pinned link still attached", mode, err)
	}
	// A few seconds without any daemon: the streams flow, new
	// connections are balanced over the last published backends.
	w.waitFlowing(t, w.received(), 30*time.Second)
	time.Sleep(3 * time.Second)
	w.waitFlowing(t, w.received(), 30*time.Second)
	w.check(t, "with no daemon running")
	orphanedAt := time.Now()
	per := map[byte]int{}
	for _, pr := range w.prober.between(killed, orphanedAt) {
		per[pr.backend]++
	}
	if per[1] == 0 || per[2] == 0 || per[3] == 0 {
		t.Fatalf("new connections with no daemon running, per backend: %v; want all three", per)
	}
	longest, _, retrans := w.prober.window(killed, orphanedAt)
	t.Logf("with no daemon for %v: new connections per backend %v, longest handshake %v, %d SYNs sent again",
		orphanedAt.Sub(killed).Round(time.Millisecond), per, longest, retrans)

	restarted := time.Now()
	p = startPinned(t, l, xlbBinary, cfg)
	running := time.Now()
	n, ok := adoptedPairs(p.Log())
	if !ok || n < streamConns+idleConns {
		t.Fatalf("adopted %d pairs (line found: %v), want at least %d:\n%s", n, ok, streamConns+idleConns, p.Log())
	}
	if d := statusDoc(t, l); d.Upgrades.Start != api.StartAdopted || d.Upgrades.AdoptedPairs != n {
		t.Fatalf("status upgrades %+v, want adopted with %d pairs", d.Upgrades, n)
	}
	w.prober.settle(t, running)
	longest, probes, retrans := w.prober.window(restarted, running)
	t.Logf("restart adopted %d pairs, running after %v; meanwhile %d new connections, longest handshake %v, %d SYNs sent again",
		n, running.Sub(restarted).Round(time.Millisecond), probes, longest, retrans)
	w.waitFlowing(t, w.received(), 30*time.Second)
	w.check(t, "after the restart")
	sum := w.finish(t)
	t.Log(sum)
	stopXLB(t, l, p) // also: state_dir removed
}
