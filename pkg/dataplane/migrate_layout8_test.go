package dataplane

import (
	"testing"

	"github.com/cilium/ebpf"
)

// checkMigratedConfig checks that d holds layout 8's config old as the
// migration to layout 9 makes it: the SNAT fields and flags copied, the
// prefilter with the old listen address's bit, service 0 serving and
// migrated on the old address, ports and active set, and its listen keys.
func checkMigratedConfig(t *testing.T, d *Dataplane, old config8) {
	t.Helper()
	var cfg xlbXlbConfig
	if err := d.objs.XlbCfg.Lookup(uint32(0), &cfg); err != nil {
		t.Fatal(err)
	}
	retired, err := fromBytes[[MaxRetiredSNAT]xlbSnatRetired](toBytes(&old.Retired))
	if err != nil {
		t.Fatal(err)
	}
	ports, err := fromBytes[[MaxPorts]xlbPortMap](toBytes(&old.Ports))
	if err != nil {
		t.Fatal(err)
	}
	want := xlbXlbConfig{SnatPortLo: old.SnatPortLo, SnatPortHi: old.SnatPortHi, Flags: old.Flags, Nsnat: old.Nsnat,
		SnatWords: old.SnatWords, SnatIpsBe: old.SnatIpsBe, SnatReuseTicks: old.SnatReuseTicks, Nretired: old.Nretired, Retired: retired}
	b := listenBit(addrFromBE32(old.ListenIpBe))
	want.ListenFilter[b/64] = 1 << (b % 64)
	if cfg != want {
		t.Errorf("config: %+v, want %+v", cfg, want)
	}
	var svc xlbService
	if err := d.objs.XlbServices.Lookup(uint32(0), &svc); err != nil {
		t.Fatal(err)
	}
	wantSvc := xlbService{State: uint8(ServiceServing), ActiveSet: uint8(old.ActiveSet), Proto: ipprotoTCP, Family: afInet,
		Nports: uint8(old.Nports), Flags: serviceMigratedFlag, Ports: ports}
	a := addrFromBE32(old.ListenIpBe).As4()
	copy(wantSvc.Addr[:], a[:])
	if svc != wantSvc {
		t.Errorf("service 0: %+v, want %+v", svc, wantSvc)
	}
	for _, p := range ports[:old.Nports] {
		var v xlbListenValue
		k := xlbListenKey{AddrBe: old.ListenIpBe, PortBe: p.LocalPortBe, Proto: ipprotoTCP}
		if err := d.objs.XlbListen.Lookup(&k, &v); err != nil {
			t.Errorf("listen key of port %d: %v", portFromBE16(p.LocalPortBe), err)
		} else if v != (xlbListenValue{RemotePortBe: p.RemotePortBe}) {
			t.Errorf("listen key of port %d: %+v, want service 0, remote port %d", portFromBE16(p.LocalPortBe), v, portFromBE16(p.RemotePortBe))
		}
	}
}

// checkMigratedState checks that d holds layout 8's shared state of src
// (state8) as the migration to layout 9 makes it: the generation and the
// clock as they were, service 0's round-robin position the old one.
func checkMigratedState(t *testing.T, d *Dataplane, src *ebpf.Map) {
	t.Helper()
	var old state8
	if err := src.Lookup(uint32(0), &old); err != nil {
		t.Fatal(err)
	}
	var st xlbXlbState
	if err := d.objs.XlbShared.Lookup(uint32(0), &st); err != nil {
		t.Fatal(err)
	}
	if want := (xlbXlbState{Generation: old.Generation, ClockJiffies: old.ClockJiffies, ClockNs: old.ClockNs}); st != want {
		t.Errorf("shared state %+v, want %+v", st, want)
	}
	var rr uint64
	if err := d.objs.XlbRr.Lookup(uint32(0), &rr); err != nil {
		t.Fatal(err)
	}
	if rr != old.Rr {
		t.Errorf("service 0's round-robin position %d, want layout 8's %d", rr, old.Rr)
	}
}
