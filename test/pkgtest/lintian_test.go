package pkgtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLintian runs lintian on the .deb: no error and no warning, and every
// override of packaging/lintian-overrides (installed where lintian reads
// a binary package's overrides, /usr/share/lintian/overrides/xlb) is
// used: lintian reports each one it applied as "O:" and an override that
// matched nothing as unused-override or mismatched-override.
func TestLintian(t *testing.T) {
	need(t, "lintian", "dpkg-deb")
	p := packages(t)
	var out strings.Builder
	// --fail-on none: lintian 2.116 exits 2 with --show-overrides when a
	// tag was overridden; the verdict comes from the E: and W: lines.
	cmd := exec.Command("lintian", "--display-info", "--show-overrides", "--fail-on", "none", p.Deb)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir()) // its scratch files go with the test
	err := cmd.Run()
	t.Logf("lintian %s:\n%s", filepath.Base(p.Deb), out.String())
	if err != nil {
		t.Fatalf("lintian: %v", err)
	}
	applied := map[string]bool{}
	for _, line := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "E: "), strings.HasPrefix(line, "W: "):
			t.Errorf("lintian: %s (fix it, or override it in packaging/lintian-overrides with the reason)", line)
		case strings.Contains(line, "unused-override"), strings.Contains(line, "mismatched-override"):
			t.Errorf("lintian: %s (remove or correct that line of packaging/lintian-overrides)", line)
		case strings.HasPrefix(line, "O: "):
			applied[strings.TrimPrefix(line, "O: ")] = true
		}
	}

	// The packaged overrides file is the repository's, and each of its
	// overrides was applied.
	installed := readFile(t, filepath.Join(extractDeb(t, p), "usr/share/lintian/overrides/xlb"))
	if installed != repoFile(t, "packaging/lintian-overrides") {
		t.Error("/usr/share/lintian/overrides/xlb differs from packaging/lintian-overrides")
	}
	sc := bufio.NewScanner(strings.NewReader(installed))
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		if !applied[line] {
			t.Errorf("override %q was not applied by lintian", line)
		}
	}
	if n == 0 {
		t.Error("packaging/lintian-overrides holds no override")
	}
}
