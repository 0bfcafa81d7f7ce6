package dataplane_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// asLayout2 is every flow entry of dp as layout 2 stored it: the recipe
// and pair state, and the interface and MACs of the slot it names.
func asLayout2(t *testing.T, dp *dataplane.Dataplane) []dataplane.Layout2Entry {
	t.Helper()
	var out []dataplane.Layout2Entry
	for k, v := range flows(t, dp) {
		h, err := dp.NextHop(v.Nexthop)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, dataplane.Layout2Entry{Key: k, Value: v, Hop: h})
	}
	return out
}

// takenPortsOf is the SNAT ports dp's bitmap holds toward each backend id
// of refs (SNAT address 0).
func takenPortsOf(t *testing.T, dp *dataplane.Dataplane, refs []dataplane.BackendRef) map[uint32][]uint16 {
	t.Helper()
	out := map[uint32][]uint16{}
	for _, r := range refs {
		p, err := dp.FixtureTakenSNATPorts(r.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[r.ID] = p
	}
	return out
}

// pairPorts is the SNAT port of every pair of dp, by backend id.
func pairPorts(t *testing.T, dp *dataplane.Dataplane) map[uint32][]uint16 {
	t.Helper()
	out := map[uint32][]uint16{}
	for k, v := range flows(t, dp) {
		if k.Direction() == dataplane.DirClient {
			out[uint32(v.BackendId)] = append(out[uint32(v.BackendId)], v.NewSrc().Port())
		}
	}
	for id := range out {
		slices.Sort(out[id])
	}
	return out
}

// A hot upgrade from release 84dceb3 (layout 2): a start that finds its
// pins migrates them (Adoption), each pair keeps forwarding both ways with
// the MACs it had, through the next hop of the neighbour the host's table
// names, as an established pair of unknown window scale; the SNAT port
// bitmap holds every pair's port, so a new pair gets another one; Pin
// leaves pins of this layout.
func TestHotUpgradeFromLayout2(t *testing.T) {
	l := newPinLab(t)
	const pairs = 5
	old := l.running(t, pairs)
	entries := asLayout2(t, old)
	ports := pairPorts(t, old)
	if err := old.Release(); err != nil {
		t.Fatal(err)
	}
	dataplane.PinLayout2(t, l.dir, l.cookie, 64, l.e.Settings, l.refs, entries)

	dp := l.migrated(t, 2, pairs)
	if got := takenPortsOf(t, dp, l.refs); !samePorts(got, ports) {
		t.Errorf("taken SNAT ports after the migration: %v, want %v", got, ports)
	}
	for i := range pairs {
		c := dt.Client(uint16(34000 + i))
		fwd, ok := flows(t, dp)[dt.ForwardKey(c, 80)]
		if !ok {
			t.Fatalf("pair %d was not migrated", i)
		}
		if fwd.Flags&(dataplane.FlagSYNACK|dataplane.FlagEstablished) != dataplane.FlagSYNACK|dataplane.FlagEstablished || fwd.Wscale != dataplane.WScaleUnknown {
			t.Errorf("pair %d: flags %#x wscale %d, want established with an unknown window scale", i, fwd.Flags, fwd.Wscale)
		}
		backend := fwd.NewDst()
		wantNextHopOf(t, dp, fwd.Nexthop, l.e.BackendIface(), backend.Addr())
		data := l.data(i)
		l.forwards(t, dp, fmt.Sprintf("pair %d: client data", i), data, l.e.ToBackend(data, backend, fwd.NewSrc().Port()))
		reply := l.e.FromBackend(backend, fwd.NewSrc().Port(), dt.ACK, 1, 1006, nil)
		l.forwards(t, dp, fmt.Sprintf("pair %d: backend reply", i), reply, l.e.ToClient(reply, c, 80))
	}
	l.open(t, dp, pairs, 1)
	distinctPorts(t, dp)
	if err := dp.Pin(dataplane.PinMeta{OwnerPID: 3}); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(l.dir, "maps", "xlb_nexthops"), nil)
	if err != nil {
		t.Fatalf("the migrated pins have no next hops: %v", err)
	}
	m.Close()
}

