package hostlab

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestContainerBPFFS boots two containers at once and checks that each
// sees a bpffs of its own at /sys/fs/bpf: writable, not the host's, not
// the other's; and that Close unmounts it.
func TestContainerBPFFS(t *testing.T) {
	requireRoot(t)
	cleanupStale(t)
	root, _, err := EnsureRootfs(CacheDir(), DefaultSpec(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	var cs []*Container
	for _, name := range []string{"xlb-bpffs-a", "xlb-bpffs-b"} {
		c, err := Boot(Options{Rootfs: root, Name: name}, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	exec := func(c *Container, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := c.Exec(ctx, nil, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.Name, err, out)
		}
		return strings.TrimSpace(out)
	}
	for _, c := range cs {
		if fs := exec(c, "stat", "-f", "-c", "%T", containerBPFFS); fs != "bpf_fs" {
			t.Errorf("%s: %s is %q, want bpf_fs", c.Name, containerBPFFS, fs)
		}
		exec(c, "mkdir", containerBPFFS+"/"+c.Name)
	}
	// Each sees its own directory and not the other's (the kernel adds
	// maps.debug and progs.debug to every bpffs); the host sees neither.
	for i, c := range cs {
		other := cs[1-i].Name
		out := strings.Fields(exec(c, "ls", "-A", containerBPFFS))
		if !slices.Contains(out, c.Name) || slices.Contains(out, other) {
			t.Errorf("%s: %s holds %q, want %s and not %s", c.Name, containerBPFFS, out, c.Name, other)
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/bpf", c.Name)); err == nil {
			t.Errorf("the host's /sys/fs/bpf shows %s's directory", c.Name)
		}
	}
	dir := bpffsOf(cs[0].dir)
	if mounts, err := mountsUnder(dir); err != nil || len(mounts) != 1 {
		t.Fatalf("mounts at %s: %v %v, want one", dir, mounts, err)
	}
	if err := cs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if mounts, _ := mountsUnder(dir); len(mounts) != 0 {
		t.Errorf("after Close: still mounted: %v", mounts)
	}
	if _, err := os.Stat(cs[0].dir); err == nil {
		t.Errorf("after Close: %s still exists", cs[0].dir)
	}
}
