package dataplane

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/sched"
)

// A migration to a later layout keeps the schedules: xlb_sched's slots in
// the new map refer to the very inner maps the pinned one holds (their
// values are references, not copied entry by entry), in the first copy
// and in the refresh of the maps only userspace writes; a slot the pinned
// map no longer holds is emptied.
func TestInnerMapsCopied(t *testing.T) {
	dir := testStateDir(t)
	old, err := Load(Options{SNAT: migrateSNAT, MaxConnections: 64, StateDir: dir, NetnsCookie: testCookie(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	listen := netip.MustParseAddr("192.0.2.10")
	svcs := OneService(listen, []PortMap{{Local: 80, Remote: 8080}})
	svcs[0].Scheduler, svcs[0].TableSize = SchedulerMaglev, sched.MinMaglevSize
	if _, err := old.Configure(Settings{SNAT: []netip.Addr{listen}, SNATPortLo: migrateSNAT.PortLo, SNATPortHi: migrateSNAT.PortHi, Services: svcs}); err != nil {
		t.Fatal(err)
	}
	refs := []BackendRef{{ID: 3, Member: 3, IP: netip.MustParseAddr("192.0.2.33"), Name: "a", Weight: 1},
		{ID: 7, Member: 7, IP: netip.MustParseAddr("192.0.2.37"), Name: "b", Weight: 2}}
	for _, set := range [][]BackendRef{refs[:1], refs} { // both slots hold a schedule
		if err := old.SetRoutable(0, set); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Pin(PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	pins, err := readPins(dir, testCookie(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pins.Close()
	src := map[string]*ebpf.Map{}
	for name := range pins.Maps {
		src[name] = pins.Take(name)
	}
	dst := nextLayoutMaps(t, 32, old.closeRing)
	mig, err := newMigration(nextLayout(), pins.Meta.LayoutVersion, src, dst, true, migrationHost{})
	if err != nil {
		t.Fatal(err)
	}
	defer mig.Close()
	if err := mig.CopyAll(); err != nil {
		t.Fatal(err)
	}
	slots := func(m *ebpf.Map) (ids [2]uint32) {
		t.Helper()
		for i := range ids {
			if err := m.Lookup(uint32(i), &ids[i]); err != nil {
				t.Fatalf("slot %d: %v", i, err)
			}
		}
		return ids
	}
	want := slots(src[xlbMapXlbSched])
	if want[0] == 0 || want[1] == 0 {
		t.Fatalf("the pinned xlb_sched holds %v: want both of service 0's slots", want)
	}
	if got := slots(dst[xlbMapXlbSched]); got != want {
		t.Fatalf("xlb_sched after the first copy refers to inner maps %v, want %v", got, want)
	}

	// the old process publishes again (the slot it writes gets a new
	// schedule), then service 0 turns round robin (both dropped): the
	// refresh follows each time
	if err := old.SetRoutable(0, refs[1:]); err != nil {
		t.Fatal(err)
	}
	if err := mig.Refresh(); err != nil {
		t.Fatal(err)
	}
	now := slots(src[xlbMapXlbSched])
	if now == want {
		t.Fatalf("SetRoutable left the schedules as they were: %v", now)
	}
	if got := slots(dst[xlbMapXlbSched]); got != now {
		t.Fatalf("xlb_sched after the refresh refers to %v, want %v", got, now)
	}
	svcs[0].Scheduler, svcs[0].TableSize = SchedulerRoundRobin, 0
	if _, err := old.Configure(Settings{SNAT: []netip.Addr{listen}, SNATPortLo: migrateSNAT.PortLo, SNATPortHi: migrateSNAT.PortHi, Services: svcs}); err != nil {
		t.Fatal(err)
	}
	if err := mig.Refresh(); err != nil {
		t.Fatal(err)
	}
	var id uint32
	for i := range uint32(2) {
		if err := dst[xlbMapXlbSched].Lookup(i, &id); err == nil && id != 0 {
			t.Fatalf("slot %d after the refresh of a round robin service refers to inner map %d", i, id)
		}
	}
}
