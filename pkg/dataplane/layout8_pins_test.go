package dataplane

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane/pins"
)

// Pins of layout 8 (issue 36, commit d3e22cc), for the migration tests:
// this build's state maps without the services' maps (xlb_services,
// xlb_listen, xlb_rr), with layout 8's config (config8: one listen
// address, its ports and active set), routable sets (backendSet8, two
// slots) and shared state (state8, with the round-robin position), and
// flow values without member and service ids (pad2 zero).

// reshapeLayout8 shapes this build's spec ms of map name as layout 8 had
// it (layout 9's shape first: reshapeLayout9): false for a map layout 9
// or 10 added. The older layouts' map makers apply it before their own
// shapes.
func reshapeLayout8(name string, ms *ebpf.MapSpec) bool {
	if !reshapeLayout9(name, ms) {
		return false
	}
	switch name {
	case xlbMapXlbServices, xlbMapXlbListen, xlbMapXlbRr:
		return false // new in layout 9
	case xlbMapXlbCfg:
		ms.ValueSize = uint32(config8Size)
	case xlbMapXlbBackendSets:
		ms.ValueSize, ms.MaxEntries = uint32(unsafe.Sizeof(backendSet8{})), 2
	case xlbMapXlbShared:
		ms.ValueSize = uint32(unsafe.Sizeof(state8{}))
	case xlbMapXlbPairEvents:
		ms.MaxEntries = MaxBackends * pins.PairEvents8
	}
	return true
}

// DowngradeToLayout8 rewrites the pins under dir, which a data path of
// this build pinned and released with one service (id 0, its member ids
// its backend ids), into what the issue-36 build of d3e22cc (layout 8)
// pins for the same state: flow values without member and service ids,
// the config of service 0's address, ports and active set, its two
// routable sets, 4 pair events per backend id (closures by kind only), the shared state with service 0's round-robin position,
// no xlb_services, xlb_listen or xlb_rr (new maps pinned in place of the
// changed ones) and a metadata record of layout 8. For the external
// tests. It starts with DowngradeToLayout9.
func DowngradeToLayout8(t testing.TB, dir string) {
	t.Helper()
	DowngradeToLayout9(t, dir)
	open := func(name string) *ebpf.Map {
		t.Helper()
		m, err := ebpf.LoadPinnedMap(mapPath(dir, name), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	repin := func(name string, m *ebpf.Map) {
		t.Helper()
		if err := os.Remove(mapPath(dir, name)); err != nil {
			t.Fatal(err)
		}
		if err := m.Pin(mapPath(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	old := stateMapsShaped(t, func(name string, ms *ebpf.MapSpec) bool {
		switch name {
		case xlbMapXlbCfg, xlbMapXlbBackendSets, xlbMapXlbShared, xlbMapXlbPairEvents:
			return reshapeLayout8(name, ms)
		}
		return false
	})

	flows := open(xlbMapXlbFlows)
	r, err := dumpMap(flows, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Len() {
		var v FlowValue
		decodeFlowValue(r.Value(i, 0), &v)
		if v.ServiceId != 0 || v.MemberId != v.BackendId {
			t.Fatalf("flow %x: service %d, member %d of backend id %d: layout 8 had one service, member ids its backend ids", r.Key(i), v.ServiceId, v.MemberId, v.BackendId)
		}
		v.MemberId = 0
		if err := flows.Update(r.Key(i), toBytes(&v), ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}

	var cfg xlbXlbConfig
	if err := open(xlbMapXlbCfg).Lookup(uint32(0), &cfg); err != nil {
		t.Fatal(err)
	}
	var rawSvc []byte // layout 9 and 10's record (DowngradeToLayout10): this build's without its last 8 bytes
	if err := open(xlbMapXlbServices).Lookup(uint32(0), &rawSvc); err != nil {
		t.Fatal(err)
	}
	svc, err := fromBytes[xlbService](append(rawSvc, make([]byte, 8)...))
	if err != nil {
		t.Fatal(err)
	}
	c := config8{ListenIpBe: be32(recordAddr(&svc)), SnatPortLo: cfg.SnatPortLo, SnatPortHi: cfg.SnatPortHi, Nports: uint32(svc.Nports),
		Flags: cfg.Flags, ActiveSet: uint32(svc.ActiveSet), Nsnat: cfg.Nsnat, SnatWords: cfg.SnatWords,
		SnatIpsBe: cfg.SnatIpsBe, SnatReuseTicks: cfg.SnatReuseTicks, Nretired: cfg.Nretired}
	var err2 error
	if c.Ports, err2 = fromBytes[[MaxPorts]pins.PortMap](toBytes(&svc.Ports)); err2 != nil {
		t.Fatal(err2)
	}
	if c.Retired, err2 = fromBytes[[MaxRetiredSNAT]pins.SNATRetired](toBytes(&cfg.Retired)); err2 != nil {
		t.Fatal(err2)
	}
	if err := old[xlbMapXlbCfg].Update(uint32(0), toBytes(&c), ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	repin(xlbMapXlbCfg, old[xlbMapXlbCfg])

	sets := open(xlbMapXlbBackendSets)
	for slot := range uint32(2) {
		var s xlbBackendSet
		if err := sets.Lookup(slot, &s); err != nil {
			t.Fatal(err)
		}
		o := backendSet8{Count: s.Count, Pad: s.Pad}
		for i, e := range s.Entries {
			o.Entries[i] = backendRef8{IpBe: e.IpBe, Id: e.Id, PortBe: e.PortBe}
		}
		if err := old[xlbMapXlbBackendSets].Update(slot, toBytes(&o), ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}
	repin(xlbMapXlbBackendSets, old[xlbMapXlbBackendSets])

	var st xlbXlbState
	if err := open(xlbMapXlbShared).Lookup(uint32(0), &st); err != nil {
		t.Fatal(err)
	}
	var rr uint64
	if err := open(xlbMapXlbRr).Lookup(uint32(0), &rr); err != nil {
		t.Fatal(err)
	}
	s8 := state8{Rr: rr, Generation: st.Generation, ClockJiffies: st.ClockJiffies, ClockNs: st.ClockNs}
	if err := old[xlbMapXlbShared].Update(uint32(0), toBytes(&s8), ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	repin(xlbMapXlbShared, old[xlbMapXlbShared])

	// pair events: 4 per backend id, the closures not split by initiator
	events := open(xlbMapXlbPairEvents)
	pairEvents := uint32(xlbXlbLimitsXLB_PAIR_EVENTS)
	for b := range MaxBackends {
		for e := range uint32(pins.PairEvents8) {
			var cell []uint64
			if err := events.Lookup(b*pairEvents+e, &cell); err != nil {
				t.Fatal(err)
			}
			if e <= uint32(xlbXlbPairEventXLB_PAIR_CLOSED_RST) { // the backend's closures of the same kind join the client's
				var byBackend []uint64
				if err := events.Lookup(b*pairEvents+e+uint32(xlbXlbPairEventXLB_PAIR_CLOSED_FIN_BACKEND), &byBackend); err != nil {
					t.Fatal(err)
				}
				for cpu := range cell {
					cell[cpu] += byBackend[cpu]
				}
			}
			if err := old[xlbMapXlbPairEvents].Update(b*pins.PairEvents8+e, cell, ebpf.UpdateExist); err != nil {
				t.Fatal(err)
			}
		}
	}
	repin(xlbMapXlbPairEvents, old[xlbMapXlbPairEvents])

	for _, name := range []string{xlbMapXlbServices, xlbMapXlbListen, xlbMapXlbRr} {
		if err := os.Remove(mapPath(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	setPinnedLayout(t, dir, 8)
}
