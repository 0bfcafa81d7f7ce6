package pkgtest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebChangelog: the .deb's changelog.Debian.gz parses as a Debian
// changelog whose newest entry is the package's version-release (Debian
// policy 4.4), with the unreleased changes of packaging/changelog.yml.
// The rpm's %changelog is checked in TestRPM.
func TestDebChangelog(t *testing.T) {
	need(t, "dpkg-deb", "dpkg-parsechangelog")
	root := extractDeb(t, packages(t))
	text := run(t, "gzip", "-dc", filepath.Join(root, "usr/share/doc/xlb/changelog.Debian.gz"))
	cmd := exec.Command("dpkg-parsechangelog", "-l", "-", "--show-field", "Version")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-parsechangelog: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), testVersion+"-1"; got != want {
		t.Errorf("newest changelog entry %q, want the package's %q:\n%s", got, want, text)
	}
	if !strings.HasPrefix(text, "xlb ("+testVersion+"-1) unstable; urgency=low\n") {
		t.Errorf("changelog header:\n%s", text)
	}
	if !strings.Contains(text, "deb-systemd-invoke") {
		t.Errorf("changelog lacks the unreleased changes:\n%s", text)
	}
}

// extractDeb unpacks the .deb's files into a temporary directory.
func extractDeb(t *testing.T, p Packages) string {
	t.Helper()
	root := t.TempDir()
	run(t, "dpkg-deb", "-x", p.Deb, root)
	return root
}
