package dataplane

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// A link created for a program of another expected attach type (a
// predecessor whose loader gave XDP programs none, cilium/cilium#44063)
// refuses link.Update with EINVAL: Attach loads the program once more with
// that attach type and the update goes through, in place.
func TestUpdateOtherAttachType(t *testing.T) {
	dir := testStateDir(t)
	ns := testVethNS(t)
	err := testnet.In(ns, func() error {
		cookie, err := hostnet.NetnsCookie()
		if err != nil {
			return err
		}
		opts := Options{SNAT: migrateSNAT, MaxConnections: 16, StateDir: dir, NetnsCookie: cookie}
		old, err := Load(opts)
		if err != nil {
			return err
		}
		// The predecessor's program has no expected attach type.
		none, err := old.altProgramLocked()
		if err != nil {
			return err
		}
		old.objs.XlbXdp, old.altProg = none, old.objs.XlbXdp
		if at := old.spec.Programs[xlbProgXlbXdp].AttachType; at != ebpf.AttachXDP {
			return fmt.Errorf("this build's XDP program has attach type %v, the test expects %v", at, ebpf.AttachXDP)
		}
		a1, err := old.Attach("pv0", ModeAuto)
		if err != nil {
			return err
		}
		if err := old.Pin(PinMeta{OwnerPID: 1}); err != nil {
			return err
		}
		if err := old.Release(); err != nil {
			return err
		}
		next, err := Load(opts)
		if err != nil {
			return err
		}
		defer next.Close()
		a2, err := next.Attach("pv0", ModeAuto)
		if err != nil {
			return err
		}
		if !a2.Adopted || next.altProg == nil || a2.prog != next.altProg || a2.ProgID == a1.ProgID {
			t.Errorf("attach over a link of the other attach type: %+v (alt %v), want the link updated with the program loaded with no attach type", *a2, next.altProg)
		}
		l, err := netlink.LinkByName("pv0")
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x == nil || x.ProgId != a2.ProgID {
			t.Errorf("pv0 runs %+v, want program %d", x, a2.ProgID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
