package dataplane_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// TestEstablishedWritesNoSharedMap: data segments of an established pair,
// both ways, write no map whose cells all CPUs share (issue 17 item 4:
// per-CPU everything on the packet path). What they count goes to per-CPU
// maps, what they track to the pair's own entries; they post no event to
// the ring buffer either.
func TestEstablishedWritesNoSharedMap(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	ev := closeEvents(t, e)
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(7), 502)
	drain(t, ev)
	shared := e.DP.FixtureSharedMaps()
	before := snapshotMaps(t, shared)
	data := make([]byte, 100)
	for i := range uint32(20) {
		k.forward("client data", k.client(dt.ACK|dt.PSH, isnC+1+100*i, isnB+1+100*i, 502, data), counted{})
		k.forward("backend data", k.backend(dt.ACK|dt.PSH, isnB+1+100*i, isnC+101+100*i, 509, data), counted{})
	}
	after := snapshotMaps(t, shared)
	for _, name := range slices.Sorted(maps.Keys(shared)) {
		if !bytes.Equal(before[name], after[name]) {
			t.Errorf("map %s changed under established packets", name)
		}
	}
	if got := drain(t, ev); len(got) != 0 {
		t.Errorf("events %+v under established packets, want none", got)
	}
}

// snapshotMaps reads every entry of every map that can be iterated (all
// but the ring buffer) as bytes.
func snapshotMaps(t *testing.T, ms map[string]*ebpf.Map) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, m := range ms {
		if m.Type() == ebpf.RingBuf {
			continue
		}
		var buf bytes.Buffer
		var k, v []byte
		it := m.Iterate()
		for it.Next(&k, &v) {
			fmt.Fprintf(&buf, "%x=%x;", k, v)
		}
		if err := it.Err(); err != nil {
			t.Fatalf("iterate %s: %v", name, err)
		}
		out[name] = buf.Bytes()
	}
	return out
}
