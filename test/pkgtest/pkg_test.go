package pkgtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// testVersion is a snapshot version as packaging/version.sh makes them,
// with the "~" that both dpkg and rpm must accept.
const testVersion = "0.0.0~git20261130.000000.0123abc"

var (
	buildOnce sync.Once
	built     Packages
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// packages builds the packages once for every test of this binary.
func packages(t *testing.T) Packages {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "xlb-pkgtest-")
		if buildErr == nil {
			built, buildErr = Build(buildDir, testVersion)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (Debian package: run `make deps`, which installs rpm, debootstrap and systemd-container)", tool)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func hasXlbctl(t *testing.T) bool {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(filepath.Join(root, "cmd", "xlbctl"))
	return err == nil
}

// TestVersionScript checks packaging/version.sh's mapping of `git describe`
// output and that the results sort as intended in dpkg and rpm.
func TestVersionScript(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "packaging", "version.sh")
	const ctime = "1796000400" // 2026-11-30 01:00:00 UTC
	cases := []struct{ describe, want string }{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-rc.1", "1.2.3~rc.1"},
		{"v1.2.3-4-gabc1234", "1.2.3+git4.abc1234"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+git4.abc1234.dirty"},
		{"abc1234", "0.0.0~git20261130.010000.abc1234"},
		{"abc1234-dirty", "0.0.0~git20261130.010000.abc1234.dirty"},
		{"1.0.0", "1.0.0"},
	}
	for _, c := range cases {
		got := strings.TrimSpace(run(t, script, c.describe, ctime))
		if got != c.want {
			t.Errorf("version.sh %q = %q, want %q", c.describe, got, c.want)
		}
	}
	for _, bad := range []string{"release-one", "v1.2.3_beta"} {
		if out, err := exec.Command(script, bad, ctime).CombinedOutput(); err == nil {
			t.Errorf("version.sh %q = %q, want an error", bad, out)
		}
	}
	// Without arguments: this checkout's version.
	if v := strings.TrimSpace(run(t, script)); v == "" {
		t.Error("version.sh printed nothing for this checkout")
	}

	// Each version sorts before the next, in dpkg and in rpm.
	order := []string{
		"0.0.0~git20261130.010000.abc1234",
		"0.0.0~git20261130.020000.0123abc",
		"0.0.0~git20261201.000000.fff0000",
		"0.0.0",
		"0.1.0~rc.1",
		"0.1.0",
		"0.1.0+git1.abc1234",
		"0.1.0+git12.0123abc",
		"0.1.1",
	}
	_, haveDpkg := exec.LookPath("dpkg")
	_, haveRPM := exec.LookPath("rpm")
	for i := 0; i+1 < len(order); i++ {
		a, b := order[i], order[i+1]
		if haveDpkg == nil {
			if err := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run(); err != nil {
				t.Errorf("dpkg: %s is not lower than %s", a, b)
			}
		}
		if haveRPM == nil {
			out := strings.TrimSpace(run(t, "rpm", "--eval", `%{lua:print(rpm.vercmp("`+a+`", "`+b+`"))}`))
			if out != "-1" {
				t.Errorf("rpm: vercmp(%s, %s) = %s, want -1", a, b, out)
			}
		}
	}
	if haveRPM != nil {
		t.Log("rpm not installed: rpm ordering not checked")
	}
}

// entry is one file of a package listing.
type entry struct{ mode, path string }

func sortedEntries(es []entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.mode+" "+e.path)
	}
	sort.Strings(out)
	return out
}

