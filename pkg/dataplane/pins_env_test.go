package dataplane

import (
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// testStateDir is a state_dir on a private BPF filesystem
// (testnet.StateDir).
func testStateDir(t testing.TB) string { return testnet.StateDir(t) }

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
