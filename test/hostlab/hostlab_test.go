package hostlab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/pkgtest"
)

// Two package versions for the upgrade tests (v1 < v2 in dpkg and rpm).
const (
	v1 = "0.0.1~hostlab.1"
	v2 = "0.0.1~hostlab.2"
)

// pkgDir is where the packages appear inside containers.
const pkgDir = "/var/tmp/xlb-packages"

var (
	setupOnce sync.Once
	setupErr  error
	rootfs    string
	pkgs      [2]pkgtest.Packages
	pkgFiles  map[string][]byte // container path -> content
	workDir   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if workDir != "" {
		os.RemoveAll(workDir)
	}
	os.Exit(code)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("hostlab: needs root (debootstrap, systemd-nspawn, network namespaces, XDP); run the tests as root")
	}
}

// setup builds (or reuses) the root filesystem and builds the two package
// versions, once per test binary.
func setup(t *testing.T) {
	t.Helper()
	requireRoot(t)
	setupOnce.Do(func() {
		cleanupStale(t)
		start := time.Now()
		var built bool
		rootfs, built, setupErr = EnsureRootfs(CacheDir(), DefaultSpec(), t.Logf)
		if setupErr != nil {
			return
		}
		if built {
			t.Logf("hostlab: debootstrap (cold cache) took %s", time.Since(start).Round(100*time.Millisecond))
		} else {
			t.Logf("hostlab: root filesystem from cache %s", rootfs)
		}
		workDir, setupErr = os.MkdirTemp("", "xlb-hostlab-pkgs-")
		if setupErr != nil {
			return
		}
		start = time.Now()
		pkgFiles = map[string][]byte{}
		for i, v := range []string{v1, v2} {
			dir := filepath.Join(workDir, fmt.Sprint(i+1))
			if pkgs[i], setupErr = pkgtest.Build(dir, v); setupErr != nil {
				return
			}
			for _, p := range []string{pkgs[i].Deb, pkgs[i].RPM} {
				b, err := os.ReadFile(p)
				if err != nil {
					setupErr = err
					return
				}
				pkgFiles[filepath.Join(pkgDir, filepath.Base(p))] = b
			}
		}
		t.Logf("hostlab: packages %s and %s built in %s", v1, v2, time.Since(start).Round(100*time.Millisecond))
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

// cleanupStale removes what earlier runs that died left: containers, their
// labs (container "hostlab-PREFIX" ran in lab PREFIX), package directories.
func cleanupStale(t *testing.T) {
	names, err := CleanupStale()
	if err != nil {
		t.Logf("hostlab: stale leftovers: %v", err)
	}
	for _, n := range names {
		t.Logf("hostlab: removed the leftovers of container %s", n)
		if prefix, ok := strings.CutPrefix(n, "hostlab-"); ok {
			if err := lab.CleanupStale(prefix); err != nil {
				t.Logf("hostlab: stale lab %s: %v", prefix, err)
			}
		}
	}
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "xlb-hostlab-pkgs-*"))
	for _, d := range old {
		if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > time.Hour {
			os.RemoveAll(d)
		}
	}
}

func debIn(i int) string { return filepath.Join(pkgDir, filepath.Base(pkgs[i].Deb)) }
func rpmIn(i int) string { return filepath.Join(pkgDir, filepath.Base(pkgs[i].RPM)) }

// TestRootfs checks the cached root filesystem (and builds it when
// missing: `make hostlab-rootfs`).
func TestRootfs(t *testing.T) {
	requireRoot(t)
	start := time.Now()
	dir, built, err := EnsureRootfs(CacheDir(), DefaultSpec(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if built {
		t.Logf("debootstrap took %s", time.Since(start).Round(100*time.Millisecond))
	}
	for _, p := range []string{"lib/systemd/systemd", "usr/bin/systemctl", "usr/bin/dpkg", "usr/bin/apt-get", "usr/bin/rpm", "usr/bin/ip", markerFile} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			t.Errorf("root filesystem %s lacks %s", dir, p)
		}
	}
	// A second call reuses the entry.
	if again, built, err := EnsureRootfs(CacheDir(), DefaultSpec(), nil); err != nil || built || again != dir {
		t.Errorf("second EnsureRootfs = %s, built %v, %v; want the cached %s", again, built, err, dir)
	}
}

// TestScriptsWithoutSystemd installs, upgrades, removes and purges both
// packages in a container that is not booted (as in a chroot or an image
// build): no systemd runs, so the scripts must not try to start or stop
// anything, and must still succeed and clean up.
func TestScriptsWithoutSystemd(t *testing.T) {
	setup(t)
	script := strings.Join([]string{
		"set -ex",
		"test ! -d /run/systemd/system",
		"dpkg -i " + debIn(0),
		"test -x /usr/bin/xlb && test -f /etc/xlb/xlb.yaml",
		"test ! -e /etc/systemd/system/multi-user.target.wants/xlb.service",
		// An operator enables it in the image (systemctl works offline).
		"systemctl enable xlb.service",
		"test -L /etc/systemd/system/multi-user.target.wants/xlb.service",
		"echo '# edited' >> /etc/xlb/xlb.yaml",
		"dpkg -i " + debIn(1),
		"grep -q '^# edited' /etc/xlb/xlb.yaml",
		"dpkg -i " + debIn(1), // reinstall: idempotent
		"dpkg -r xlb",
		"test ! -e /usr/bin/xlb && test -f /etc/xlb/xlb.yaml",
		"test ! -e /etc/systemd/system/multi-user.target.wants/xlb.service",
		"dpkg -r xlb", // nothing left to remove: still fine
		"dpkg -P xlb",
		"test ! -e /etc/xlb && test ! -e /etc/default/xlb",
		"rpm -i --nodeps " + rpmIn(0),
		"test -x /usr/bin/xlb && test -f /etc/sysconfig/xlb",
		"systemctl enable xlb.service",
		"echo '# edited' >> /etc/xlb/xlb.yaml",
		"rpm -U --nodeps " + rpmIn(1),
		"grep -q '^# edited' /etc/xlb/xlb.yaml",
		"rpm -e xlb",
		"test ! -e /usr/bin/xlb && test -f /etc/xlb/xlb.yaml.rpmsave",
		"test ! -e /etc/systemd/system/multi-user.target.wants/xlb.service",
		"echo SCRIPTS-OK",
	}, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := Run(ctx, Options{Rootfs: rootfs, Name: "xlb-chroot-test", Files: pkgFiles}, "/bin/sh", "-c", script)
	if err != nil || !strings.Contains(out, "SCRIPTS-OK") {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, bad := range []string{"Failed to", "System has not been booted", "warning: restart failed"} {
		if strings.Contains(out, bad) {
			t.Errorf("output contains %q:\n%s", bad, out)
		}
	}
	t.Logf("without systemd:\n%s", out)
}
