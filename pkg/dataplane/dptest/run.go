package dptest

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// XDP actions.
const (
	XDPAborted  = 0
	XDPDrop     = 1
	XDPPass     = 2
	XDPTX       = 3
	XDPRedirect = 4
)

// ActionName names an XDP action for messages.
func ActionName(a uint32) string {
	switch a {
	case XDPAborted:
		return "XDP_ABORTED"
	case XDPDrop:
		return "XDP_DROP"
	case XDPPass:
		return "XDP_PASS"
	case XDPTX:
		return "XDP_TX"
	case XDPRedirect:
		return "XDP_REDIRECT"
	}
	return fmt.Sprintf("action(%d)", a)
}

// xdpMD mirrors struct xdp_md for BPF_PROG_TEST_RUN's context.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// Run runs the XLB program once on frame as if it arrived on ingress
// (BPF_PROG_TEST_RUN inside the fixture namespace, so bpf_fib_lookup sees the
// fixture's routes and neighbours). It returns the action and the frame as
// the program left it.
func (e *Env) Run(frame []byte, ingress Iface) (uint32, []byte, error) {
	return e.RunProgram(e.DP.Program(), frame, ingress)
}

// RunProgram is Run for any XDP program (the benchmark floor, for one).
func (e *Env) RunProgram(prog *ebpf.Program, frame []byte, ingress Iface) (uint32, []byte, error) {
	var ret uint32
	var out []byte
	err := e.Do(func() error {
		var err error
		ret, out, err = runOnce(prog, frame, ingress)
		return err
	})
	return ret, out, err
}

// RunHere is Run for callers already inside Do (many frames, one thread
// switch). Calling it outside Do runs in the wrong namespace.
func (e *Env) RunHere(frame []byte, ingress Iface) (uint32, []byte, error) {
	return runOnce(e.DP.Program(), frame, ingress)
}

// runOnce runs prog once on frame in the calling thread's namespace.
func runOnce(prog *ebpf.Program, frame []byte, ingress Iface) (uint32, []byte, error) {
	opts := ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256), Repeat: 1, Context: xdpContext(frame, ingress)}
	ret, err := prog.Run(&opts)
	return ret, opts.DataOut, err
}

// Bench runs prog repeat times on frame inside the namespace and returns the
// kernel-measured nanoseconds per run.
func (e *Env) Bench(prog *ebpf.Program, frame []byte, ingress Iface, repeat int) (float64, uint32, error) {
	var ret uint32
	var ns float64
	err := e.Do(func() error {
		var err error
		ns, ret, err = e.BenchHere(prog, frame, ingress, repeat)
		return err
	})
	return ns, ret, err
}

// BenchHere is Bench for callers already inside Do.
func (e *Env) BenchHere(prog *ebpf.Program, frame []byte, ingress Iface, repeat int) (float64, uint32, error) {
	opts := ebpf.RunOptions{Data: frame, Repeat: uint32(repeat), Context: xdpContext(frame, ingress)}
	r, total, err := runTimed(prog, &opts)
	return float64(total) / float64(repeat), r, err
}

// xdpContext is the xdp_md of frame arriving on ingress.
func xdpContext(frame []byte, ingress Iface) xdpMD {
	return xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ingress.Index)}
}
