package hostlab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/test/pkgtest"
)

// preHotUpgrade is the last commit whose XLB could not hand over (before
// issue 12): its binary exits 2 on `xlb capabilities`, its package scripts
// restart xlb on upgrade. Upgrades from it are what hosts in the field
// meet first.
const preHotUpgrade = "644d6c7c6a71b2a501479e5a7f6dca8272c3e9d7"

// v0 is the package version of preHotUpgrade's build (below v1).
const v0 = "0.0.1~hostlab.0"

var (
	oldOnce sync.Once
	oldPkgs pkgtest.Packages
	oldErr  error
	oldSkip string
)

// olderPackages builds preHotUpgrade's packages once (git archive into the
// work directory, `make package` there with this tree's nfpm). It skips t
// when the commit is not in this clone (a shallow one).
func olderPackages(t *testing.T) pkgtest.Packages {
	t.Helper()
	oldOnce.Do(func() {
		root, err := pkgtest.ModuleRoot()
		if err != nil {
			oldErr = err
			return
		}
		if err := exec.Command("git", "-C", root, "cat-file", "-e", preHotUpgrade+"^{commit}").Run(); err != nil {
			oldSkip = "commit " + preHotUpgrade + " is not in this clone (shallow?): the upgrade from a version without hot upgrade is not tested"
			return
		}
		start := time.Now()
		src := filepath.Join(workDir, "src-"+v0)
		if oldErr = os.MkdirAll(src, 0o755); oldErr != nil {
			return
		}
		out, err := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, preHotUpgrade, src).CombinedOutput()
		if err != nil {
			oldErr = err
			t.Logf("git archive: %s", out)
			return
		}
		oldPkgs, oldErr = pkgtest.BuildTree(src, filepath.Join(workDir, "0"), v0,
			"NFPM="+filepath.Join(root, ".cache", "bin", "nfpm"), "REVISION="+preHotUpgrade)
		t.Logf("hostlab: packages %s of %s built in %s", v0, preHotUpgrade[:12], time.Since(start).Round(100*time.Millisecond))
	})
	if oldSkip != "" {
		t.Skip(oldSkip)
	}
	if oldErr != nil {
		t.Fatal(oldErr)
	}
	return oldPkgs
}

// TestUpgradeFromOlderVersion upgrades a running xlb of a version without
// hot upgrade to this one, with dpkg and with rpm: the running binary
// cannot hand over, so the scripts restart it (once), say that connections
// are reset, and the new version runs.
func TestUpgradeFromOlderVersion(t *testing.T) {
	setup(t)
	old := olderPackages(t)
	testStart := time.Now()
	h := bootHost(t, "oldup")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, p := range []string{old.Deb, old.RPM} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.c.WriteFile(ctx, filepath.Join(pkgDir, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oldDeb, oldRPM := filepath.Join(pkgDir, filepath.Base(old.Deb)), filepath.Join(pkgDir, filepath.Base(old.RPM))

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
