package dataplane_test

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// A Linux bridge has no native XDP support: auto must fall back to generic
// and say why, native must fail, generic must work.
func TestAttachModes(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	err := e.Do(func() error {
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "xbr0"}}); err != nil {
			return err
		}
		br, err := netlink.LinkByName("xbr0")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(br); err != nil {
			return err
		}
		if _, err := e.DP.Attach("xbr0", dataplane.ModeNative); err == nil {
			t.Error("native attach to a bridge succeeded, want an error")
		}
		a, err := e.DP.Attach("xbr0", dataplane.ModeAuto)
		if err != nil {
			return err
		}
		if a.Mode != dataplane.ModeGeneric || a.Fallback == nil {
			t.Errorf("auto attach: mode %s fallback %v, want generic with the native error", a.Mode, a.Fallback)
		}
		if err := e.DP.Detach("xbr0"); err != nil {
			return err
		}
		a, err = e.DP.Attach("xbr0", dataplane.ModeGeneric)
		if err != nil {
			return err
		}
		if a.Mode != dataplane.ModeGeneric || a.Fallback != nil {
			t.Errorf("generic attach: %+v", a)
		}
		if _, err := e.DP.Attach("nosuch0", dataplane.ModeAuto); err == nil {
			t.Error("attach to a missing interface succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// With RandomSNATCursors, a fresh data path does not start every backend
// at the bottom of the SNAT range (a restarted daemon would reuse its
// predecessor's ports first).
func TestRandomSNATCursors(t *testing.T) {
	testnet.RequireRoot(t)
	starts := map[uint32]bool{}
	for i := 0; i < 3; i++ {
		dp, err := dataplane.Load(dataplane.Options{SNAT: dt.SNATSpace, MaxConnections: 16, RandomSNATCursors: true})
		if err != nil {
			t.Fatal(err)
		}
		var v uint32
		if err := dp.SNATCursorMap().Lookup(uint32(0), &v); err != nil {
			t.Fatal(err)
		}
		starts[v] = true
		dp.Close()
	}
	if len(starts) < 2 {
		t.Fatalf("three loads started backend 0's cursor at %v", starts)
	}
}
