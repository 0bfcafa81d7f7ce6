package dataplane_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// A hot upgrade from the issue-13 build (layout 3): a start that finds its
// pins migrates them, every pair keeps every field and forwards both ways;
// the handshake of a pair whose SYN the old build forwarded is never
// counted (its SYN was not timed), a new pair's is; Pin leaves pins of
// this layout, the handshake histograms among them.
func TestHotUpgradeFromLayout3(t *testing.T) {
	l := newPinLab(t)
	const pairs = 4 // the last one embryonic: its SYN-ACK comes after the upgrade
	old := l.running(t, pairs)
	before := flows(t, old)
	for i := range pairs - 1 {
		fwd := before[dt.ForwardKey(dt.Client(uint16(34000+i)), 80)]
		l.run(t, old, l.e.FromBackend(fwd.NewDst(), fwd.NewSrc().Port(), dt.SYN|dt.ACK, 5000, 1001, nil), dt.XDPTX)
		l.run(t, old, l.e.FromClient(dt.Client(uint16(34000+i)), 80, dt.ACK, 1001, 5001, nil), dt.XDPTX)
	}
	before = flows(t, old)
	l.handOver(t, old)
	dataplane.DowngradeToLayout3(t, l.dir)

	dp := l.migrated(t, 3, pairs)
	after := sameFlows(t, dp, before, func(v *dataplane.FlowValue) { v.SynUs = 0 })
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
