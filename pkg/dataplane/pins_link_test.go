package dataplane_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/pkg/sched"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// A successor takes an interface over by swapping the program of the
// pinned bpf_link (link.Update): the same link, a new program, and the
// interface never without one. Close then detaches it and removes the pins.
func TestPinnedLinkUpdate(t *testing.T) {
	l := newPinLab(t)
	first, a1 := l.attachedTo(t, "pv", 64)
	if a1.Via != dataplane.PathBPFLink || a1.Adopted {
		t.Fatalf("first attach: %+v, want a new bpf_link", *a1)
	}
	if err := first.Pin(dataplane.PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	linkID := l.linkID(t, "pv0")
	if linkID == 0 {
		t.Fatal("no link pinned for pv0")
	}
	stop := l.watchXDP(t, "pv0")
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if id := l.xdpOn(t, "pv0"); id != a1.ProgID {
		t.Fatalf("after Release: program %d on pv0, want %d", id, a1.ProgID)
	}
	next := l.mustLoad(t, 64)
	if id := l.xdpOn(t, "pv0"); id != a1.ProgID {
		t.Fatalf("after the successor's Load: program %d on pv0, want %d", id, a1.ProgID)
	}
	l.configure(t, next)
	a2 := l.attach(t, next, "pv0")
	if !a2.Adopted || a2.Via != dataplane.PathBPFLink || a2.ProgID == a1.ProgID || a2.ProgID == 0 {
		t.Errorf("successor attach: %+v, want the pinned link adopted with a new program", *a2)
	}
	if id := l.xdpOn(t, "pv0"); id != a2.ProgID {
		t.Errorf("after the update: program %d on pv0, want %d", id, a2.ProgID)
	}
	if err := next.Pin(dataplane.PinMeta{OwnerPID: 2}); err != nil {
		t.Fatal(err)
	}
	if id := l.linkID(t, "pv0"); id != linkID {
		t.Errorf("pinned link %d after the hand-off, want the same link %d", id, linkID)
	}
	if gaps := stop(); gaps != 0 {
		t.Errorf("pv0 had no XDP program %d times during the hand-off", gaps)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
	if id := l.xdpOn(t, "pv0"); id != 0 {
		t.Errorf("after Close: program %d on pv0, want none", id)
	}
	if _, err := os.Stat(l.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state_dir after Close: %v", err)
	}
}

// Pin detaches and unpins the links of interfaces the new process did not
// attach (gone from its config), and leaves the others. Interface names
// with a dot (which a bpffs refuses) are pinned escaped.
func TestPinDropsUnconfiguredLinks(t *testing.T) {
	l := newPinLab(t)
	l.addVeth(t, "pv")
	l.addVeth(t, "q.v")
	first := l.mustLoad(t, 64)
	l.configure(t, first)
	l.attach(t, first, "pv0")
	l.attach(t, first, "q.v0")
	if err := first.Pin(dataplane.PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	first.Release()
	next := l.mustLoad(t, 64)
	l.configure(t, next)
	a := l.attach(t, next, "pv0")
	if id := l.xdpOn(t, "q.v0"); id == 0 {
		t.Fatal("q.v0 lost its program before Pin")
	}
	if err := next.Pin(dataplane.PinMeta{OwnerPID: 2}); err != nil {
		t.Fatal(err)
	}
	if id := l.xdpOn(t, "q.v0"); id != 0 {
		t.Errorf("q.v0 after Pin: program %d, want none", id)
	}
	if _, err := os.Stat(filepath.Join(l.dir, "links", "q%2Ev0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("q.v0's link pin after Pin: %v", err)
	}
	if id := l.xdpOn(t, "pv0"); id != a.ProgID {
		t.Errorf("pv0 after Pin: program %d, want %d", id, a.ProgID)
	}
}

// After a failed hand-off the old process takes the interface and the
// config back: its program on the link again, its settings in the config
// map (the successor had written its own).
func TestReclaim(t *testing.T) {
	l := newPinLab(t)
	old, a1 := l.attachedTo(t, "pv", 64)
	if err := old.Pin(dataplane.PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	successor := l.mustLoad(t, 64)
	other := l.e.Settings
	other = other.WithPorts([]dataplane.PortMap{{Local: 80, Remote: 9090}})
	if _, err := successor.Configure(other); err != nil {
		t.Fatal(err)
	}
	a2 := l.attach(t, successor, "pv0")
	l.open(t, old, 0, 1) // the old program reads the shared config: 9090
	if p := flows(t, old)[dt.ForwardKey(dt.Client(34000), 80)]; p.NewDst().Port() != 9090 {
		t.Fatalf("the successor's config is not in the shared map (backend port %d)", p.NewDst().Port())
	}
	if err := successor.Release(); err != nil { // it failed
		t.Fatal(err)
	}
	if id := l.xdpOn(t, "pv0"); id != a2.ProgID {
		t.Fatalf("after the successor's release: program %d, want its %d (still attached)", id, a2.ProgID)
	}
	if err := l.e.Do(old.Reclaim); err != nil {
		t.Fatal(err)
	}
	if id := l.xdpOn(t, "pv0"); id != a1.ProgID {
		t.Errorf("after Reclaim: program %d on pv0, want the old %d", id, a1.ProgID)
	}
	l.open(t, old, 1, 1)
	if p := flows(t, old)[dt.ForwardKey(dt.Client(34001), 80)]; p.NewDst().Port() != 8080 {
		t.Errorf("after Reclaim: a new pair goes to port %d, want the old config's 8080", p.NewDst().Port())
	}
	if ok, failed, err := old.HotUpgrades(); err != nil || ok != 0 || failed != 0 {
		t.Errorf("hot upgrades %d/%d %v", ok, failed, err)
	}
	if err := old.CountHotUpgrade(false); err != nil {
		t.Fatal(err)
	}
	if _, failed, _ := old.HotUpgrades(); failed != 1 {
		t.Errorf("failed hot upgrades %d, want 1", failed)
	}
}

// During a migration the predecessor's program runs on its own maps until
// the successor's replaces it: pairs it opens and closes meanwhile are
// copied again when Attach swaps the program, and Pin then replaces the
// flow map's pin with the new map.
func TestMigrationCatchesUp(t *testing.T) {
	l := newPinLab(t)
	old, _ := l.attachedTo(t, "pv", 64)
	l.open(t, old, 0, 2)
	if err := old.Pin(dataplane.PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	next := l.mustLoad(t, 128)
	if ad := next.Adoption(); ad.Start != api.StartMigrated || ad.Pairs != 2 {
		t.Fatalf("adoption %+v", ad)
	}
	// The old program, still attached, opens a pair and resets another.
	l.open(t, old, 2, 1)
	l.run(t, old, l.e.FromClient(dt.Client(34000), 80, dt.RST|dt.ACK, 1001, 1, nil), dt.XDPTX)
	l.configure(t, next)
	if a := l.attach(t, next, "pv0"); !a.Adopted {
		t.Fatalf("attach: %+v, want the pinned link adopted", *a)
	}
	got := flows(t, next)
	if len(got) != 6 {
		t.Errorf("%d flow entries after the swap, want 6 (3 pairs)", len(got))
	}
	if f := got[dt.ForwardKey(dt.Client(34000), 80)].Flags; f&dataplane.FlagClosedRST == 0 {
		t.Errorf("the pair the old program reset: flags %#x, want closed by RST", f)
	}
	if _, ok := got[dt.ForwardKey(dt.Client(34002), 80)]; !ok {
		t.Error("the pair the old program opened after Load is missing")
	}
	if err := next.Pin(dataplane.PinMeta{OwnerPID: 2}); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(l.dir, "maps", "xlb_flows"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.MaxEntries() != 256 {
		t.Errorf("pinned flow map of %d entries after Pin, want the new 256", m.MaxEntries())
	}
	if _, err := os.Stat(filepath.Join(l.dir, "staging")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging left behind: %v", err)
	}
}

// Linux capability numbers (linux/capability.h) the unit grants.
const (
	capNetAdmin = 12
	capBPF      = 39
)

// The whole pinned life cycle -- pin, adopt with link.Update, migrate,
// count hand-offs, close -- works with the unit's capabilities alone
// (CAP_BPF and CAP_NET_ADMIN; systemd/xlb.service), once the bpffs is
// mounted (ExecStartPre does that with full privileges). Capabilities are
// per thread: the test drops them on a locked thread, already in the
// namespace, that dies with its goroutine.
func TestPinningWithUnitCapabilities(t *testing.T) {
	dir := dataplane.TestStateDir(t)
	ns := dataplane.TestVethNS(t)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective, data[1].Effective = 1<<capNetAdmin, 1<<(capBPF-32)
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		errc <- pinnedLifeCycle(dir)
	}()
	if err := <-errc; err != nil {
		t.Fatalf("with CAP_BPF and CAP_NET_ADMIN only: %v", err)
	}
}

// pinnedLifeCycle runs three processes' worth of a data path on pv0:
// fresh, adopted, migrated, then stops.
func pinnedLifeCycle(dir string) error {
	cookie, err := hostnet.NetnsCookie()
	if err != nil {
		return err
	}
	for i, want := range []api.Start{api.StartFresh, api.StartAdopted, api.StartMigrated} {
		maxConn := uint32(64)
		if want == api.StartMigrated {
			maxConn = 128
		}
		dp, err := dataplane.Load(dataplane.Options{SNAT: dt.SNATSpace, MaxConnections: maxConn, StateDir: dir, NetnsCookie: cookie})
		if err != nil {
			return err
		}
		if f := dp.Features().Get(dataplane.FeaturePinning); f.State != dataplane.StateAvailable {
			return fmt.Errorf("load %d: pinning %v", i, f)
		}
		if ad := dp.Adoption(); ad.Start != want {
			return fmt.Errorf("load %d: %s, want %s", i, ad.Start, want)
		}
		a, err := dp.Attach("pv0", dataplane.ModeAuto)
		if err != nil {
			return err
		}
		if a.Adopted != (i > 0) || a.Via != dataplane.PathBPFLink {
			return fmt.Errorf("load %d: attachment %+v", i, *a)
		}
		if err := lifeCycleSchedule(dp, i); err != nil {
			return fmt.Errorf("load %d: %w", i, err)
		}
		if err := dp.Pin(dataplane.PinMeta{OwnerPID: uint32(i)}); err != nil {
			return err
		}
		if err := dp.CountHotUpgrade(true); err != nil {
			return err
		}
		if ok, _, err := dp.HotUpgrades(); err != nil || ok != uint64(i+1) {
			return fmt.Errorf("load %d: hot upgrades %d (%v)", i, ok, err)
		}
		if i < 2 {
			err = dp.Release()
		} else {
			err = dp.Close()
		}
		if err != nil {
			return err
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state_dir after Close: %v", err)
	}
	return nil
}

// lifeCycleSchedule is pinnedLifeCycle's Maglev service: the table the
// i-th process finds (none for the first; each successor reads its
// predecessor's through xlb_sched_read, with no CAP_SYS_ADMIN to open the
// inner map by id), then its own first set's, which continues the count.
func lifeCycleSchedule(dp *dataplane.Dataplane, i int) error {
	listen := netip.MustParseAddr("192.0.2.10")
	svcs := dataplane.OneService(listen, []dataplane.PortMap{{Local: 80, Remote: 8080}})
	svcs[0].Scheduler, svcs[0].MaglevHash, svcs[0].TableSize = dataplane.SchedulerMaglev, dataplane.MaglevHashClientIP, sched.MinMaglevSize
	if i > 0 {
		if sc, ok := dp.Schedule(0); !ok || sc.Rebuilds != uint64(i) || sc.Len != sched.MinMaglevSize || sc.Hash != dataplane.MaglevHashClientIP || len(sc.Slots) != 3 {
			return fmt.Errorf("the predecessor's schedule: %+v (%v), want %d rebuilds of a %d-entry client_ip table over 3 members", sc, ok, i, sched.MinMaglevSize)
		}
	}
	settings := dataplane.Settings{SNAT: []netip.Addr{listen}, SNATPortLo: dt.SNATSpace.PortLo, SNATPortHi: dt.SNATSpace.PortHi, Services: svcs}
	if _, err := dp.Configure(settings); err != nil {
		return err
	}
	var refs []dataplane.BackendRef
	for b := range 3 {
		refs = append(refs, dataplane.BackendRef{ID: uint32(b), Member: uint32(b), IP: netip.AddrFrom4([4]byte{192, 0, 2, byte(21 + b)}),
			Name: fmt.Sprintf("backend-%d", b), Weight: uint16(1 + b)})
	}
	if err := dp.SetRoutable(0, refs); err != nil {
		return err
	}
	if sc, ok := dp.Schedule(0); !ok || sc.Rebuilds != uint64(i+1) {
		return fmt.Errorf("the schedule after SetRoutable: %+v (%v), want rebuild %d", sc, ok, i+1)
	}
	return nil
}
