package fleet

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
)

// routerNeigh is the router's neighbour entry for a (ip neigh show).
func (l *Lab) routerNeigh(h *Host) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "-n", l.Router.NS, "neigh", "show", h.Addr.String()).CombinedOutput()
	if err != nil {
		return err.Error() + ": " + string(out)
	}
	return strings.TrimSpace(string(out))
}

// killHost: the last step. First a crash of xlb3's daemon alone
// (SIGKILL, its link up): the kernel closes the session's socket, bird
// keeps the route as stale (graceful restart), the XDP program left
// attached keeps forwarding, systemd restarts xlb, whose speaker
// refreshes the route: the path never leaves, no connection fails or
// breaks. Then a dead host: xlb3's link is removed, then its daemon
// SIGKILLed (nothing reaches the router any more, not even a FIN): the
// router's hold timer expires, bird flushes the route and the kernel
// route loses the path. Measured: the time from the link's removal until
// new connections succeed again (the aim: within the hold time
// + 1 s). The lab is torn down after this step.
func (f *fleet) killHost(t *testing.T) {
	f.startTraffic(t)
	start := time.Now()
	h := f.l.Hosts[2]
	paths, err := f.l.KernelPaths()
	if err != nil || !slices.Contains(paths, h.Addr) {
		t.Fatalf("%s not in the router's route %v (%v)", h.Inventory, paths, err)
	}

	// A crash.
	pid, err := mainPID(h)
	if err != nil {
		t.Fatal(err)
	}
	since, counts0 := time.Now(), f.mon.Counts()
	if out, err := h.Exec("sh", "-c", "kill -KILL "+pid); err != nil {
		t.Fatalf("kill %s: %v\n%s", pid, err, out)
	}
	birdtest.WaitFor(t, "bird keeps "+h.Inventory+"'s route as stale (graceful restart)", func() (bool, string) {
		s := f.l.Bird.Session(h.Inventory)
		return s.GracefulRestart && s.State != birdtest.Established, s.Out
	})
	stale := time.Since(since)
	s := f.l.Bird.Session(h.Inventory)
	t.Logf("%s: xlb (PID %s) SIGKILLed, link up: bird keeps its route as stale %v later:\n%s", h.Inventory, pid, stale.Round(time.Millisecond), s.Out)
	birdtest.WaitFor(t, h.Inventory+"'s restarted xlb refreshes its route (session established, graceful restart over)", func() (bool, string) {
		s := f.l.Bird.Session(h.Inventory)
		return s.State == birdtest.Established && !s.GracefulRestart, s.Out
	})
	refreshed := time.Since(since)
	waitAnnouncing(t, h)
	if now, err := mainPID(h); err != nil || now == pid || now == "0" {
		t.Errorf("%s: main PID %q (%v), want systemd's restart of xlb", h.Inventory, now, err)
	}
	t.Logf("%s: crash: systemd restarted xlb; its session was up again and the route refreshed %v after the SIGKILL", h.Inventory, refreshed.Round(time.Millisecond))
	f.checkRouteKept(t, "the crash and restart of "+h.Inventory+"'s xlb", counts0, since)
	time.Sleep(2 * LongLivedInterval)
	f.logTraffic(t, since, f.checkTraffic(t, since, false))
	for _, b := range f.work.Stats().Breaks {
		if !b.At.Before(since) {
			t.Errorf("a long-lived connection broke during the crash of %s: %+v", h.Inventory, b)
		}
	}

	// A dead host.
	others := []*Host{}
	for _, o := range f.l.Hosts {
		if o != h && slices.Contains(paths, o.Addr) {
			others = append(others, o)
		}
	}
	pid, err = mainPID(h)
	if err != nil {
		t.Fatal(err)
	}
	since = time.Now()
	before := f.work.Stats()
	prober := f.l.StartProber(50*time.Millisecond, 900*time.Millisecond)
	time.Sleep(time.Second)
	eth0, err := h.Netlink().LinkByName("eth0")
	if err != nil {
		prober.Stop()
		t.Fatal(err)
	}
	neigh := f.l.routerNeigh(h)
	gone := time.Now()
	if err := h.Netlink().LinkDel(eth0); err != nil {
		prober.Stop()
		t.Fatalf("%s: remove eth0: %v", h.Inventory, err)
	}
	if out, err := h.Exec("sh", "-c", "kill -KILL "+pid); err != nil {
		t.Errorf("kill %s: %v\n%s", pid, err, out)
	}
	left := f.waitPath(t, h, false).Sub(gone)
	neighAtLeft := f.l.routerNeigh(h)
	f.waitPaths(t, "after "+h.Inventory+" died", others...)
	time.Sleep(5 * time.Second)
	probes := prober.Stop()
	failed, first, recovered := Outage(probes)
	s = f.l.Bird.Session(h.Inventory)
	if !strings.Contains(s.Out, "Hold timer expired") || s.GracefulRestart {
		t.Errorf("bird's session with the dead %s: want it ended by the hold timer, no graceful restart:\n%s", h.Inventory, s.Out)
	}
	t.Logf("%s: dead host (eth0 removed at %s, then xlb SIGKILLed): its path left the router's kernel route %v later (hold time %d s); "+
		"router's neighbour entry before: %q, when the path left: %q; bird:\n%s",
		h.Inventory, gone.Format("15:04:05.000"), left.Round(time.Millisecond), HoldSecs, neigh, neighAtLeft, s.Out)
	switch {
	case failed == 0:
		t.Logf("%s: dead host: no probe failed (%d probes)", h.Inventory, len(probes))
	case recovered.IsZero():
		t.Errorf("%s: dead host: new connections still failed at the end (%d of %d probes failed)", h.Inventory, failed, len(probes))
	default:
		t.Logf("%s: dead host: %d of %d new connections (one every 50 ms, 900 ms each) failed, the first started %v after the link went; "+
			"new connections succeed again %v after the link went (aim: hold time + 1 s = %d s)",
			h.Inventory, failed, len(probes), first.Sub(gone).Round(time.Millisecond), recovered.Sub(gone).Round(time.Millisecond), HoldSecs+1)
	}
	after := f.work.Stats()
	lost := 0
	for _, b := range after.Breaks {
		if !b.At.Before(since) {
			lost++
		}
	}
	var fails []string
	for _, fl := range after.Failures {
		if !fl.At.Before(since) {
			fails = append(fails, fmt.Sprintf("%+.3fs %s", fl.At.Sub(gone).Seconds(), fl.Err))
		}
	}
	t.Logf("client during the dead host: %d new connections failed (the client's own: 5 s each, SYN retransmissions included; "+
		"a long-lived connection that broke is replaced at once), %d long-lived connections broke; router's route changes %s; "+
		"failures (seconds after the link went):\n%s", after.NewFailed-before.NewFailed, lost, f.changes(since), strings.Join(fails, "\n"))
	f.phase("a host crashes, then dies", start)
}
