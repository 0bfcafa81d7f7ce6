package pkgtest

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// flagRE finds a flag at the start of a line of `xlbctl --help`.
var flagRE = regexp.MustCompile(`(?m)^\s+--([a-z][a-z0-9.-]*)`)

// TestXlbctlManPage: xlbctl(1) describes every flag `xlbctl --help` lists
// (the packaged binary's), as an option of its own (".B \-\-flag" or
// ".BI \-\-flag ..."), so the page follows the command.
func TestXlbctlManPage(t *testing.T) {
	if !hasXlbctl(t) {
		t.Skip("no cmd/xlbctl in this tree")
	}
	need(t, "dpkg-deb")
	help, err := exec.Command(filepath.Join(extractDeb(t, packages(t)), "usr/bin/xlbctl"), "--help").Output()
	if err != nil {
		t.Fatalf("xlbctl --help: %v", err)
	}
	page := repoFile(t, "packaging/xlbctl.1")
	flags := flagRE.FindAllStringSubmatch(string(help), -1)
	if len(flags) < 5 {
		t.Fatalf("found %d flags in xlbctl --help:\n%s", len(flags), help)
	}
	for _, f := range flags {
		roff := `\-\-` + strings.ReplaceAll(f[1], "-", `\-`)
		if !strings.Contains(page, "\n.B "+roff+"\n") && !strings.Contains(page, "\n.BI "+roff+" ") {
			t.Errorf("packaging/xlbctl.1 has no option entry for --%s", f[1])
		}
	}
	for _, cmd := range []string{"status", "backends", "flows", "top", "drain", "undrain"} {
		if !strings.Contains(page, "\n.B "+cmd+"\n") {
			t.Errorf("packaging/xlbctl.1 has no entry for the command %s", cmd)
		}
	}
}
