package testnet

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// StateDir mounts a private BPF filesystem on a directory of t.TempDir()
// (never /sys/fs/bpf, which other tests and a host's xlb use), unmounted
// when the test ends, and returns a state_dir inside it that does not
// exist yet.
func StateDir(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	mnt := filepath.Join(t.TempDir(), "bpf")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("bpf", mnt, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mount a private bpffs on %s: %v", mnt, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return filepath.Join(mnt, "xlb")
}