func wantFiles(t *testing.T, unitPath, envPath string, withDirs bool) []string {
	es := []entry{
		{"-rw-------", envPath},
		{"-rw-r--r--", "/etc/xlb/xlb.yaml"},
		{"-rw-r--r--", needrestartConf},
		{"-rw-r--r--", unitPath},
		{"-rwxr-xr-x", "/usr/bin/xlb"},
		{"-rw-r--r--", "/usr/share/doc/xlb/LICENSE"},
		{"-rw-r--r--", "/usr/share/doc/xlb/copyright"},
		{"-rw-r--r--", "/usr/share/doc/xlb/kubernetes.md"},
		{"-rw-r--r--", "/usr/share/doc/xlb/schedulers.md"},
		{"-rw-r--r--", "/usr/share/doc/xlb/udp.md"},
		{"-rw-r--r--", "/usr/share/doc/xlb/examples/kubernetes-rbac.yaml"},
		{"-rw-r--r--", "/usr/share/man/man8/xlb.8.gz"},
		{"-rw-r--r--", "/usr/share/xlb/observability.md"},
		{"-rw-r--r--", "/usr/share/xlb/prometheus/xlb-alerts.yml"},
		{"-rw-r--r--", "/usr/share/xlb/prometheus/xlb-alerts.test.yml"},
		{"-rw-r--r--", "/usr/share/xlb/grafana/xlb-dashboard.json"},
	}
	if hasXlbctl(t) {
		es = append(es, entry{"-rwxr-xr-x", "/usr/bin/xlbctl"}, entry{"-rw-r--r--", "/usr/share/man/man1/xlbctl.1.gz"})
	}
	if withDirs {
		// The rpm owns the directories it creates (the deb lists every
		// directory of its data archive; the deb test skips them).
		for _, d := range []string{"/etc/xlb", "/etc/needrestart", "/etc/needrestart/conf.d", "/usr/share/doc/xlb", "/usr/share/doc/xlb/examples", "/usr/share/xlb", "/usr/share/xlb/prometheus", "/usr/share/xlb/grafana"} {
			es = append(es, entry{"drwxr-xr-x", d})
		}
	}
	return sortedEntries(es)
}

