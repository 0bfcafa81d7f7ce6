package hostlab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/pkgtest"
)

// preHotUpgrade is the last commit whose XLB could not hand over (before
// issue 12): its binary exits 2 on `xlb capabilities`, its package scripts
// restart xlb on upgrade. Upgrades from it are what hosts in the field
// meet first.
const preHotUpgrade = "644d6c7c6a71b2a501479e5a7f6dca8272c3e9d7"

// layout2Release is the last commit of pinned layout 2 (bpf/layout.h
// XLB_LAYOUT_VERSION 2, before issue 13): it hands over, and its pins are
// migrated entry by entry into this build's layout by the successor
// (through layout 3).
const layout2Release = "84dceb37dd6385673d0e72e6aa5d22e137dcae9f"

// layout3Release is the last commit of pinned layout 3 (the issue-13
// build, before issue 14's handshake latency and backend ports): its pins
// are migrated into this build's layout by the successor (through layout
// 4).
const layout3Release = "c29c03fe2c1257be276830cdf07e78e77d23dce9"

// layout10Release is the last commit of pinned layout 10 (issue 30's
// schedulers, before issue 31's UDP): TCP services only, its pins are
// migrated into this build's layout (service records grown, 16 reaped
// reasons per member, the UDP counters, cursors and maps new and empty).
const layout10Release = "989c0b858f7e3344e8d805c3a73d67e830f14856"

// v0, vLayout2, vLayout3 and vLayout10 are the package versions of the older builds
// (all below v1).
const (
	v0        = "0.0.1~hostlab.0"
	vLayout2  = "0.0.1~hostlab.0.2"
	vLayout3  = "0.0.1~hostlab.0.3"
	vLayout10 = "0.0.1~hostlab.0.10"
)

// olderRelease is an older commit's packages, built once per test binary.
type olderRelease struct {
	commit, version, dir string

	once sync.Once
	pkgs pkgtest.Packages
	err  error
	skip string
}

var (
	preHotUpgradePkgs = &olderRelease{commit: preHotUpgrade, version: v0, dir: "0"}
	layout2Pkgs       = &olderRelease{commit: layout2Release, version: vLayout2, dir: "0-layout2"}
	layout3Pkgs       = &olderRelease{commit: layout3Release, version: vLayout3, dir: "0-layout3"}
	layout10Pkgs      = &olderRelease{commit: layout10Release, version: vLayout10, dir: "0-layout10"}
)

// packages builds the release's packages once (git archive into the work
// directory, `make package` there with this tree's nfpm). It skips t when
// the commit is not in this clone (a shallow one).
func (r *olderRelease) packages(t *testing.T) pkgtest.Packages {
	t.Helper()
	r.once.Do(func() {
		root, err := pkgtest.ModuleRoot()
		if err != nil {
			r.err = err
			return
		}
		if err := exec.Command("git", "-C", root, "cat-file", "-e", r.commit+"^{commit}").Run(); err != nil {
			r.skip = "commit " + r.commit + " is not in this clone (shallow?): the upgrade from it is not tested"
			return
		}
		start := time.Now()
		src := filepath.Join(workDir, "src-"+r.version)
		if r.err = os.MkdirAll(src, 0o755); r.err != nil {
			return
		}
		out, err := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, r.commit, src).CombinedOutput()
		if err != nil {
			r.err = err
			t.Logf("git archive: %s", out)
			return
		}
		r.pkgs, r.err = pkgtest.BuildTree(src, filepath.Join(workDir, r.dir), r.version,
			"NFPM="+filepath.Join(root, ".cache", "bin", "nfpm"), "REVISION="+r.commit)
		t.Logf("hostlab: packages %s of %s built in %s", r.version, r.commit[:12], time.Since(start).Round(100*time.Millisecond))
	})
	if r.skip != "" {
		t.Skip(r.skip)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.pkgs
}

// boot builds the release's packages and boots a host (bootHost) holding
// them; it returns the host and the packages' paths inside (deb, rpm).
func (r *olderRelease) boot(t *testing.T, name string) (*host, string, string) {
	t.Helper()
	p := r.packages(t)
	h := bootHost(t, name)
	deb, rpm := h.putPackages(p)
	return h, deb, rpm
}

