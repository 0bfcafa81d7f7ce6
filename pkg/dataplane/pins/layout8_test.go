package pins

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

// Layout 8's flow value keeps its bytes in layout 9 but for pad2, which
// becomes the member id (the backend id: layout 8's one service's
// member) and service 0.
func TestLayout8Flows(t *testing.T) {
	o := xlbFlowValue{SaddrBe: 1, DaddrBe: 2, SportBe: 3, DportBe: 4, CsumIp: 5, CsumL4: 6, Generation: 8,
		Flags: 9, Nexthop: 7, LastSeen: 10, TrackSeq: 11, TrackWin: 12, BackendId: 13, Wscale: 14, SynUs: 15, TsOff: 16}
	out, err := flowFrom8(nil, ToBytes(&o))
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromBytes[xlbFlowValue](out)
	if err != nil {
		t.Fatal(err)
	}
	want := o
	want.MemberId = 13
	if got != want {
		t.Errorf("layout 9 value %+v, want %+v", got, want)
	}
	if _, err := flowFrom8(nil, make([]byte, FlowValue7Size)); err == nil {
		t.Error("a layout 7 value was converted as a layout 8 one")
	}
}

// Layout 8's config becomes layout 9's (the SNAT fields and flags, the
// prefilter bit of the listen address) and service 0's record (serving,
// migrated, unnamed, the address, TCP, the ports and the active set);
// a config never written (no address) makes no service.
func TestLayout8Config(t *testing.T) {
	c := Config8{ListenIpBe: binary.NativeEndian.Uint32([]byte{192, 0, 2, 10}), SnatPortLo: 40000, SnatPortHi: 40999, Nports: 2,
		Flags: 1, ActiveSet: 1, Nsnat: 2, SnatWords: 16, SnatReuseTicks: 250, Nretired: 1}
	c.Ports[0] = PortMap{LocalPortBe: 0x5000, RemotePortBe: 0x901f}
	c.Ports[1] = PortMap{LocalPortBe: 0xbb01}
	c.SnatIpsBe[0], c.SnatIpsBe[1] = 11, 12
	c.Retired[0] = SNATRetired{IpBe: 13, PortLo: 30000, PortHi: 30999}
	if Config8Size != 228 {
		t.Fatalf("layout 8 config of %d bytes, want 228", Config8Size)
	}
	n, svc := configFrom8Value(c)
	want := xlbXlbConfig{SnatPortLo: 40000, SnatPortHi: 40999, Flags: 1, Nsnat: 2, SnatWords: 16, SnatIpsBe: c.SnatIpsBe,
		SnatReuseTicks: 250, Nretired: 1, Retired: c.Retired}
	b := ListenBit(c.ListenIpBe)
	want.ListenFilter[b/64] = 1 << (b % 64)
	if n != want {
		t.Errorf("layout 9 config %+v, want %+v", n, want)
	}
	wantSvc := xlbService{State: uint8(xlbXlbServiceStateXLB_SVC_SERVING), ActiveSet: 1, Proto: 6, Family: 2, Nports: 2,
		Flags: uint16(xlbXlbServiceFlagsXLB_SVC_MIGRATED), Ports: c.Ports}
	copy(wantSvc.Addr[:], []byte{192, 0, 2, 10})
	if svc != wantSvc {
		t.Errorf("service 0 %+v, want %+v", svc, wantSvc)
	}
	if _, svc := configFrom8Value(Config8{SnatPortLo: 40000, SnatPortHi: 40999}); svc != (xlbService{}) {
		t.Errorf("a config of no listen address made service %+v", svc)
	}
	if ListenBit(c.ListenIpBe) >= uint32(xlbXlbLimitsXLB_LISTEN_FILTER_BITS) {
		t.Errorf("listen bit %d beyond the filter", ListenBit(c.ListenIpBe))
	}
}

// Layout 8's routable set keeps its slot and refs; each ref gains its id
// as its member id.
func TestLayout8BackendSets(t *testing.T) {
	o := BackendSet8{Count: 2}
	o.Entries[0] = BackendRef8{IpBe: 1, Id: 3, PortBe: 0x901f}
	o.Entries[1] = BackendRef8{IpBe: 2, Id: 7}
	out, err := backendSetFrom8(nil, ToBytes(&o))
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromBytes[xlbBackendSet](out)
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 2 || got.Entries[0] != (xlbBackendRef{IpBe: 1, Id: 3, PortBe: 0x901f, Member: 3}) || got.Entries[1] != (xlbBackendRef{IpBe: 2, Id: 7, Member: 7}) || got.Entries[2] != (xlbBackendRef{}) {
		t.Errorf("layout 9 set: count %d, %+v", got.Count, got.Entries[:3])
	}
	if unsafe.Sizeof(BackendSet8{}) != 8+8*1024 || unsafe.Sizeof(State8{}) != 32 {
		t.Errorf("layout 8 set of %d bytes, state of %d", unsafe.Sizeof(BackendSet8{}), unsafe.Sizeof(State8{}))
	}
}

// Layout 8's 4 pair events per backend id move to the same events of
// layout 9's 8 per member id (member id = backend id): its closures,
// not split by initiator, count as the client's.
func TestLayout8PairEvents(t *testing.T) {
	for _, c := range []struct{ old, want uint32 }{
		{0, 0}, {1, 1}, {3, 3}, // backend 0
		{4, 8}, {7, 11}, // backend 1
		{1023*PairEvents8 + 2, 1023*8 + 2},
	} {
		out, err := pairEventFrom8(binary.NativeEndian.AppendUint32(nil, c.old))
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.NativeEndian.Uint32(out); got != c.want {
			t.Errorf("cell %d of layout 8 -> %d, want %d", c.old, got, c.want)
		}
	}
	if _, err := pairEventFrom8(make([]byte, 8)); err == nil {
		t.Error("an 8-byte key was converted")
	}
}