func TestDeb(t *testing.T) {
	need(t, "dpkg-deb")
	p := packages(t)

	t.Run("control", func(t *testing.T) {
		out := run(t, "dpkg-deb", "-f", p.Deb, "Package", "Version", "Architecture", "Section", "Maintainer", "Depends")
		for _, want := range []string{"Package: xlb\n", "Version: " + testVersion + "-1\n", "Section: net\n", "Maintainer: "} {
			if !strings.Contains(out, want) {
				t.Errorf("control lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "Depends:") {
			t.Errorf("the package should depend on nothing (static binaries):\n%s", out)
		}
		info := run(t, "dpkg-deb", "-I", p.Deb)
		for _, want := range []string{"conffiles", "postinst", "prerm", "postrm"} {
			if !strings.Contains(info, want) {
				t.Errorf("dpkg-deb -I lacks %s:\n%s", want, info)
			}
		}
	})

	t.Run("files", func(t *testing.T) {
		var files []entry
		for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", p.Deb)), "\n") {
			f := strings.Fields(line)
			if len(f) < 6 {
				t.Fatalf("unexpected dpkg-deb -c line %q", line)
			}
			mode, owner, path := f[0], f[1], strings.TrimPrefix(f[5], ".")
			if owner != "root/root" && owner != "0/0" {
				t.Errorf("%s owned by %s, want root/root", path, owner)
			}
			if strings.HasPrefix(mode, "d") {
				if mode != "drwxr-xr-x" {
					t.Errorf("directory %s has mode %s, want drwxr-xr-x", path, mode)
				}
				continue
			}
			if path == "/usr/share/doc/xlb/changelog.Debian.gz" {
				if mode != "-rw-r--r--" {
					t.Errorf("%s has mode %s", path, mode)
				}
				continue
			}
			files = append(files, entry{mode, path})
		}
		got := sortedEntries(files)
		want := wantFiles(t, "/lib/systemd/system/xlb.service", "/etc/default/xlb", false)
		want = append(want, "-rw-r--r-- /usr/share/lintian/overrides/xlb")
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("deb files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("conffiles", func(t *testing.T) {
		got := strings.Fields(run(t, "dpkg-deb", "-I", p.Deb, "conffiles"))
		sort.Strings(got)
		want := []string{"/etc/default/xlb", needrestartConf, "/etc/xlb/xlb.yaml"}
		if !slices.Equal(got, want) {
			t.Errorf("conffiles %v, want %v", got, want)
		}
	})

	t.Run("scripts", func(t *testing.T) {
		dir := t.TempDir()
		run(t, "dpkg-deb", "-e", p.Deb, dir)
		for _, s := range []string{"postinst", "prerm", "postrm"} {
			st, err := os.Stat(filepath.Join(dir, s))
			if err != nil {
				t.Errorf("no %s: %v", s, err)
				continue
			}
			if st.Mode().Perm() != 0o755 {
				t.Errorf("%s mode %v, want 0755", s, st.Mode().Perm())
			}
			b, _ := os.ReadFile(filepath.Join(dir, s))
			if string(b) != repoFile(t, "packaging/deb/"+s) {
				t.Errorf("%s differs from packaging/deb/%s", s, s)
			}
			checkScript(t, filepath.Join(dir, s))
		}
		for _, s := range []string{"preinst", "config", "templates"} {
			if _, err := os.Stat(filepath.Join(dir, s)); err == nil {
				t.Errorf("unexpected %s in the control archive", s)
			}
		}
	})

	t.Run("contents", func(t *testing.T) {
		root := t.TempDir()
		run(t, "dpkg-deb", "-x", p.Deb, root)
		checkContents(t, root, "lib/systemd/system/xlb.service", p.Version)
		checkNeedrestart(t, root)
	})
}

// needrestartConf is the needrestart snippet both packages install: it
// keeps needrestart from restarting xlb.service after an upgrade.
const needrestartConf = "/etc/needrestart/conf.d/xlb.conf"

// checkNeedrestart evaluates the packaged needrestart snippet under root
// as needrestart does (perl: eval of each conf.d/*.conf with %nrconf in
// scope, then each $nrconf{override_rc} key as a regex over the unit
// name) and checks that it deselects xlb.service and nothing else of
// ours.
func checkNeedrestart(t *testing.T, root string) {
	t.Helper()
	if got, want := readFile(t, filepath.Join(root, needrestartConf)), repoFile(t, "packaging/needrestart.conf"); got != want {
		t.Errorf("%s differs from packaging/needrestart.conf", needrestartConf)
	}
	const script = `use strict; our %nrconf = (override_rc => {});
my $fn = shift;
eval do { local(@ARGV, $/) = $fn; <> };
die "Error parsing $fn: $@" if $@;
for my $rc (@ARGV) {
	my @hits = map { $nrconf{override_rc}{$_} } grep { $rc =~ /$_/ } keys %{$nrconf{override_rc}};
	print "$rc=", (@hits ? join(",", @hits) : "unset"), "\n";
}`
	out := run(t, "perl", "-e", script, filepath.Join(root, needrestartConf), "xlb.service", "xlb-vip.service", "bird.service")
	want := "xlb.service=0\nxlb-vip.service=unset\nbird.service=unset\n"
	if out != want {
		t.Errorf("needrestart's override_rc from %s:\n%s\nwant:\n%s", needrestartConf, out, want)
	}
}

// checkScript: POSIX sh, set -e, valid syntax.
func checkScript(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, "#!/bin/sh\n") {
		t.Errorf("%s: want a #!/bin/sh script", filepath.Base(path))
	}
	if !strings.Contains(s, "\nset -e\n") {
		t.Errorf("%s: no set -e", filepath.Base(path))
	}
	for _, shell := range []string{"sh", "dash", "bash"} {
		if _, err := exec.LookPath(shell); err != nil {
			continue
		}
		if out, err := exec.Command(shell, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", shell, filepath.Base(path), err, out)
		}
	}
}

// checkContents runs the packaged binaries and checks the packaged files
// of an extracted package rooted at root.
func checkContents(t *testing.T, root, unit, version string) {
	t.Helper()
	xlb := filepath.Join(root, "usr/bin/xlb")
	if out := run(t, xlb, "--version"); !strings.Contains(out, version) {
		t.Errorf("xlb --version = %q, want it to name %s", out, version)
	}
	// The shipped example config validates.
	run(t, xlb, "check", "--config", filepath.Join(root, "etc/xlb/xlb.yaml"))
	if hasXlbctl(t) {
		if out, err := exec.Command(filepath.Join(root, "usr/bin/xlbctl"), "--help").CombinedOutput(); !strings.Contains(string(out), "status") {
			t.Errorf("xlbctl --help: %v\n%s", err, out)
		}
	}
	if got, want := readFile(t, filepath.Join(root, unit)), repoFile(t, "systemd/xlb.service"); got != want {
		t.Errorf("%s differs from systemd/xlb.service", unit)
	}
	if got, want := readFile(t, filepath.Join(root, "usr/share/doc/xlb/LICENSE")), repoFile(t, "LICENSE"); got != want {
		t.Error("packaged LICENSE differs from LICENSE")
	}
	// The man pages are gzipped roff that man renders without warnings.
	pages := []struct{ installed, source, name string }{
		{"usr/share/man/man8/xlb.8.gz", "packaging/xlb.8", "XDP/eBPF"},
	}
	if hasXlbctl(t) {
		pages = append(pages, struct{ installed, source, name string }{"usr/share/man/man1/xlbctl.1.gz", "packaging/xlbctl.1", "terminal console"})
	}
	for _, p := range pages {
		checkManPage(t, filepath.Join(root, p.installed), p.source, p.name)
	}
}

// checkManPage: the installed gzipped page is the source, and man renders
// it without a warning (groff's too) and with its NAME line.
func checkManPage(t *testing.T, gz, source, name string) {
	t.Helper()
	if roff := run(t, "gzip", "-dc", gz); roff != repoFile(t, source) {
		t.Errorf("packaged %s differs from %s", filepath.Base(gz), source)
	}
	if _, err := exec.LookPath("man"); err != nil {
		t.Errorf("man not installed (Debian package man-db; run `make deps`): %s not checked", source)
		return
	}
	cmd := exec.Command("man", "--warnings", "-l", gz)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MAN_KEEP_FORMATTING=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Errorf("man --warnings -l %s: %v\n%s", filepath.Base(gz), err, stderr.String())
	}
	if !strings.Contains(string(out), name) {
		t.Errorf("rendered %s lacks its NAME line (%q):\n%s", filepath.Base(gz), name, out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRPM(t *testing.T) {
	need(t, "rpm")
	p := packages(t)
	q := func(t *testing.T, args ...string) string {
		return run(t, "rpm", append([]string{"-qp"}, append(args, p.RPM)...)...)
	}

	t.Run("header", func(t *testing.T) {
		got := q(t, "--qf", "%{NAME} %{VERSION} %{RELEASE}")
		if want := "xlb " + testVersion + " 1"; got != want {
			t.Errorf("header %q, want %q", got, want)
		}
		if arch := q(t, "--qf", "%{ARCH}"); runtime.GOARCH == "amd64" && arch != "x86_64" {
			t.Errorf("arch %q, want x86_64", arch)
		}
		if out := run(t, "rpm", "-Kv", p.RPM); !strings.Contains(out, "Payload SHA256 digest: OK") {
			t.Errorf("rpm -Kv:\n%s", out)
		}
	})

	t.Run("files", func(t *testing.T) {
		// rpm -qpl names every file; the query format adds mode and owner.
		names := strings.Fields(q(t, "-l"))
		var files []entry
		for _, line := range strings.Split(strings.TrimSpace(q(t, "--qf", "[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILENAMES}\n]")), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				t.Fatalf("unexpected line %q", line)
			}
			if f[1] != "root:root" {
				t.Errorf("%s owned by %s", f[2], f[1])
			}
			files = append(files, entry{f[0], f[2]})
		}
		if len(names) != len(files) {
			t.Errorf("rpm -qpl lists %d paths, the query format %d", len(names), len(files))
		}
		got := sortedEntries(files)
		want := wantFiles(t, "/usr/lib/systemd/system/xlb.service", "/etc/sysconfig/xlb", true)
		if !slices.Equal(got, want) {
			t.Errorf("rpm files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("configfiles", func(t *testing.T) {
		got := strings.Fields(q(t, "--configfiles"))
		sort.Strings(got)
		want := []string{needrestartConf, "/etc/sysconfig/xlb", "/etc/xlb/xlb.yaml"}
		if !slices.Equal(got, want) {
			t.Errorf("configfiles %v, want %v", got, want)
		}
		// %config(noreplace): flags "c" and "n".
		for _, line := range strings.Split(strings.TrimSpace(q(t, "--qf", "[%{FILEFLAGS:fflags} %{FILENAMES}\n]")), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && slices.Contains(want, f[1]) && f[0] != "cn" {
				t.Errorf("%s has flags %q, want cn (config, noreplace)", f[1], f[0])
			}
		}
	})

	t.Run("scripts", func(t *testing.T) {
		out := q(t, "--scripts")
		for _, want := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet"} {
			if !strings.Contains(out, want) {
				t.Errorf("--scripts lacks %s:\n%s", want, out)
			}
		}
		for tag, file := range map[string]string{"POSTIN": "post", "PREUN": "preun", "POSTUN": "postun"} {
			got := strings.TrimSpace(q(t, "--qf", "%{"+tag+"}"))
			if want := strings.TrimSpace(repoFile(t, "packaging/rpm/"+file)); got != want {
				t.Errorf("%%%s differs from packaging/rpm/%s:\n%s", strings.ToLower(tag), file, got)
			}
			checkScript(t, filepathOf(t, "packaging/rpm/"+file))
		}
		for _, tag := range []string{"PREIN", "PRETRANS", "POSTTRANS"} {
			if got := strings.TrimSpace(q(t, "--qf", "%{"+tag+"}")); got != "(none)" {
				t.Errorf("unexpected %%%s scriptlet:\n%s", strings.ToLower(tag), got)
			}
		}
	})

	t.Run("changelog", func(t *testing.T) {
		// The newest entry is this build's version-release.
		out := q(t, "--changelog")
		first, _, _ := strings.Cut(out, "\n")
		if !strings.HasPrefix(first, "* ") || !strings.HasSuffix(first, " - "+testVersion+"-1") {
			t.Errorf("rpm changelog's first line %q: want \"* DATE PACKAGER - %s-1\"\n%s", first, testVersion, out)
		}
		if !strings.Contains(out, "xlb.service") {
			t.Errorf("rpm changelog lacks the unreleased changes:\n%s", out)
		}
	})

	t.Run("same-files-as-deb", func(t *testing.T) {
		need(t, "dpkg-deb")
		root := t.TempDir()
		run(t, "dpkg-deb", "-x", p.Deb, root)
		rpmPath := map[string]string{"/lib/systemd/system/xlb.service": "/usr/lib/systemd/system/xlb.service", "/etc/default/xlb": "/etc/sysconfig/xlb"}
		digests := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(q(t, "--dump")), "\n") {
			f := strings.Fields(line)
			if len(f) > 3 {
				digests[f[0]] = f[3]
			}
		}
		// The needrestart snippet, which the deb's contents test
		// evaluates, is the same file in the rpm.
		for _, path := range []string{"/usr/bin/xlb", "/etc/xlb/xlb.yaml", "/lib/systemd/system/xlb.service", "/etc/default/xlb", "/usr/share/man/man8/xlb.8.gz", needrestartConf} {
			b, err := os.ReadFile(filepath.Join(root, path))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			rp := path
			if r, ok := rpmPath[path]; ok {
				rp = r
			}
			if digests[rp] != hex.EncodeToString(sum[:]) {
				t.Errorf("deb %s and rpm %s differ", path, rp)
			}
		}
	})
}

func filepathOf(t *testing.T, rel string) string {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}

// TestUnitVerify runs systemd-analyze verify on the packaged unit, in a
// scratch root holding the extracted .deb and the host's unit files (for
// the targets it refers to), so ExecStart's binary is the packaged one.
// man: is not checked here (the man page is checked in TestDeb).
func TestUnitVerify(t *testing.T) {
	need(t, "systemd-analyze", "dpkg-deb")
	p := packages(t)
	root := t.TempDir()
	run(t, "dpkg-deb", "-x", p.Deb, root)
	for _, dir := range []string{"/lib/systemd/system", "/usr/lib/systemd/system"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		dst := filepath.Join(root, "lib/systemd/system")
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".target") && !strings.HasSuffix(e.Name(), ".slice") && !strings.HasSuffix(e.Name(), ".socket") && !strings.HasSuffix(e.Name(), ".service") {
				continue
			}
			if _, err := os.Lstat(filepath.Join(dst, e.Name())); err == nil {
				continue // the package's own unit
			}
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
				os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
			}
		}
		break
	}
	cmd := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root, "xlb.service")
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	// And it notices a broken unit (the check is not vacuous).
	unit := filepath.Join(root, "lib/systemd/system/xlb.service")
	good := readFile(t, unit)
	os.WriteFile(unit, []byte(strings.Replace(good, "Type=notify", "Type=notifyy", 1)), 0o644)
	if out, _ := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root, "xlb.service").CombinedOutput(); !strings.Contains(string(out), "notifyy") {
		t.Errorf("systemd-analyze verify did not flag a bad Type=: %s", out)
	}
}

