package hostlab

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
)

var adoptedRE = regexp.MustCompile(`adopted (\d+) connection pairs`)

// adoptedPairs is N of the last "adopted N connection pairs" in a journal
// (the daemon logs it on every start that finds pins), or -1.
func adoptedPairs(journal string) int {
	m := adoptedRE.FindAllStringSubmatch(journal, -1)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

// keepFlowing waits until every stream has completed k more exchanges (the
// data path of whatever process runs now forwards them) and fails at the
// first broken stream.
func (h *host) keepFlowing(s *streams, k int64) {
	h.t.Helper()
	marks := s.marks()
	h.waitFor(fmt.Sprintf("%d more exchanges on each of %d streams", k, len(s.list)), 90*time.Second, func() (bool, string) {
		if err := s.failures(); err != nil {
			h.t.Fatalf("a stream broke: %v", err)
		}
		ok, behind := s.progressed(marks, k)
		return ok, fmt.Sprintf("%d streams behind", behind)
	})
}

// openStreams resets the backends' statistics, opens n streams (an
// exchange every 300 ms each) that t's end closes if the test does not,
// and waits until each has exchanged twice more.
func (h *host) openStreams(n int) *streams {
	h.t.Helper()
	h.l.ResetStats()
	s, err := openStreams(h.l.Client(), listenAddr, n, 300*time.Millisecond)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { s.close() })
	h.keepFlowing(s, 2)
	return s
}

// checkBackendsClean fails when a backend's echo server saw a connection
// reset or fail since the last ResetStats.
func (h *host) checkBackendsClean() {
	h.t.Helper()
	for i, b := range h.l.Backends {
		if st := b.Stats(); st.Resets > 0 || st.Errors > 0 {
			h.t.Errorf("%s: %d connections reset and %d failed on the server side", backendName(i), st.Resets, st.Errors)
		}
	}
}

// watchdogPinged waits until systemd's watchdog stamp moves: the main
// process (a successor after a hand-off) pings at half of WatchdogSec.
func (h *host) watchdogPinged() {
	h.t.Helper()
	first := h.show("WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"]
	h.waitFor("a watchdog ping from the main process", 45*time.Second, func() (bool, string) {
		ts := h.show("WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"]
		return ts != first, "WatchdogTimestampMonotonic=" + ts
	})
}

// backendStates maps the status API's backend names to their states.
func backendStates(d api.Document) map[string]api.Backend {
	m := map[string]api.Backend{}
	for _, b := range d.Backends {
		m[b.Name] = b
	}
	return m
}

