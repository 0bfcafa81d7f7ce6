package dataplane_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// The first UDP service is a reload: a new process loads the SNAT
// bitmaps with their UDP half (SNATSpace.UDP), adopts the TCP-only pins
// (the pinned bitmap's size differs: rebuilt from the flow map, every
// TCP pair keeping its port), and balances the UDP service; its pins then
// hold the grown bitmap.
func TestAdoptAddsTheUDPHalf(t *testing.T) {
	l := newPinLab(t)
	first := l.pinnedWith(t, 64, 6)
	ports := pairPorts(t, first)
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	space := dt.SNATSpace
	space.UDP = true
	var dp *dataplane.Dataplane
	err := l.e.Do(func() (err error) {
		dp, err = dataplane.Load(dataplane.Options{SNAT: space, MaxConnections: 64, StateDir: l.dir, NetnsCookie: l.cookie})
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
	s.Services = append(slices.Clone(s.Services), dataplane.ServiceSettings{Name: "dns", Listen: dt.ListenIP,
		Proto: dataplane.ProtoUDP, UDPUnrepliedMax: 8, Ports: []dataplane.PortMap{{Local: 53, Remote: 5353}}})
	refs, err := dp.Configure(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if err := dp.SetRoutable(r.ID, l.refs); err != nil {
			t.Fatal(err)
		}
	}
	if got := takenPortsOf(t, dp, l.refs); !samePorts(got, ports) {
		t.Errorf("taken SNAT ports after Configure: %v, want %v", got, ports)
	}
	c := dt.Client(20000)
	in := l.e.UDPFromClient(c, 53, []byte("query"))
	l.run(t, dp, in, dt.XDPTX)
	if v, err := dp.LookupFlow(dt.UDPForwardKey(c, 53)); err != nil || v.Flags&dataplane.FlagUDP == 0 {
		t.Fatalf("UDP pair after the reload: %+v %v", v, err)
	}
	if err := dp.Pin(dataplane.PinMeta{OwnerPID: 3}); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(l.dir, "maps", "xlb_snat_ports"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	words := (uint32(dt.SNATSpace.PortHi) - uint32(dt.SNATSpace.PortLo) + 64) / 64
	if want := 2 * dataplane.MaxBackends * uint32(dt.SNATSpace.Addrs) * words; m.MaxEntries() != want {
		t.Errorf("pinned bitmap of %d words, want %d (both halves)", m.MaxEntries(), want)
	}
}