// TestUnitContract checks the unit's settings that the issues and the
// daemon's behaviour fix: notify type, restart policy, stop timeout longer
// than the default shutdown_timeout (15 s) plus margin, capabilities, the
// hot upgrade's reload, notify access and bpffs mount, and a start
// timeout above `xlb reload`'s.
func TestUnitContract(t *testing.T) {
	unit := repoFile(t, "systemd/xlb.service")
	settings := map[string][]string{}
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("unparsable line %q", line)
			continue
		}
		settings[k] = append(settings[k], v)
	}
	one := func(k string) string {
		if len(settings[k]) != 1 {
			t.Errorf("%s set %d times, want once", k, len(settings[k]))
			return ""
		}
		return settings[k][0]
	}
	for k, want := range map[string]string{
		"Type":                    "notify",
		"ExecStart":               "/usr/bin/xlb --config /etc/xlb/xlb.yaml $ARGS",
		"Restart":                 "on-failure",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"LimitMEMLOCK":            "infinity",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
		"CapabilityBoundingSet":   "CAP_BPF CAP_NET_ADMIN",
		"ProtectKernelTunables":   "yes",
		"WantedBy":                "multi-user.target",
	} {
		if got := one(k); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	if !slices.Contains(settings["EnvironmentFile"], "-/etc/default/xlb") || !slices.Contains(settings["EnvironmentFile"], "-/etc/sysconfig/xlb") {
		t.Errorf("EnvironmentFile=%v, want the optional /etc/default/xlb and /etc/sysconfig/xlb", settings["EnvironmentFile"])
	}
	// ProtectKernelTunables keeps /proc/sys and /sys read-only but for
	// state_dir and the two sysctls the daemon writes (pkg/hostnet).
	if want := []string{"-/sys/fs/bpf/xlb", "/proc/sys/net/ipv4/conf/lo/forwarding", "/proc/sys/net/ipv4/ip_local_reserved_ports"}; !slices.Equal(settings["ReadWritePaths"], want) {
		t.Errorf("ReadWritePaths=%v, want %v", settings["ReadWritePaths"], want)
	}
	if want := []string{"@system-service bpf", "~@resources"}; !slices.Equal(settings["SystemCallFilter"], want) {
		t.Errorf("SystemCallFilter=%v, want %v", settings["SystemCallFilter"], want)
	}
	for _, k := range []string{"AmbientCapabilities", "User"} {
		if _, ok := settings[k]; ok {
			t.Errorf("%s must not be set", k)
		}
	}
	// Hot upgrade (issue 12): the reload hands over to a successor, which
	// announces itself (MAINPID=, READY=1) and so needs NotifyAccess=all;
	// the bpffs is mounted outside the sandbox before every start.
	for k, want := range map[string]string{
		"ExecReload":   "/usr/bin/xlb reload --pid $MAINPID --pass-environment",
		"NotifyAccess": "all",
		"ExecStartPre": "+/usr/bin/xlb mount-bpffs --config /etc/xlb/xlb.yaml",
	} {
		if got := one(k); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	// `xlb reload` waits up to 80 s; systemd kills ExecReload after
	// TimeoutStartSec.
	if start, err := time.ParseDuration(one("TimeoutStartSec")); err != nil || start <= 80*time.Second {
		t.Errorf("TimeoutStartSec=%s: want a duration above xlb reload's 80 s", one("TimeoutStartSec"))
	}
	if stop := one("TimeoutStopSec"); stop != "45s" {
		t.Errorf("TimeoutStopSec=%s; the test expects 45s (15 s default shutdown_timeout + margin)", stop)
	}
	if one("WatchdogSec") == "" {
		t.Error("no WatchdogSec")
	}
}
