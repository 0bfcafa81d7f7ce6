package dptest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// progRunAttr is the BPF_PROG_TEST_RUN part of union bpf_attr.
type progRunAttr struct {
	ProgFD      uint32
	Retval      uint32
	DataSizeIn  uint32
	DataSizeOut uint32
	DataIn      uint64
	DataOut     uint64
	Repeat      uint32
	Duration    uint32
	CtxSizeIn   uint32
	CtxSizeOut  uint32
	CtxIn       uint64
	CtxOut      uint64
	Flags       uint32
	CPU         uint32
	BatchSize   uint32
	_           uint32
}

const bpfProgTestRun = 10

// runTimed issues BPF_PROG_TEST_RUN directly because cilium/ebpf's Run does
// not return the kernel's per-run duration when a context is supplied. The
// kernel reports the mean duration of one run in nanoseconds.
func runTimed(prog *ebpf.Program, opts *ebpf.RunOptions) (uint32, time.Duration, error) {
	var ctx bytes.Buffer
	if opts.Context != nil {
		if err := binary.Write(&ctx, binary.NativeEndian, opts.Context); err != nil {
			return 0, 0, err
		}
	}
	ctxIn := ctx.Bytes()
	attr := progRunAttr{
		ProgFD:     uint32(prog.FD()),
		DataSizeIn: uint32(len(opts.Data)),
		DataIn:     uint64(uintptr(unsafe.Pointer(&opts.Data[0]))),
		Repeat:     opts.Repeat,
	}
	if len(ctxIn) > 0 {
		attr.CtxSizeIn = uint32(len(ctxIn))
		attr.CtxIn = uint64(uintptr(unsafe.Pointer(&ctxIn[0])))
	}
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, bpfProgTestRun, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, 0, fmt.Errorf("BPF_PROG_TEST_RUN: %w", errno)
		}
		break
	}
	runtime.KeepAlive(opts.Data)
	runtime.KeepAlive(ctxIn)
	return attr.Retval, time.Duration(attr.Duration) * time.Duration(opts.Repeat), nil
}
