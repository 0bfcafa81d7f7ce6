package fleet

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// hotUpgradeFailsVerification: a hot upgrade whose new process takes over
// and then fails verification leaves no host in rotation serving what the
// verification refused (issue 28). xlb2's xlb.yaml gets one backend that
// nobody holds; rolling-upgrade.yml (reload, every host already on v2)
// verifies xlb1, reloads xlb2 (the config changed), whose successor takes
// over, ready and announcing, with two routable backends where the
// verification wants all three (xlb_verify_min_routable_backends' default):
// the role drains xlb2 with the bgp hook, as a failed restart leaves its
// host, waits until the router has no path via it, and stops the rollout
// before xlb3. With the config put back, the next run reloads, verifies
// and returns xlb2.
func (f *fleet) hotUpgradeFailsVerification(t *testing.T) {
	start := time.Now()
	bad := f.l.Hosts[1]
	good, err := bad.Exec("cat", "/etc/xlb/xlb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	oneGone := strings.ReplaceAll(good, testnet.OneArmBackendIP(2).String(), netip.AddrFrom4([4]byte{192, 0, 2, 203}).String())
	if oneGone == good {
		t.Fatalf("xlb2's xlb.yaml does not list %s:\n%s", testnet.OneArmBackendIP(2), good)
	}
	if err := bad.Container.WriteFile(ctx, "/etc/xlb/xlb.yaml", []byte("# fleet test: one backend nobody holds\n"+oneGone), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(f.dir, "report.json")
	os.Remove(report)
	r := f.playbook(t, "rolling-upgrade.yml", v2, map[string]any{"xlb_upgrade_method": "reload"})
	f.phase("rolling-upgrade.yml by reload, xlb2 fails verification", start)
	if r.Err == nil {
		t.Fatalf("the rollout succeeded; want it to stop at %s\n%s", bad.Inventory, Tail(r.Output, 100))
	}
	t.Logf("rollout summary printed by the playbook:\n%s", SummaryBlock(r.Output))
	if rc := r.Recap[bad.Inventory]; rc.Failed != 1 {
		t.Errorf("%s: recap %+v, want failed=1", bad.Inventory, rc)
	}
	if rc, ok := r.Recap["xlb3"]; ok && rc.OK > 0 {
		t.Errorf("xlb3 ran tasks after the failure: %+v", rc)
	}
	for task, want := range map[string]string{
		"Check that a new process took over":                                    "ok", // the hand-off itself succeeded
		"Check /readyz":                                                         "ok", // and the new process is ready
		"Check the interfaces, backends and version":                            "fatal",
		"Drain or undrain the instance (POST /api/v1/drain or /api/v1/undrain)": "changed",
		"Wait until the router has no path via this host":                       "ok",
	} {
		if st := TaskStatus(r.Output, task, bad.Inventory); st != want {
			t.Errorf("%s: %q: %q, want %s", bad.Inventory, task, st, want)
		}
	}
	if !strings.Contains(strings.Join(strings.Fields(r.Output), " "), "stays drained (its hot upgrade took over, then failed verification)") {
		t.Errorf("the failure does not say that the host was drained after its hot upgrade:\n%s", Tail(r.Output, 40))
	}
	entries, err := ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, entries)
	var e ReportEntry
	for _, x := range entries {
		if x.Host == bad.Inventory {
			e = x
		}
	}
	if e.Result != "FAILED" || e.Method != "reload" || !e.Drained || !strings.Contains(e.Message, "routable backends") {
		t.Errorf("report %s: %+v, want FAILED at the routable backends after a reload, drained", bad.Inventory, e)
	}
	// No path via xlb2 (drained: its route was withdrawn, though its new
	// process is ready); the others keep theirs.
	want := hostAddrs(f.l.Hosts[0], f.l.Hosts[2])
	paths, err := f.l.KernelPaths()
	slices.SortFunc(paths, netip.Addr.Compare)
	if err != nil || !slices.Equal(paths, want) {
		t.Errorf("router's kernel route via %v (%v), want %v (xlb2 drained)", paths, err, want)
	}
	if bird, out := f.l.BirdPaths(); !slices.Equal(bird, want) {
		t.Errorf("bird's routes via %v, want %v (xlb2 drained):\n%s", bird, want, out)
	}
	if code, body, err := bad.Get("/readyz"); err != nil || code != 503 || strings.TrimSpace(string(body)) != "draining" {
		t.Errorf("%s: /readyz %d %q %v, want 503 draining", bad.Inventory, code, body, err)
	}
	if _, err := bad.Exec("test", "-f", "/run/xlb-ansible-drained"); err != nil {
		t.Errorf("%s: no drain mark after the drain: %v", bad.Inventory, err)
	}

	// The fix: the config back; the next run returns xlb2.
	start = time.Now()
	if err := bad.Container.WriteFile(ctx, "/etc/xlb/xlb.yaml", []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	r = f.playbook(t, "rolling-upgrade.yml", v2, map[string]any{"xlb_upgrade_method": "reload"})
	f.phase("rolling-upgrade.yml again after the fix", start)
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, Tail(r.Output, 150))
	}
	f.waitPaths(t, "after xlb2's return", f.l.Hosts...)
	for _, h := range f.l.Hosts {
		f.checkHost(t, h, v2, true)
	}
	if _, err := bad.Exec("test", "!", "-e", "/run/xlb-ansible-drained"); err != nil {
		t.Errorf("%s: the drain mark is left after the return: %v", bad.Inventory, err)
	}
}
