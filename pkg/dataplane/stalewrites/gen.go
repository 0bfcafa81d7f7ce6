// Package stalewrites checks the data path's writes through a flow
// entry's pointer (bpf/flow.h, "stale pointers") against the kernel's
// preallocated hash map, with the test program of bpf/stale_writes.c: the
// flow map hands a deleted element to the next insert at once, so a CPU
// that still holds a replaced pair's pointer holds the new pair's entry.
// The package has no code of its own besides the generated object; its
// test is the point.
package stalewrites

// The object is generated from bpf/stale_writes.c like the XLB program's
// (pkg/dataplane/gen.go), and committed.
//
//go:generate sh -c "go tool bpf2go -cc clang -strip llvm-strip -target bpfel -type stale_result staleWrites ../../../bpf/stale_writes.c -- -I../../../bpf -I/usr/include/$(clang -print-multiarch) -O2 -g -Wall -Werror -mcpu=v3"
