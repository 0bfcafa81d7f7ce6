package fleet

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// changedName is xlb_name after the config change: the status API shows
// which xlb.yaml a host runs.
const changedName = "fleet-b"

// configChangeVars change every host's xlb.yaml: its name and orphan TTL
// (300 s by default, also the minimum).
var configChangeVars = map[string]any{"xlb_name": changedName, "xlb_orphan_ttl_secs": 600}

// configChangeKeys is how the change summary names that change.
const configChangeKeys = "config(name,orphan_ttl_secs)"

// mainPID is xlb.service's main PID on host h.
func mainPID(h *Host) (string, error) {
	out, err := h.Exec("systemctl", "show", "--property=MainPID", "--value", "xlb.service")
	return strings.TrimSpace(out), err
}

// configChange: site.yml with a changed xlb.yaml on the running fleet
// under client traffic. The first play writes every host's file at once
// and applies nothing; the second takes the hosts through the change
// procedure one at a time with the default method, reload: no drain, a
// hand-off per host. Each host's journal shows exactly one hand-off, no
// two overlap, the router has the route in every sample, with every
// host's path all along, every host runs the new
// xlb.yaml and has nothing left to reload, and not one new connection
// fails nor one long-lived connection breaks.
func (f *fleet) configChange(t *testing.T) {
	f.startTraffic(t)
	pids := map[string]string{}
	for _, h := range f.l.Hosts {
		pid, err := mainPID(h)
		if err != nil {
			t.Fatal(err)
		}
		pids[h.Inventory] = pid
	}
	since := time.Now()
	counts0 := f.mon.Counts()
	report := filepath.Join(f.dir, "report.json")
	os.Remove(report)
	r := f.playbook(t, "site.yml", v1, configChangeVars)
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, Tail(r.Output, 200))
	}
	f.requireRecap(t, r, f.hostNames(), func(rc Recap) bool { return rc.Failed == 0 && rc.Unreachable == 0 && rc.Changed > 0 }, "no failure, changes")
	f.phase("site.yml config change (host by host)", since)
	t.Logf("change summary printed by the playbook:\n%s", SummaryBlock(r.Output))

	for _, h := range f.hostNames() {
		for task, want := range map[string]string{
			"Check the environment file and xlb.yaml together (xlb check --env-file)": "ok",
			"Write /etc/xlb/xlb.yaml":                            "changed",
			"Write the environment file of xlb.service":          "ok",
			"Check that a new process took over":                 "ok",
			"Open a connection to the service through this host": "ok",
		} {
			if st := TaskStatus(r.Output, task, h); st != want {
				t.Errorf("%s: %q: %q, want %s", h, task, st, want)
			}
		}
	}
	for _, e := range f.reportOfAll(t, report) {
		if e.Result != "applied" || e.Method != "reload" || e.Drained || e.VersionAfter != v1 ||
			strings.Join(e.Changes, " ") != configChangeKeys {
			t.Errorf("report: %+v, want applied by reload, not drained, still %s, changes [%s]", e, v1, configChangeKeys)
		}
	}

	// One hand-off per host, never two at once, in inventory order.
	var all []HandOff
	for _, h := range f.l.Hosts {
		hs, err := h.HandOffs(since)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 1 || hs[0].Done.IsZero() {
			t.Errorf("%s: hand-offs since the run began: %+v, want one, completed", h.Inventory, hs)
		}
		all = append(all, hs...)
	}
	if a, b, overlap := Overlap(all); overlap {
		t.Errorf("two hosts reloading at once: %s %s..%s and %s %s..%s", a.Host, a.Start.Format("15:04:05.000"),
			a.Done.Format("15:04:05.000"), b.Host, b.Start.Format("15:04:05.000"), b.Done.Format("15:04:05.000"))
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Start.Before(all[j].Start) })
	var order []string
	for i, ho := range all {
		gap := ""
		if i > 0 && !all[i-1].Done.IsZero() {
			gap = ", " + ho.Start.Sub(all[i-1].Done).Round(100*time.Millisecond).String() + " after the previous one"
		}
		t.Logf("%s handed over at %s in %s%s", ho.Host, ho.Start.Format("15:04:05.000"),
			ho.Done.Sub(ho.Start).Round(time.Millisecond), gap)
		order = append(order, ho.Host)
	}
	if strings.Join(order, ",") != strings.Join(f.hostNames(), ",") {
		t.Errorf("hand-off order %v, want the inventory's %v", order, f.hostNames())
	}

	// The route never left the router; every host runs the new xlb.yaml.
	f.checkRouteKept(t, "the config change", counts0, since)
	for _, h := range f.l.Hosts {
		d, err := h.Status()
		if err != nil {
			t.Error(err)
			continue
		}
		if d.Name != changedName || d.Config.ReloadRequired || d.Upgrades.Start != api.StartHandedOver || d.Version != v1 {
			t.Errorf("%s: name %q, reload_required %v (%v), start %q, version %q; want %q, false, %q, %q",
				h.Inventory, d.Name, d.Config.ReloadRequired, d.Config.ChangedKeys, d.Upgrades.Start, d.Version, changedName, api.StartHandedOver, v1)
		}
		if pid, err := mainPID(h); err != nil || pid == pids[h.Inventory] {
			t.Errorf("%s: main PID %s (before %s) %v, want a new one", h.Inventory, pid, pids[h.Inventory], err)
		}
	}

	f.logTraffic(t, since, f.checkTraffic(t, since, false))
	breaks := 0
	for _, b := range f.work.Stats().Breaks {
		if !b.At.Before(since) {
			breaks++
		}
	}
	if breaks != 0 {
		t.Errorf("%d long-lived connections broke during the config change, want 0", breaks)
	}
}
