package dataplane_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// A hot upgrade from the issue-13 build (layout 3): a start that finds its
// pins migrates them, every pair keeps every field and forwards both ways;
// the handshake of a pair whose SYN the old build forwarded is never
// counted (its SYN was not timed), a new pair's is; Pin leaves pins of
// this layout, the handshake histograms among them.
func TestHotUpgradeFromLayout3(t *testing.T) {
	l := newPinLab(t)
	old := l.mustLoad(t, 64)
	l.configure(t, old)
	const pairs = 4 // the last one embryonic: its SYN-ACK comes after the upgrade
	l.open(t, old, 0, pairs)
	before := flows(t, old)
	for i := range pairs - 1 {
		fwd := before[dt.ForwardKey(dt.Client(uint16(34000+i)), 80)]
		l.run(t, old, l.e.FromBackend(fwd.NewDst(), fwd.NewSrc().Port(), dt.SYN|dt.ACK, 5000, 1001, nil), dt.XDPTX)
		l.run(t, old, l.e.FromClient(dt.Client(uint16(34000+i)), 80, dt.ACK, 1001, 5001, nil), dt.XDPTX)
	}
	before = flows(t, old)
	if err := old.Pin(dataplane.PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := old.Release(); err != nil {
		t.Fatal(err)
	}
	dataplane.DowngradeToLayout3(t, l.dir)

	dp := l.mustLoad(t, 64)
	if ad := dp.Adoption(); ad.Start != api.StartMigrated || ad.FromLayout != 3 || ad.Pairs != pairs {
		t.Fatalf("adoption %+v, want migrated from layout 3 with %d pairs", ad, pairs)
	}
	l.configure(t, dp)
	after := flows(t, dp)
	if len(after) != len(before) {
		t.Fatalf("%d flow entries after the migration, want %d", len(after), len(before))
	}
	for k, v := range before {
		v.SynUs = 0
		if after[k] != v {
			t.Errorf("%v after the migration: %+v, want %+v", k, after[k], v)
		}
	}
	for i := range pairs {
		c := dt.Client(uint16(34000 + i))
		fwd := after[dt.ForwardKey(c, 80)]
		backend := fwd.NewDst()
		if i == pairs-1 {
			synAck := l.e.FromBackend(backend, fwd.NewSrc().Port(), dt.SYN|dt.ACK, 5000, 1001, nil)
			l.forwards(t, dp, fmt.Sprintf("pair %d: the SYN-ACK", i), synAck, l.e.ToClient(synAck, c, 80))
			if f := flows(t, dp)[dt.ForwardKey(c, 80)]; f.Flags&dataplane.FlagSYNACK == 0 {
				t.Errorf("pair %d: flags %#x after its SYN-ACK, want FlagSYNACK", i, f.Flags)
			}
			continue
		}
		data := l.data(i)
		l.forwards(t, dp, fmt.Sprintf("pair %d: client data", i), data, l.e.ToBackend(data, backend, fwd.NewSrc().Port()))
		reply := l.e.FromBackend(backend, fwd.NewSrc().Port(), dt.ACK, 5001, 1006, nil)
		l.forwards(t, dp, fmt.Sprintf("pair %d: backend reply", i), reply, l.e.ToClient(reply, c, 80))
	}
	hs, err := dp.HandshakeHistograms()
	if err != nil {
		t.Fatal(err)
	}
	for id, h := range hs {
		if h.Count != 0 {
			t.Errorf("backend %d: %d handshakes counted, want none (pairs of layout 3 were never timed)", id, h.Count)
		}
	}

	// A new pair's handshake counts.
	l.open(t, dp, pairs, 1)
	c := dt.Client(uint16(34000 + pairs))
	fwd := flows(t, dp)[dt.ForwardKey(c, 80)]
	if fwd.SynUs == 0 {
		t.Fatalf("a new pair's forward entry has no SYN time: %+v", fwd)
	}
	l.run(t, dp, l.e.FromBackend(fwd.NewDst(), fwd.NewSrc().Port(), dt.SYN|dt.ACK, 5000, 1001, nil), dt.XDPTX)
	if hs, err = dp.HandshakeHistograms(); err != nil {
		t.Fatal(err)
	}
	for id, h := range hs {
		want := uint64(0)
		if id == int(fwd.BackendId) {
			want = 1
		}
		if h.Count != want {
			t.Errorf("backend %d: %d handshakes, want %d", id, h.Count, want)
		}
	}
	if err := dp.Pin(dataplane.PinMeta{OwnerPID: 3}); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(l.dir, "maps", "xlb_handshake"), nil)
	if err != nil {
		t.Fatalf("the migrated pins have no handshake histograms: %v", err)
	}
	m.Close()
}
