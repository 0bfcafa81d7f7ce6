package e2e

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/xlbproject/xlb/test/xlbproc"
)

// Hand-off tests run the binary at a path they own: the old process
// starts whatever is at its os.Executable() path, so a test renames
// another build over it before SIGUSR2, as a package upgrade does.

// Two release versions the status API tells apart.
const (
	versionA = "e2e-handoff-a"
	versionB = "e2e-handoff-b"
)

var versions struct {
	once sync.Once
	a, b string
	err  error
}

// versionBuilds returns two builds of cmd/xlb with buildinfo.Version
// versionA and versionB, made once per test run.
func versionBuilds(t testing.TB) (a, b string) {
	t.Helper()
	versions.once.Do(func() {
		versions.a, versions.err = xlbproc.BuildVersion(binDir, "xlb-a", versionA)
		if versions.err == nil {
			versions.b, versions.err = xlbproc.BuildVersion(binDir, "xlb-b", versionB)
		}
	})
	if versions.err != nil {
		t.Fatal(versions.err)
	}
	return versions.a, versions.b
}

// installBinary copies src to a path of the test's own and returns it.
func installBinary(t testing.TB, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "xlb")
	replaceBinary(t, path, src)
	return path
}

// replaceBinary renames a copy of src over path (atomically: the running
// process keeps its old file).
func replaceBinary(t testing.TB, path, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeBinary(t, path, data)
}

// failingBinary is a "new binary" that exits 1 at once.
const failingBinary = "#!/bin/sh\necho 'e2e: this build fails on purpose' >&2\nexit 1\n"

// writeBinary renames an executable file with content data over path.
func writeBinary(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