// wantNextHopOf checks that slot id of dp holds the neighbour ip on ifc
// with the fixture's MACs, in one of the slots the hash names for it.
func wantNextHopOf(t *testing.T, dp *dataplane.Dataplane, id uint32, ifc dt.Iface, ip netip.Addr) {
	t.Helper()
	h, err := dp.NextHop(id)
	if err != nil {
		t.Fatal(err)
	}
	if h.Ifindex != ifc.Index || h.IP != ip || h.SrcMAC.String() != ifc.MAC.String() || h.DstMAC.String() != dt.MAC(ip).String() {
		t.Errorf("slot %d: %v, want ifindex %d via %s %s->%s", id, h, ifc.Index, ip, ifc.MAC, dt.MAC(ip))
	}
	if slots := dataplane.NextHopSlots(ifc.Index, ip); !slices.Contains(slots[:], id) {
		t.Errorf("slot %d is not among %v, the slots of %s on ifindex %d", id, slots, ip, ifc.Index)
	}
}

// A restart whose SNAT port range grew (a reload with a larger
// snat.port_range) adopts the pins but not the bitmap, which no longer
// fits: a new one of the new size holds every adopted pair's port in the
// new layout, and Pin pins it.
func TestAdoptWithAnotherSNATSpace(t *testing.T) {
	l := newPinLab(t)
	first := l.pinnedWith(t, 64, 6) // round robin: every backend
	ports := pairPorts(t, first)
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	wide := dt.SNATSpace
	wide.PortHi = wide.PortLo + 199
	var dp *dataplane.Dataplane
	err := l.e.Do(func() (err error) {
		dp, err = dataplane.Load(dataplane.Options{SNAT: wide, MaxConnections: 64, StateDir: l.dir, NetnsCookie: l.cookie})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Release() })
	if ad := dp.Adoption(); ad.Start != api.StartAdopted || ad.Pairs != 6 {
		t.Fatalf("adoption %+v, want adopted with 6 pairs", ad)
	}
	s := l.e.Settings
	s.SNATPortHi = wide.PortHi
	if _, err := dp.Configure(s); err != nil {
		t.Fatal(err)
	}
	if err := dp.SetRoutable(0, l.refs); err != nil {
		t.Fatal(err)
	}
	if got := takenPortsOf(t, dp, l.refs); !samePorts(got, ports) {
		t.Errorf("taken SNAT ports after Configure: %v, want %v", got, ports)
	}
	l.open(t, dp, 6, 6)
	distinctPorts(t, dp)
	if err := dp.Pin(dataplane.PinMeta{OwnerPID: 3}); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(l.dir, "maps", "xlb_snat_ports"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if want := dataplane.MaxBackends * 4; m.MaxEntries() != want {
		t.Errorf("pinned bitmap of %d words, want %d", m.MaxEntries(), want)
	}
	if got := takenPortsOf(t, dp, l.refs); !samePorts(got, pairPorts(t, dp)) {
		t.Errorf("taken SNAT ports after Pin: %v, want %v", got, pairPorts(t, dp))
	}
}

// distinctPorts checks that no two pairs of dp share a SNAT port toward
// a backend (a new pair never takes a taken port).
func distinctPorts(t *testing.T, dp *dataplane.Dataplane) {
	t.Helper()
	for id, ps := range pairPorts(t, dp) {
		if len(slices.Compact(slices.Clone(ps))) != len(ps) {
			t.Errorf("backend %d: two pairs share a SNAT port: %v", id, ps)
		}
	}
}

// samePorts reports whether a and b hold the same ports per backend id, a
// missing id and one without ports alike.
func samePorts(a, b map[uint32][]uint16) bool {
	for k := range b {
		if _, ok := a[k]; !ok && len(b[k]) > 0 {
			return false
		}
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
