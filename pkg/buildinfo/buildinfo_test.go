package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

// Print follows prometheus/common/version's layout with this package's
// fields, so every Prometheus-style tool reads it alike.
func TestPrint(t *testing.T) {
	got := Print("xlb")
	first := "xlb, version " + Version + " (branch: " + Branch + ", revision: " + Revision + ")"
	if !strings.HasPrefix(got, first+"\n") {
		t.Errorf("first line of\n%s\nwant %s", got, first)
	}
	for _, want := range []string{"  go version:       " + runtime.Version(), "  platform:         " + runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(got, "\n"+want+"\n") {
			t.Errorf("%q missing from\n%s", want, got)
		}
	}
	if Revision == "" || Branch == "" || GoVersion == "" {
		t.Errorf("unset fields: revision %q branch %q goversion %q", Revision, Branch, GoVersion)
	}
}
