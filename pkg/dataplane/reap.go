package dataplane

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// ReapOp is what a reap request asks (bpf/layout.h enum xlb_reap_op).
type ReapOp uint8

const (
	// ReapReset removes the pair if it is terminal by a RST.
	ReapReset = ReapOp(xlbXlbReapOpXLB_REAP_RESET)
	// ReapTimeWait removes the pair if it is terminal by both FINs and
	// the time-wait has passed since.
	ReapTimeWait = ReapOp(xlbXlbReapOpXLB_REAP_TIMEWAIT)
	// ReapOrphan removes the pair if it is not terminal and neither
	// entry saw a packet for the orphan TTL.
	ReapOrphan = ReapOp(xlbXlbReapOpXLB_REAP_ORPHAN)
	// ReapCheck only reports whether the entry's counterpart is intact.
	ReapCheck = ReapOp(xlbXlbReapOpXLB_REAP_CHECK)
	// ReapLone removes the entry (either direction) if it is still lone.
	ReapLone = ReapOp(xlbXlbReapOpXLB_REAP_LONE)
)

// ReapResult is the reaper's answer to one request (bpf/layout.h enum
// xlb_reap_result).
type ReapResult uint8

const (
	// Reaped: removed (the pair; the lone entry for ReapLone).
	Reaped = ReapResult(xlbXlbReapResultXLB_REAPED)
	// ReapKept: the re-check failed; the pair moved on (a packet, a close)
	// or is not due yet.
	ReapKept = ReapResult(xlbXlbReapResultXLB_REAP_KEPT)
	// ReapGone: no entry of that generation any more.
	ReapGone = ReapResult(xlbXlbReapResultXLB_REAP_GONE)
	// ReapIntact: the counterpart is there (ReapCheck, ReapLone).
	ReapIntact = ReapResult(xlbXlbReapResultXLB_REAP_INTACT)
	// ReapLoneFound: ReapCheck found the counterpart missing or foreign.
	ReapLoneFound = ReapResult(xlbXlbReapResultXLB_REAP_LONE_FOUND)
	// ReapRepaired: a reset, time-wait or orphan request found the
	// forward entry lone and removed it as an invariant repair.
	ReapRepaired = ReapResult(xlbXlbReapResultXLB_REAP_REPAIRED)
)

// ReapRequest is one request to the reaper. Result is written by Reap.
type ReapRequest struct {
	Key        FlowKey
	Generation uint32
	Op         ReapOp
	Result     ReapResult
}

// ReapClock is what the reaper judges requests by: the caller's now (the
// maintenance loop's clock, so tests can move it) and the two rules'
// durations, all in ticks.
type ReapClock struct {
	Now       Jiffies
	TimeWait  Jiffies
	OrphanTTL Jiffies
}

// ReapBatch is how many requests one run of the reaper takes.
const ReapBatch = 2048

// Reap runs the reaper (bpf/xlb.c xlb_reap) over reqs, ReapBatch at a time,
// and fills in each request's Result. Every request is re-checked against
// the live entry in the kernel just before anything is removed. The
// reaper's removals are counted per backend (Reaped). Calls are serialised.
func (d *Dataplane) Reap(reqs []ReapRequest, c ReapClock) error {
	d.reapMu.Lock()
	defer d.reapMu.Unlock()
	b := &d.reapBuf
	b.Now, b.TimeWait, b.OrphanTtl = uint64(c.Now), uint64(c.TimeWait), uint64(c.OrphanTTL)
	frame := make([]byte, 14)
	for len(reqs) > 0 {
		n := min(len(reqs), ReapBatch)
		b.Count = uint32(n)
		for i := range n {
			b.Reqs[i] = xlbReapReq{Key: reqs[i].Key, Generation: reqs[i].Generation, Op: uint8(reqs[i].Op)}
		}
		if err := d.objs.XlbReapBatch.Update(uint32(0), b, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("dataplane: reap: write requests: %w", err)
		}
		ret, err := d.objs.XlbReap.Run(&ebpf.RunOptions{Data: frame, Repeat: 1})
		if err != nil {
			return fmt.Errorf("dataplane: reap: run: %w", err)
		}
		if ret != uint32(xdpPass) {
			return fmt.Errorf("dataplane: reap: the reaper returned %d", ret)
		}
		if err := d.objs.XlbReapBatch.Lookup(uint32(0), b); err != nil {
			return fmt.Errorf("dataplane: reap: read results: %w", err)
		}
		for i := range n {
			reqs[i].Result = ReapResult(b.Reqs[i].Result)
		}
		reqs = reqs[n:]
	}
	return nil
}

// xdpPass is XDP_PASS, the reaper's return value after a complete run.
const xdpPass = 2

// ReapedCounts counts the pairs and entries the reaper removed from one
// backend (bpf/layout.h enum xlb_reaped_reason).
type ReapedCounts struct {
	TimeWait     uint64 // time-wait pairs removed after the time-wait
	Reset        uint64 // reset pairs removed
	Orphaned     uint64 // idle pairs removed after the orphan TTL
	LoneActive   uint64 // lone forward entries of live pairs removed
	LoneTimeWait uint64 // lone forward entries of time-wait pairs removed
	LoneReset    uint64 // lone forward entries of reset pairs removed
	LoneReverse  uint64 // lone reverse entries removed
}

// Lone is the number of lone entries removed, either direction.
func (r ReapedCounts) Lone() uint64 {
	return r.LoneActive + r.LoneTimeWait + r.LoneReset + r.LoneReverse
}

const reapedReasons = int(xlbXlbReapedReasonXLB_REAPED_REASONS)

// AllReapedCounts reads the reaper's counts of every backend id, indexed by id.
func (d *Dataplane) AllReapedCounts() ([]ReapedCounts, error) {
	n := MaxBackends * reapedReasons
	keys := make([]uint32, n)
	for i := range keys {
		keys[i] = uint32(i)
	}
	raw := make([]uint64, n)
	if err := lookupAll(d, d.objs.XlbReaped, keys, raw); err != nil {
		return nil, fmt.Errorf("dataplane: read reaped counts: %w", err)
	}
	out := make([]ReapedCounts, MaxBackends)
	for id := range out {
		r := raw[id*reapedReasons:]
		out[id] = ReapedCounts{
			TimeWait:     r[xlbXlbReapedReasonXLB_REAPED_TIMEWAIT],
			Reset:        r[xlbXlbReapedReasonXLB_REAPED_RESET],
			Orphaned:     r[xlbXlbReapedReasonXLB_REAPED_ORPHANED],
			LoneActive:   r[xlbXlbReapedReasonXLB_REAPED_LONE_ACTIVE],
			LoneTimeWait: r[xlbXlbReapedReasonXLB_REAPED_LONE_TIMEWAIT],
			LoneReset:    r[xlbXlbReapedReasonXLB_REAPED_LONE_RESET],
			LoneReverse:  r[xlbXlbReapedReasonXLB_REAPED_LONE_REVERSE],
		}
	}
	return out, nil
}

func (o ReapOp) String() string {
	switch o {
	case ReapReset:
		return "reset"
	case ReapTimeWait:
		return "time-wait"
	case ReapOrphan:
		return "orphaned"
	case ReapCheck:
		return "check"
	case ReapLone:
		return "lone"
	}
	return fmt.Sprintf("reap_op(%d)", uint8(o))
}
