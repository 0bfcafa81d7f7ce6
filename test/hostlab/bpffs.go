package hostlab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// bpffsName is the directory, inside a container's run directory, where a
// bpffs of its own is mounted and bound to the container's /sys/fs/bpf.
const bpffsName = "bpffs"

// containerBPFFS is where the container sees its bpffs: the parent of XLB's
// default state_dir (/sys/fs/bpf/xlb).
const containerBPFFS = "/sys/fs/bpf"

// mountBPFFS creates dir and mounts a fresh bpffs on it (mode 0700). Each
// mount of type bpf is a new instance: what one container pins is
// invisible to every other container and to the host, and goes away with
// the mount.
func mountBPFFS(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("hostlab: bpffs: %w", err)
	}
	if err := unix.Mount("bpf", dir, "bpf", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700"); err != nil {
		return fmt.Errorf("hostlab: mount bpffs on %s: %w", dir, err)
	}
	return nil
}

// unmountBPFFS detaches the bpffs mounted on dir (every stacked mount),
// when there is one. The pins in it, and the maps and links only they
// held, go with it.
func unmountBPFFS(dir string) error {
	for i := 0; i < 8; i++ {
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("hostlab: unmount %s: %w", m, err)
			}
		}
	}
	return fmt.Errorf("hostlab: %s stays mounted", dir)
}

// bpffsOf is the bpffs directory of a run directory.
func bpffsOf(runDir string) string { return filepath.Join(runDir, bpffsName) }