// TestHotUpgrade drives XLB's hot upgrade through the packaging and
// systemd on a booted Debian (issue 12): a package upgrade with apt while
// 100 connections stream both ways keeps every one of them; `systemctl
// reload xlb` applies a changed backend list, the removed backend draining
// while its connections live on; a reload with an invalid xlb.yaml fails
// visibly and leaves the old process serving.
func TestHotUpgrade(t *testing.T) {
	setup(t)
	testStart := time.Now()
	h := bootHost(t, "hotup")
	step := h.step

	step("install-and-start", func(t *testing.T) {
		h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(0))
		if caps := h.sh("xlb", "capabilities"); !slices.Contains(strings.Fields(caps), "hot-upgrade") {
			t.Fatalf("xlb capabilities = %q, want a line hot-upgrade", caps)
		}
		// Backends 1 and 2; the reload step swaps 2 for 3.
		h.configure(0, 1)
		h.sh("systemctl", "enable", "--now", "xlb")
		if code, body := h.readyz(); code != 200 {
			t.Fatalf("readyz after start: %d %s", code, body)
		}
		if d := h.status(); d.Upgrades.Start != api.StartFresh {
			t.Errorf("upgrades.start %q after the first start, want %q", d.Upgrades.Start, api.StartFresh)
		}
		h.traffic(8)
	})

	step("apt-upgrade-keeps-100-connections", func(t *testing.T) {
		s := h.openStreams(100)
		old := h.mainPID()
		since := h.cursor()
		start := time.Now()
		out := h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(1))
		took := time.Since(start)
		if !strings.Contains(out, "the new version took over") {
			t.Errorf("apt output lacks the hand-off:\n%s", out)
		}
		pid := h.mainPID()
		if pid == old || pid == 0 {
			t.Errorf("MainPID %d after the upgrade (before %d)", pid, old)
		}
		d := h.status()
		if d.Version != v2 {
			t.Errorf("status API version %q after the upgrade, want %s", d.Version, v2)
		}
		if d.Upgrades.Start != api.StartHandedOver || d.Upgrades.AdoptedPairs < len(s.list) || d.Upgrades.OK < 1 {
			t.Errorf("upgrades %+v: want start %q, at least %d adopted pairs, ok >= 1", d.Upgrades, api.StartHandedOver, len(s.list))
		}
		if p := h.show("ActiveState", "SubState"); p["ActiveState"] != "active" || p["SubState"] != "running" {
			t.Errorf("after the upgrade: %v, want active/running", p)
		}
		j := h.journal(since)
		for _, want := range []string{"hot upgrade: starting the new process", "hot upgrade complete: handed over"} {
			if !strings.Contains(j, want) {
				t.Errorf("journal lacks %q:\n%s", want, j)
			}
		}
		h.keepFlowing(s, 3)
		// The successor, not its predecessor, keeps systemd's watchdog fed.
		h.watchdogPinged()
		if p := h.show("MainPID", "NRestarts"); p["MainPID"] != strconv.Itoa(pid) || p["NRestarts"] != "0" {
			t.Errorf("after the watchdog ping: %v, want MainPID %d and no restart", p, pid)
		}
		if err := s.close(); err != nil {
			t.Fatalf("streams across the upgrade: %v", err)
		}
		h.checkBackendsClean()
		t.Logf("apt-get install %s -> %s with %d streams open took %s; all kept, %d bytes echoed; adopted %d pairs",
			v1, v2, len(s.list), took.Round(10*time.Millisecond), s.bytes(), d.Upgrades.AdoptedPairs)
	})

	step("reload-applies-backend-change", func(t *testing.T) {
		s := h.openStreams(30)
		removed, added := h.l.Backends[1], h.l.Backends[2]
		onRemoved := removed.Stats().Active
		if onRemoved == 0 {
			t.Fatalf("no stream landed on %s", backendName(1))
		}
		old := h.mainPID()
		h.configure(0, 2)
		out, err := h.try("systemctl", "reload", "xlb")
		if err != nil {
			t.Fatalf("systemctl reload: %v\n%s\n%s", err, out, h.journal(""))
		}
		if pid := h.mainPID(); pid == old || pid == 0 {
			t.Errorf("MainPID %d after the reload (before %d)", pid, old)
		}
		d := h.status()
		states := backendStates(d)
		if b := states[backendName(2)]; b.State != api.Routable {
			t.Errorf("%s (added): %+v, want routable", backendName(2), b)
		}
		if b := states[backendName(1)]; b.State != api.Draining || b.ActiveConnections == 0 {
			t.Errorf("%s (removed, %d streams on it): %+v, want draining with its connections", backendName(1), onRemoved, b)
		}
		if d.Config.ReloadRequired {
			t.Errorf("config.reload_required after the reload: %+v", d.Config)
		}
		// New connections go to backends 1 and 3 only; the streams on the
		// removed backend live on.
		acceptedBefore := removed.Stats().Accepted
		addedBefore := added.Stats().Accepted
		for i := 0; i < 6; i++ {
			if err := echoThrough(h.l.Client(), rand.New(rand.NewPCG(uint64(i), 7)), 64); err != nil {
				t.Fatalf("new connection %d after the reload: %v", i+1, err)
			}
		}
		if got := removed.Stats().Accepted; got != acceptedBefore {
			t.Errorf("%s (removed) accepted %d new connections after the reload", backendName(1), got-acceptedBefore)
		}
		if got := added.Stats().Accepted; got-addedBefore != 3 {
			t.Errorf("%s (added) accepted %d of 6 new connections, want 3", backendName(2), got-addedBefore)
		}
		h.keepFlowing(s, 3)
		if err := s.close(); err != nil {
			t.Fatalf("streams across the reload: %v", err)
		}
		h.checkBackendsClean()
		t.Logf("reload with %s replaced by %s: %d streams (%d on the removed backend) kept, %d bytes echoed", backendName(1), backendName(2), len(s.list), onRemoved, s.bytes())
	})

	step("invalid-config-reload-fails", func(t *testing.T) {
		s := h.openStreams(20)
		good := labConfig(h.l, h.backends...)
		failedBefore := h.status().Upgrades.Failed
		old := h.mainPID()
		since := h.cursor()
		h.write("/etc/xlb/xlb.yaml", good+"no_such_setting: 1\n", 0o644)
		out, err := h.try("systemctl", "reload", "xlb")
		if err == nil {
			t.Errorf("systemctl reload with an invalid xlb.yaml succeeded:\n%s", out)
		}
		p := h.show("ActiveState", "SubState", "MainPID")
		if p["ActiveState"] != "active" || p["MainPID"] != strconv.Itoa(old) {
			t.Errorf("after the failed reload: %v, want active with MainPID %d", p, old)
		}
		if code, body := h.readyz(); code != 200 {
			t.Errorf("readyz after the failed reload: %d %s", code, body)
		}
		d := h.status()
		if d.Upgrades.Failed != failedBefore+1 || d.Upgrades.LastFailure == "" {
			t.Errorf("upgrades %+v: want failed %d and the reason", d.Upgrades, failedBefore+1)
		}
		j := h.journal(since)
		if !strings.Contains(j, "hot upgrade failed; still serving") {
			t.Errorf("journal lacks the failed hand-off:\n%s", j)
		}
		t.Logf("systemctl reload: %v; %s; journal: %s", err, strings.TrimSpace(out), clip(firstMatch(j, "hot upgrade failed"), 300))
		h.keepFlowing(s, 3)
		h.write("/etc/xlb/xlb.yaml", good, 0o644)
		if err := s.close(); err != nil {
			t.Fatalf("streams across the failed reload: %v", err)
		}
		h.checkBackendsClean()
		h.traffic(8)
	})

	t.Logf("whole hot-upgrade test: %s", time.Since(testStart).Round(100*time.Millisecond))
}
