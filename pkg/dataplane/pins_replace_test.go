package dataplane

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// A process killed in the middle of replacing the pins leaves a staging/
// directory: complete (it holds meta), the next start finishes the
// replacement; incomplete, the next start drops it and the previous pins
// stand.
func TestInterruptedReplacement(t *testing.T) {
	dir := testStateDir(t)
	opts := func(maxConn uint32) Options {
		return Options{SNAT: migrateSNAT, MaxConnections: maxConn, StateDir: dir, NetnsCookie: testCookie(t)}
	}
	first, err := Load(opts(64))
	if err != nil {
		t.Fatal(err)
	}
	fillState(t, first, 5)
	if err := first.Pin(PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	first.Release()

	// A successor migrates to 128 connections and is killed during its
	// Pin, after moving the old flow map's pin aside.
	next, err := Load(opts(128))
	if err != nil {
		t.Fatal(err)
	}
	next.mu.Lock()
	err = next.writeMetaLocked(PinMeta{OwnerPID: 2})
	if err == nil {
		err = stagePins(dir, []string{"maps/xlb_flows", metaFile}, map[string]pinner{"maps/xlb_flows": mapPinner(next.objs.XlbFlows), metaFile: mapPinner(next.objs.XlbMeta)})
	}
	if err == nil {
		err = os.MkdirAll(filepath.Join(dir, retiredDir, mapsDir), 0o700)
	}
	if err == nil {
		err = os.Rename(mapPath(dir, xlbMapXlbFlows), filepath.Join(dir, retiredDir, mapsDir, xlbMapXlbFlows))
	}
	next.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	next.Release()

	third, err := Load(opts(128))
	if err != nil {
		t.Fatal(err)
	}
	if ad := third.Adoption(); ad.Start != api.StartAdopted || ad.OwnerPID != 2 || ad.Pairs != 5 || third.FlowCapacity() != 256 {
		t.Errorf("after the interrupted replacement: %+v, capacity %d; want the new set adopted", ad, third.FlowCapacity())
	}
	for _, d := range []string{stagingDir, retiredDir} {
		if _, err := os.Stat(filepath.Join(dir, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the start: %v", d, err)
		}
	}

	// A staging without meta was never complete.
	stray, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	if err := stagePins(dir, []string{"maps/xlb_flows"}, map[string]pinner{"maps/xlb_flows": mapPinner(stray)}); err != nil {
		t.Fatal(err)
	}
	third.Release()
	fourth, err := Load(opts(128))
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	if ad := fourth.Adoption(); ad.Start != api.StartAdopted || ad.Pairs != 5 {
		t.Errorf("after an incomplete staging: %+v, want the previous pins adopted", ad)
	}
	if _, err := os.Stat(filepath.Join(dir, stagingDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging after the start: %v", err)
	}
}