// putPackages copies p into the container's package directory and returns
// their paths there (deb, rpm).
func (h *host) putPackages(p pkgtest.Packages) (string, string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, f := range []string{p.Deb, p.RPM} {
		b, err := os.ReadFile(f)
		if err != nil {
			h.t.Fatal(err)
		}
		if err := h.c.WriteFile(ctx, filepath.Join(pkgDir, filepath.Base(f)), b, 0o644); err != nil {
			h.t.Fatal(err)
		}
	}
	return filepath.Join(pkgDir, filepath.Base(p.Deb)), filepath.Join(pkgDir, filepath.Base(p.RPM))
}

// TestUpgradeFromOlderVersion upgrades a running xlb of a version without
// hot upgrade to this one, with dpkg and with rpm: the running binary
// cannot hand over, so the scripts restart it (once), say that connections
// are reset, and the new version runs.
func TestUpgradeFromOlderVersion(t *testing.T) {
	setup(t)
	testStart := time.Now()
	h, oldDeb, oldRPM := preHotUpgradePkgs.boot(t, "oldup")

	// upgraded checks what an upgrade from v0 to v1 left: one restart (one
	// shutdown window of the old process), the new version serving.
	upgraded := func(t *testing.T, out, since string, oldPID int) {
		for _, want := range []string{"connections established through this instance are reset"} {
			if strings.Count(out, want) != 1 {
				t.Errorf("upgrade output: want %q once:\n%s", want, out)
			}
		}
		if strings.Contains(out, "hot upgrade") {
			t.Errorf("upgrade output speaks of a hot upgrade:\n%s", out)
		}
		if pid := h.mainPID(); pid == oldPID || pid == 0 {
			t.Errorf("MainPID %d after the upgrade (before %d): not restarted", pid, oldPID)
		}
		if code, body := h.readyz(); code != 200 {
			t.Errorf("readyz after the upgrade: %d %s", code, body)
		}
		if v := h.statusVersion(); v != v1 {
			t.Errorf("version %q after the upgrade, want %s", v, v1)
		}
		if j := h.journal(since); strings.Count(j, "shutdown window over") != 1 {
			t.Errorf("journal: want exactly one stop of the old process:\n%s", j)
		}
		h.traffic(6)
	}

	h.step("deb", func(t *testing.T) {
		h.sh("apt-get", "install", "-y", "--no-install-recommends", oldDeb)
		if out, err := h.try("xlb", "capabilities"); err == nil {
			t.Fatalf("xlb capabilities of %s succeeded: %s", v0, out)
		}
		h.configure()
		h.sh("systemctl", "enable", "--now", "xlb")
		if v := h.statusVersion(); v != v0 {
			t.Fatalf("running version %q, want %s", v, v0)
		}
		pid, since := h.mainPID(), h.cursor()
		// The packaged xlb.yaml changed since v0 and the test edited it:
		// keep the edited one, as an operator would (apt asks otherwise).
		out := h.sh("apt-get", "install", "-y", "--no-install-recommends", "-o", "Dpkg::Options::=--force-confold", debIn(0))
		if !strings.Contains(out, "the running version cannot hand over") {
			t.Errorf("postinst output lacks the reason for the restart:\n%s", out)
		}
		upgraded(t, out, since, pid)
		h.sh("apt-get", "purge", "-y", "xlb")
	})

	h.step("rpm", func(t *testing.T) {
		// The new %post finds a running binary that cannot hand over and
		// leaves the restart to the old %postun.
		h.sh("rpm", "-i", "--nodeps", oldRPM)
		h.configure()
		h.sh("systemctl", "enable", "--now", "xlb")
		if v := h.statusVersion(); v != v0 {
			t.Fatalf("running version %q, want %s", v, v0)
		}
		pid, since := h.mainPID(), h.cursor()
		out := h.sh("rpm", "-U", "--nodeps", rpmIn(0))
		upgraded(t, out, since, pid)
		h.sh("test", "!", "-e", "/run/xlb-rpm-reloaded")
		h.sh("rpm", "-e", "xlb")
	})

	t.Logf("whole older-version upgrade test: %s", time.Since(testStart).Round(100*time.Millisecond))
}

