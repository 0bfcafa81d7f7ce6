package stalewrites

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/xlbproject/xlb/pkg/dataplane"
)

// The values bpf/stale_writes.c writes through pair 1's old pointer.
const (
	staleFlags    = dataplane.FlagClosedRST | dataplane.FlagRSTClient | dataplane.FlagPortFreed
	staleLastSeen = 0xdead
)

// pair2 is the new pair the replacer inserts: established, generation 2.
var pair2 = dataplane.FlowValue{SaddrBe: 9, DaddrBe: 10, Generation: 2,
	Flags: dataplane.FlagSYNACK | dataplane.FlagEstablished, Nexthop: 3, LastSeen: 100, TrackSeq: 200, SynUs: 300}

// run loads the test object, puts pair 1 (generation 1) and pair 2's
// value in place, runs prog and returns its result, pair 2's entry after
// it and what flow_set returned.
func run(t *testing.T, prog func(*staleWritesObjects) *ebpf.Program) (staleWritesStaleResult, dataplane.FlowValue, int64) {
	t.Helper()
	var objs staleWritesObjects
	if err := loadStaleWritesObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	if err := objs.Flows.Update(dataplane.FlowKey{SaddrBe: 1}, dataplane.FlowValue{SaddrBe: 5, Generation: 1,
		Flags: dataplane.FlagSYNACK | dataplane.FlagEstablished, LastSeen: 7}, ebpf.UpdateNoExist); err != nil {
		t.Fatal(err)
	}
	if err := objs.Fresh.Update(uint32(0), pair2, ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	ret, err := prog(&objs).Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	var v dataplane.FlowValue
	if r := staleWritesStaleResult(ret); r == staleWritesStaleResultSTALE_WRITTEN || r == staleWritesStaleResultSTALE_OTHER_ELEMENT {
		if err := objs.Flows.Lookup(dataplane.FlowKey{SaddrBe: 2}, &v); err != nil {
			t.Fatal(err)
		}
	}
	var set int64
	if err := objs.SetResult.Lookup(uint32(0), &set); err != nil {
		t.Fatal(err)
	}
	return staleWritesStaleResult(ret), v, set
}

// Without the guard, the sender's writes through pair 1's old pointer
// land in pair 2, which the kernel gave pair 1's freed element: pair 2,
// established, would be reset and its SNAT port freed under it (issue 27
// finding 8). This is what the data path's guarded writes prevent.
func TestUnguardedWritesLandInTheNewPair(t *testing.T) {
	ret, v, _ := run(t, func(o *staleWritesObjects) *ebpf.Program { return o.Unguarded })
	if ret != staleWritesStaleResultSTALE_WRITTEN {
		t.Fatalf("the program returned %v: pair 2 did not get pair 1's element, so nothing is shown (has the kernel stopped reusing deleted elements at once?)", ret)
	}
	if v.Flags&staleFlags != staleFlags || v.LastSeen != staleLastSeen {
		t.Fatalf("pair 2 after the unguarded writes: %+v, want pair 1's flags %#x and last_seen %#x in it", v, staleFlags, staleLastSeen)
	}
}

// With the guard (flow.h flow_set, flow_is), the same writes find another
// generation in the element and leave pair 2 as it was inserted.
func TestGuardedWritesLeaveTheNewPair(t *testing.T) {
	ret, v, set := run(t, func(o *staleWritesObjects) *ebpf.Program { return o.Guarded })
	if ret != staleWritesStaleResultSTALE_WRITTEN {
		t.Fatalf("the program returned %v: pair 2 did not get pair 1's element, so nothing is shown", ret)
	}
	if set != -1 {
		t.Errorf("flow_set through the stale pointer returned %d, want FLOW_GONE (-1)", set)
	}
	if v != pair2 {
		t.Errorf("pair 2 after the guarded writes: %+v, want it as inserted: %+v", v, pair2)
	}
}

// On a live entry flow_set is an atomic OR: it adds the bits and returns
// the flags before.
func TestGuardedSetOnALiveEntry(t *testing.T) {
	var objs staleWritesObjects
	if err := loadStaleWritesObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	before := dataplane.FlagSYNACK | dataplane.FlagEstablished | dataplane.FlagRSTClient
	if err := objs.Flows.Update(dataplane.FlowKey{SaddrBe: 1}, dataplane.FlowValue{Generation: 7, Flags: before}, ebpf.UpdateNoExist); err != nil {
		t.Fatal(err)
	}
	for round, want := range []uint32{before, before | staleFlags} {
		ret, err := objs.Live.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: 1})
		if err != nil || staleWritesStaleResult(ret) != staleWritesStaleResultSTALE_WRITTEN {
			t.Fatalf("round %d: the program returned %d (%v)", round, ret, err)
		}
		var set int64
		var v dataplane.FlowValue
		if err := objs.SetResult.Lookup(uint32(0), &set); err != nil {
			t.Fatal(err)
		}
		if err := objs.Flows.Lookup(dataplane.FlowKey{SaddrBe: 1}, &v); err != nil {
			t.Fatal(err)
		}
		if set != int64(want) || v.Flags != before|staleFlags || v.Generation != 7 {
			t.Errorf("round %d: flow_set returned %#x and left flags %#x generation %d, want %#x, %#x, 7", round, set, v.Flags, v.Generation, want, before|staleFlags)
		}
	}
}
