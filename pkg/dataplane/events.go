package dataplane

import (
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// CloseKind is why a pair became terminal (bpf/layout.h enum xlb_close_kind).
type CloseKind uint16

const (
	// CloseFIN: both FINs; the pair is removed after the time-wait.
	CloseFIN = CloseKind(xlbXlbCloseKindXLB_CLOSE_FIN)
	// CloseRST: a reset; the pair is removed on the next cycle.
	CloseRST = CloseKind(xlbXlbCloseKindXLB_CLOSE_RST)
	// CloseLone is not a close: a packet on an entry idle for
	// LoneCheckTicks found its counterpart missing or of another pair.
	// The event's key is the lone entry's own.
	CloseLone = CloseKind(xlbXlbCloseKindXLB_CLOSE_LONE)
	// CloseOpen is not a close: a new pair (the forward key, Time = its
	// SYN's). It is removed the embryonic TTL later unless established
	// (ReapEmbryonic).
	CloseOpen = CloseKind(xlbXlbCloseKindXLB_CLOSE_OPEN)
	// CloseHold is not a close: a pair whose backend closed first was
	// replaced by the client's new SYN or removed after its time-wait
	// (ReapTimeWait), and its reverse entry (the event's key) stays as a
	// FlagHold entry keeping the SNAT port until the SNAT hold after Time,
	// the pair's close or the backend's last packet if later (ReapHold).
	CloseHold = CloseKind(xlbXlbCloseKindXLB_CLOSE_HOLD)
)

var closeKindNames = enumNames[CloseKind]{kind: "close_kind", names: map[CloseKind]string{
	CloseFIN: "fin", CloseRST: "rst", CloseLone: "lone", CloseOpen: "open", CloseHold: "hold",
}}

// String names the kind: fin, rst, lone, open or hold.
func (k CloseKind) String() string { return closeKindNames.of(k) }

// CloseEvent is one pair that became terminal, as the data path posted it
// (bpf/layout.h struct close_event, 32 bytes).
type CloseEvent = xlbCloseEvent

// Paths of the close events, by the ring buffer's state, as the status
// document names them (pkg/status/api).
const (
	PathRingBuffer  = string(api.PathRingBuffer)  // close events through a BPF ring buffer
	PathPerCPUQueue = string(api.PathPerCPUQueue) // close events through per-CPU array queues
)

// CloseEvents reads the data path's close events: from the ring buffer, or
// from the per-CPU queues where the host refuses ring buffers. Events are
// hints: whoever acts on one re-checks the pair (Reap). Not safe for
// concurrent use.
type CloseEvents struct {
	ring  *ringbuf.Reader
	rec   ringbuf.Record
	queue *ebpf.Map
	heads *ebpf.Map
	tails []uint64 // per CPU: events of that CPU's queue already read
	slot  []CloseEvent
	head  []uint64
}

// OpenCloseEvents starts reading close events. Events posted before the
// call that are still held (the ring buffer, the last CloseQueueSlots of
// each CPU's queue) are delivered too.
func (d *Dataplane) OpenCloseEvents() (*CloseEvents, error) {
	if d.closeRing {
		r, err := ringbuf.NewReader(d.objs.XlbCloseRing)
		if err != nil {
			return nil, fmt.Errorf("dataplane: read close events: %w", err)
		}
		return &CloseEvents{ring: r}, nil
	}
	e := &CloseEvents{queue: d.objs.XlbCloseQueue, heads: d.objs.XlbCloseHead}
	if err := e.heads.Lookup(uint32(0), &e.head); err != nil {
		return nil, fmt.Errorf("dataplane: read close queue heads: %w", err)
	}
	e.tails = make([]uint64, len(e.head))
	for cpu, h := range e.head {
		e.tails[cpu] = h - min(h, CloseQueueSlots)
	}
	return e, nil
}

// Path is PathRingBuffer or PathPerCPUQueue.
func (e *CloseEvents) Path() string {
	if e.ring != nil {
		return PathRingBuffer
	}
	return PathPerCPUQueue
}

// Drain calls fn with every event posted since the previous Drain and
// returns how many it read and how many the per-CPU queues overwrote
// before they could be read (always 0 with the ring buffer, whose losses
// the data path counts: Counters.CloseEventsLost).
func (e *CloseEvents) Drain(fn func(*CloseEvent)) (read, overwritten uint64, err error) {
	if e.ring != nil {
		e.ring.SetDeadline(time.Now())
		for {
			err := e.ring.ReadInto(&e.rec)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return read, 0, nil
			}
			if err != nil {
				return read, 0, fmt.Errorf("dataplane: read close events: %w", err)
			}
			if len(e.rec.RawSample) < closeEventSize {
				continue
			}
			var ev CloseEvent
			decodeCloseEvent(e.rec.RawSample, &ev)
			read++
			fn(&ev)
		}
	}
	if err := e.heads.Lookup(uint32(0), &e.head); err != nil {
		return 0, 0, fmt.Errorf("dataplane: read close queue heads: %w", err)
	}
	// Read each slot once for all CPUs, oldest pending event first.
	for {
		slot, any := uint64(0), false
		for cpu := range e.head {
			if e.head[cpu]-e.tails[cpu] > CloseQueueSlots {
				overwritten += e.head[cpu] - e.tails[cpu] - CloseQueueSlots
				e.tails[cpu] = e.head[cpu] - CloseQueueSlots
			}
			if e.tails[cpu] < e.head[cpu] && (!any || e.tails[cpu]%CloseQueueSlots < slot) {
				slot, any = e.tails[cpu]%CloseQueueSlots, true
			}
		}
		if !any {
			return read, overwritten, nil
		}
		if err := e.queue.Lookup(uint32(slot), &e.slot); err != nil {
			return read, overwritten, fmt.Errorf("dataplane: read close queue slot %d: %w", slot, err)
		}
		for cpu := range e.head {
			if e.tails[cpu] < e.head[cpu] && e.tails[cpu]%CloseQueueSlots == slot {
				read++
				fn(&e.slot[cpu])
				e.tails[cpu]++
			}
		}
	}
}

// Close releases the reader.
func (e *CloseEvents) Close() error {
	if e.ring != nil {
		return e.ring.Close()
	}
	return nil
}

// closeEventSize is the bytes of one close event, as bpf2go laid it out
// from bpf/layout.h.
const closeEventSize = int(unsafe.Sizeof(CloseEvent{}))

// decodeCloseEvent copies a ring buffer record into ev (same layout, native
// byte order).
func decodeCloseEvent(raw []byte, ev *CloseEvent) {
	copy((*[closeEventSize]byte)(unsafe.Pointer(ev))[:], raw)
}