// TestHotUpgradeFromLayout2 hot-upgrades a running xlb of the last
// release of pinned layout 2 to this build with apt while 50 connections
// stream both ways: the package scripts reload xlb (the running version
// hands over), the successor migrates the layout 2 pins through layout 3
// into this build's (every pair gets a next-hop slot and a SNAT port bit),
// and every connection lives on; new connections get ports of their own.
func TestHotUpgradeFromLayout2(t *testing.T) { hotUpgradeFrom(t, layout2Pkgs, "l2up", 2) }

// TestHotUpgradeFromLayout3 hot-upgrades a running xlb of the issue-13
// build (pinned layout 3) to this build with apt while 50 connections
// stream both ways: the successor migrates the layout 3 pins into layout
// 4 (flow entries gain an untimed SYN, routable sets backend ports), and
// every connection lives on.
func TestHotUpgradeFromLayout3(t *testing.T) { hotUpgradeFrom(t, layout3Pkgs, "l3up", 3) }

// TestHotUpgradeFromLayout10 hot-upgrades a running xlb of the last
// release before UDP (pinned layout 10) to this build with apt while 50
// connections stream both ways: the successor migrates the layout 10 pins
// into layout 11 (service records grow by udp_unreplied_max, each
// member's reaped cells move to 16 a member, the UDP counters, cursors
// and maps start empty), and every connection lives on. The steps from
// older layouts are the data path's TestHotUpgradeFromLayout2..9
// (pkg/dataplane).
func TestHotUpgradeFromLayout10(t *testing.T) { hotUpgradeFrom(t, layout10Pkgs, "l10up", 10) }

// hotUpgradeFrom boots a host (named name) running rel, whose pins are of
// layout from, opens 50 streams, upgrades to this build's package with
// apt and checks the hand-off: the successor migrated the pins, adopted
// every pair, and every stream and new connections go on.
func hotUpgradeFrom(t *testing.T, rel *olderRelease, name string, from int) {
	setup(t)
	testStart := time.Now()
	h, oldDeb, _ := rel.boot(t, name)

	h.sh("apt-get", "install", "-y", "--no-install-recommends", oldDeb)
	if caps := h.sh("xlb", "capabilities"); !slices.Contains(strings.Fields(caps), "hot-upgrade") {
		t.Fatalf("xlb capabilities of %s = %q, want a line hot-upgrade", rel.version, caps)
	}
	h.configure()
	h.sh("systemctl", "enable", "--now", "xlb")
	if v := h.statusVersion(); v != rel.version {
		t.Fatalf("running version %q, want %s", v, rel.version)
	}
	s := h.openStreams(50)
	pid := h.mainPID()
	since := h.cursor()
	out := h.sh("apt-get", "install", "-y", "--no-install-recommends", "-o", "Dpkg::Options::=--force-confold", debIn(0))
	if !strings.Contains(out, "the new version took over") {
		t.Errorf("apt output lacks the hand-off:\n%s", out)
	}
	if now := h.mainPID(); now == pid || now == 0 {
		t.Errorf("MainPID %d after the upgrade (before %d)", now, pid)
	}
	d := h.status()
	if d.Version != v1 {
		t.Errorf("status API version %q after the upgrade, want %s", d.Version, v1)
	}
	if d.Upgrades.Start != api.StartHandedOver || d.Upgrades.AdoptedPairs < len(s.list) {
		t.Errorf("upgrades %+v: want start %q with at least %d adopted pairs", d.Upgrades, api.StartHandedOver, len(s.list))
	}
	j := h.journal(since)
	if !strings.Contains(j, fmt.Sprintf("from_layout=%d", from)) || !strings.Contains(j, "start=migrated") {
		t.Errorf("journal lacks the migration from layout %d:\n%s", from, j)
	}
	if n := adoptedPairs(j); n < len(s.list) {
		t.Errorf("the successor adopted %d pairs, want at least %d:\n%s", n, len(s.list), j)
	}
	h.keepFlowing(s, 3)
	h.traffic(8)
	if err := s.close(); err != nil {
		t.Fatalf("streams across the migration: %v", err)
	}
	h.checkBackendsClean()
	t.Logf("apt-get install %s -> %s (layout %d -> this build's) with %d streams: all kept, %d bytes echoed; adopted %d pairs; whole test %s",
		rel.version, v1, from, len(s.list), s.bytes(), d.Upgrades.AdoptedPairs, time.Since(testStart).Round(100*time.Millisecond))
}
