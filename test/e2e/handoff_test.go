package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// Hot upgrade (issue 12, DESIGN §6): SIGUSR2 hands the pinned data path
// and the listeners to the binary now on disk. Each test runs the
// workload across its swaps: 200 connections streaming both ways and 50
// idle ones must lose no byte and see no reset, and new connections keep
// being answered (the longest handshake is logged, never asserted).

// startPinned starts binary with config and waits until it runs.
func startPinned(t testing.TB, l *lab.Lab, binary, config string, env ...string) *xlbproc.Proc {
	t.Helper()
	p, err := startBinary(t, l, binary, config, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("xlb running", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return p
}

// hotUpgrades reads xlb_hot_upgrades_total{result="ok"} and {…="failed"}.
func hotUpgrades(t testing.TB, l *lab.Lab) (ok, failed float64) {
	t.Helper()
	fams := scrape(t, l)
	return metricValue(t, fams, "xlb_hot_upgrades_total", map[string]string{"result": api.UpgradeOK}),
		metricValue(t, fams, "xlb_hot_upgrades_total", map[string]string{"result": api.UpgradeFailed})
}

// checkSwap fails t when readiness dropped during s and logs s.
func checkSwap(t testing.TB, what string, s swap) {
	t.Helper()
	if len(s.notReady) > 0 {
		t.Errorf("%s: /readyz answered %d times other than 200 during the swap: %v", what, len(s.notReady), s.notReady)
	}
	t.Logf("%s: %v", what, s)
}

// Five consecutive hand-offs between two builds with different version
// strings: the successor is whatever is on disk, the status API reports
// its version, and every connection survives all five.
func TestHandOffVersions(t *testing.T) {
	a, b := versionBuilds(t)
	l := greetedLab(t)
	sd := newFakeSystemd(t, l)
	bin := installBinary(t, a)
	p := startPinned(t, l, bin, labConfig(l, ""), "NOTIFY_SOCKET="+sd.path)
	if v := statusDoc(t, l).Version; v != versionA {
		t.Fatalf("version %q, want %q", v, versionA)
	}
	w := startWorkload(t, l)
	builds := []struct{ path, version string }{{b, versionB}, {a, versionA}}
	for i := range 5 {
		next := builds[i%2]
		replaceBinary(t, bin, next.path)
		before := w.received()
		s := handOff(t, l, p, w)
		what := fmt.Sprintf("hand-off %d (to %s)", i+1, next.version)
		w.check(t, what)
		checkSwap(t, what, s)
		// The successor said MAINPID and READY=1 itself (NotifyAccess=all).
		if sd.count("MAINPID="+strconv.Itoa(s.to)) == 0 || sd.count("READY=1") != i+2 {
			t.Fatalf("%s: sd_notify messages %+v: want MAINPID=%d and READY=1 from the successor", what, sd.messages(), s.to)
		}
		d := statusDoc(t, l)
		if d.Version != next.version || d.Upgrades.Start != api.StartHandedOver || d.Upgrades.OK != uint64(i+1) {
			t.Fatalf("%s: status version %q upgrades %+v, want %q, handed_over, %d ok", what, d.Version, d.Upgrades, next.version, i+1)
		}
		if d.Upgrades.AdoptedPairs < streamConns+idleConns {
			t.Fatalf("%s: the successor adopted %d pairs, want at least %d", what, d.Upgrades.AdoptedPairs, streamConns+idleConns)
		}
		w.waitFlowing(t, before, 30*time.Second)
	}
	sum := w.finish(t)
	t.Log(sum)
	if ok, failed := hotUpgrades(t, l); ok != 5 || failed != 0 {
		t.Fatalf("xlb_hot_upgrades_total ok %v failed %v, want 5 and 0", ok, failed)
	}
	stopXLB(t, l, p)
}

// A hand-off that also removes a backend from xlb.yaml: the backend's
// connections keep working to the end, the status shows it draining
// while they live, and new connections never go to it once the
// successor owns the data path.
func TestHandOffRemovesBackend(t *testing.T) {
	l := greetedLab(t)
	cfg := labConfig(l, "")
	p := startPinned(t, l, xlbBinary, cfg)
	w := startWorkload(t, l)
	const gone = 3 // backend-3
	onGone := 0
	for _, s := range w.streams {
		if s.backend == gone {
			onGone++
		}
	}
	if onGone == 0 {
		t.Fatal("no stream went to backend-3: nothing to drain")
	}
	entry := fmt.Sprintf("      - name: backend-3\n        ip: %s\n", l.Backends[gone-1].IP())
	if !strings.Contains(cfg, entry) {
		t.Fatalf("config lacks %q:\n%s", entry, cfg)
	}
	if err := os.WriteFile(p.Config, []byte(strings.Replace(cfg, entry, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	before := w.received()
	s := handOff(t, l, p, w)
	w.check(t, "the hand-off")
	checkSwap(t, "hand-off without backend-3", s)

	draining := func(when string) {
		t.Helper()
		d := statusDoc(t, l)
		for _, b := range d.Backends {
			want := api.Routable
			if b.Name == "backend-3" {
				want = api.Draining
			}
			if b.State != want || b.AvailableForNewConnections != (want == api.Routable) {
				t.Fatalf("%s: backend %s is %s (available %v), want %s: %+v", when, b.Name, b.State, b.AvailableForNewConnections, want, d.Backends)
			}
		}
		if len(d.Backends) != 3 {
			t.Fatalf("%s: backends %+v, want backend-3 listed while it drains", when, d.Backends)
		}
	}
	draining("after the hand-off")
	w.waitFlowing(t, before, 30*time.Second)
	// New connections: a few hundred after the swap, none to backend-3.
	for len(w.prober.between(s.done, time.Now())) < 300 {
		w.check(t, "after the hand-off")
		time.Sleep(100 * time.Millisecond)
	}
	draining("with its connections still streaming")
	w.halt()
	per := map[byte]int{}
	for _, pr := range w.prober.between(s.done, time.Now()) {
		per[pr.backend]++
	}
	if per[gone] != 0 || per[1] == 0 || per[2] == 0 {
		t.Fatalf("new connections after the hand-off per backend: %v; want none on backend-3", per)
	}
	sum := w.finish(t)
	t.Logf("%d streams on backend-3 kept working; new connections after the swap per backend %v; %v", onGone, per, sum)
	stopXLB(t, l, p)
}

// A successor that fails on purpose, once on an invalid xlb.yaml and
// once as a "new binary" that exits 1 at once: the old process keeps
// serving, says why, counts the failure, and a good hand-off still works.
func TestHandOffFailure(t *testing.T) {
	l := greetedLab(t)
	cfg := labConfig(l, "")
	bin := installBinary(t, xlbBinary)
	p := startPinned(t, l, bin, cfg)
	w := startWorkload(t, l)

	if err := os.WriteFile(p.Config, []byte(cfg+"bogus_field: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := failedHandOff(t, l, p, w)
	w.check(t, "the hand-off to an invalid config")
	checkSwap(t, "invalid config", s)
	if d := statusDoc(t, l); d.Upgrades.Failed != 1 || d.Upgrades.LastFailure == "" || d.Lifecycle != api.Running {
		t.Fatalf("after a failed hand-off: lifecycle %s upgrades %+v, want running, 1 failed with a reason", d.Lifecycle, d.Upgrades)
	}
	if err := os.WriteFile(p.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	writeBinary(t, bin, []byte(failingBinary))
	before := w.received()
	s = failedHandOff(t, l, p, w)
	w.check(t, "the hand-off to a failing binary")
	checkSwap(t, "failing binary", s)
	w.waitFlowing(t, before, 30*time.Second)
	if ok, failed := hotUpgrades(t, l); ok != 0 || failed != 2 {
		t.Fatalf("xlb_hot_upgrades_total ok %v failed %v after two failures, want 0 and 2", ok, failed)
	}

	replaceBinary(t, bin, xlbBinary)
	before = w.received()
	s = handOff(t, l, p, w)
	w.check(t, "the good hand-off")
	checkSwap(t, "good hand-off after two failures", s)
	w.waitFlowing(t, before, 30*time.Second)
	sum := w.finish(t)
	t.Logf("%v; failure lines:\n%s", sum, grepLines(p.Log(), xlbproc.LineFailed))
	if ok, failed := hotUpgrades(t, l); ok != 1 || failed != 2 {
		t.Fatalf("xlb_hot_upgrades_total ok %v failed %v, want 1 and 2", ok, failed)
	}
	stopXLB(t, l, p)
}

// grepLines returns the lines of log that contain s.
func grepLines(log, s string) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
