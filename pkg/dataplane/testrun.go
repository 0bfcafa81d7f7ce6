package dataplane

import "github.com/cilium/ebpf"

const (
	// ethHeaderLen is the length of an Ethernet header, the shortest frame
	// BPF_PROG_TEST_RUN accepts for an XDP program.
	ethHeaderLen = 14
	// xdpPass is the kernel's XDP_PASS (the counter of a verdict sits at
	// the verdict's value, bpf/layout.h enum xlb_counter): the reaper's
	// return value after a complete run.
	xdpPass = uint32(xlbXlbCounterXLB_C_XDP_PASS)
)

// runOnce runs one of the programs userspace drives (the clock, the
// reaper) once with BPF_PROG_TEST_RUN, on a zeroed Ethernet header that
// neither reads, and returns its XDP verdict.
func runOnce(prog *ebpf.Program) (uint32, error) {
	return prog.Run(&ebpf.RunOptions{Data: make([]byte, ethHeaderLen), Repeat: 1})
}
