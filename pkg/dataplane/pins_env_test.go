package dataplane

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// testStateDir mounts a private BPF filesystem on a directory of
// t.TempDir() (never /sys/fs/bpf), unmounted when the test ends, and
// returns a state_dir inside it that does not exist yet.
func testStateDir(t testing.TB) string {
	t.Helper()
	testnet.RequireRoot(t)
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

// testCookie is the calling thread's network namespace cookie.
func testCookie(t testing.TB) uint64 {
	t.Helper()
	c, err := hostnet.NetnsCookie()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testVethNS is a new anonymous network namespace holding the veth pair
// pv0/pv1, closed when the test ends.
func testVethNS(t testing.TB) netns.NsHandle {
	t.Helper()
	ns, err := testnet.NewAnon()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	err = testnet.In(ns, func() error {
		h, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		_, err = testnet.AddVeth(testnet.VethEnd{Netlink: h, Name: "pv0"}, testnet.VethEnd{Name: "pv1"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// Exported for the external tests (package dataplane_test).
var (
	TestStateDir = testStateDir
	TestCookie   = testCookie
	TestVethNS   = testVethNS
)
