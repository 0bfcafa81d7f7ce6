package dataplane

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The flow map is a preallocated hash (bpf/maps.h xlb_flows): the kernel
// hands an element a delete frees to the next insert at once, with no
// grace period, so a pointer a program holds from a lookup may point,
// after another pair's insert, into that pair's entry. The probe below
// plays both CPUs of issue 27 finding 8 in one run: it looks pair 1's
// entry up (the CPU sending on the old pair), deletes it and inserts pair
// 2 (the CPU replacing pairs), then writes last_seen through the old
// pointer. This test shows the write lands in pair 2's entry: the
// suspicion is confirmed for any write a program makes through a pointer
// after another CPU can have deleted the entry. The data path therefore
// writes only while the entry keeps the generation its lookup read
// (bpf/flow.h, stale pointers); pkg/dataplane/stalewrites checks those
// guarded writes against the same reuse.
func TestFlowMapReusesADeletedElementAtOnce(t *testing.T) {
	spec, err := loadXlb()
	if err != nil {
		t.Fatal(err)
	}
	ms := spec.Maps[xlbMapXlbFlows].Copy()
	ms.MaxEntries = 64
	flows, err := ebpf.NewMap(ms)
	if err != nil {
		t.Fatal(err)
	}
	defer flows.Close()
	if ms.Flags&uint32(1) != 0 { // BPF_F_NO_PREALLOC
		t.Fatalf("the flow map is no longer preallocated (flags %#x): revisit this test", ms.Flags)
	}
	const (
		genOff  = int16(unsafe.Offsetof(FlowValue{}.Generation))
		seenOff = int16(unsafe.Offsetof(FlowValue{}.LastSeen))
		stale   = 0xdead
	)
	// Stack: pair 1's key at r10-16, pair 2's at r10-32, pair 2's value
	// (48 bytes, generation 2) at r10-80.
	var insns asm.Instructions
	for off := int16(-80); off < 0; off += 4 {
		insns = append(insns, asm.StoreImm(asm.RFP, off, 0, asm.Word))
	}
	insns = append(insns,
		asm.StoreImm(asm.RFP, -16, 1, asm.Word), // key 1: saddr 1
		asm.StoreImm(asm.RFP, -32, 2, asm.Word), // key 2: saddr 2
	)
	insns = append(insns,
		asm.StoreImm(asm.RFP, -80+genOff, 2, asm.Word),
		// the sender: its lookup of pair 1
		asm.LoadMapPtr(asm.R1, flows.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "fail"),
		asm.Mov.Reg(asm.R7, asm.R0),
		// the replacer: pair 1 deleted, pair 2 inserted
		asm.LoadMapPtr(asm.R1, flows.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.FnMapDeleteElem.Call(),
		asm.JNE.Imm(asm.R0, 0, "fail"),
		asm.LoadMapPtr(asm.R1, flows.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -32),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -80),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST
		asm.FnMapUpdateElem.Call(),
		asm.JNE.Imm(asm.R0, 0, "fail"),
		// the sender again: a packet of pair 1 refreshes last_seen
		asm.StoreImm(asm.R7, seenOff, stale, asm.Word),
		// 1: pair 2's entry is pair 1's old element
		asm.LoadMapPtr(asm.R1, flows.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -32),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "fail"),
		asm.JEq.Reg(asm.R0, asm.R7, "same"),
		asm.Mov.Imm(asm.R0, 2),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("same"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("fail"),
		asm.Return(),
	)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if err := flows.Update(FlowKey{SaddrBe: 1}, FlowValue{Generation: 1, LastSeen: 7}, ebpf.UpdateNoExist); err != nil {
		t.Fatal(err)
	}
	ret, err := runOnce(prog)
	if err != nil {
		t.Fatal(err)
	}
	var v FlowValue
	if err := flows.Lookup(FlowKey{SaddrBe: 2}, &v); err != nil {
		t.Fatalf("pair 2 (the probe returned %d): %v", ret, err)
	}
	if ret != 1 || v.LastSeen != stale {
		t.Fatalf("the probe returned %d (1: same element) and pair 2's last_seen is %#x: the kernel no longer reuses a deleted element at once", ret, v.LastSeen)
	}
	t.Logf("confirmed: pair 2's entry is pair 1's freed element, and a write through pair 1's old pointer set pair 2's last_seen to %#x", v.LastSeen)
}
