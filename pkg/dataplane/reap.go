package dataplane

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// ReapOp is what a reap request asks (bpf/layout.h enum xlb_reap_op).
type ReapOp = xlbXlbReapOp

const (
	// ReapReset removes the pair if it is terminal by a RST.
	ReapReset = xlbXlbReapOpXLB_REAP_RESET
	// ReapTimeWait removes the pair if it is terminal by both FINs and
	// the time-wait has passed since. When the backend closed first (the
	// reverse entry lacks FlagPortFreed) the reverse entry stays as a
	// FlagHold entry with the SNAT port, announced by a CloseHold event,
	// until ReapHold.
	ReapTimeWait = xlbXlbReapOpXLB_REAP_TIMEWAIT
	// ReapOrphan removes the pair if it is not terminal and neither
	// entry saw a packet for the orphan TTL.
	ReapOrphan = xlbXlbReapOpXLB_REAP_ORPHAN
	// ReapCheck only reports whether the entry's counterpart is intact.
	ReapCheck = xlbXlbReapOpXLB_REAP_CHECK
	// ReapLone removes the entry (either direction) if it is still lone.
	// A FlagHold entry is never lone (ReapIntact).
	ReapLone = xlbXlbReapOpXLB_REAP_LONE
	// ReapEmbryonic removes the pair if it is live, was never established
	// and its SYN is at least the embryonic TTL old (DESIGN §6b).
	ReapEmbryonic = xlbXlbReapOpXLB_REAP_EMBRYONIC
	// ReapHold removes a FlagHold reverse entry once ReapClock.SNATHold
	// has passed since its pair's close, and frees its SNAT port.
	ReapHold = xlbXlbReapOpXLB_REAP_HOLD
	// ReapTSHold removes nothing: when the pair (its forward key) ended
	// by FINs leaving the backend in TIME_WAIT (its port not freed) with
	// FlagTS, it marks the port reusable by a client SYN with timestamps
	// once the reuse guard has passed (bpf/snat.h timestamp reuse; issue
	// 36): ReapHinted, else ReapKept. Sent for every CloseFIN event.
	ReapTSHold = xlbXlbReapOpXLB_REAP_TS_HOLD
	// ReapUDP (forward key): remove the UDP pair if idle for its state's
	// timeout; a KEPT answer sets Next (layout 11).
	ReapUDP = xlbXlbReapOpXLB_REAP_UDP
)

// ReapResult is the reaper's answer to one request (bpf/layout.h enum
// xlb_reap_result).
type ReapResult = xlbXlbReapResult

const (
	// Reaped: removed (the pair; the lone entry for ReapLone).
	Reaped = xlbXlbReapResultXLB_REAPED
	// ReapKept: the re-check failed; the pair moved on (a packet, a close)
	// or is not due yet.
	ReapKept = xlbXlbReapResultXLB_REAP_KEPT
	// ReapGone: no entry of that generation any more.
	ReapGone = xlbXlbReapResultXLB_REAP_GONE
	// ReapIntact: the counterpart is there (ReapCheck, ReapLone).
	ReapIntact = xlbXlbReapResultXLB_REAP_INTACT
	// ReapLoneFound: ReapCheck found the counterpart missing or foreign.
	ReapLoneFound = xlbXlbReapResultXLB_REAP_LONE_FOUND
	// ReapRepaired: a reset, time-wait or orphan request found the
	// forward entry lone and removed it as an invariant repair.
	ReapRepaired = xlbXlbReapResultXLB_REAP_REPAIRED
	// ReapHinted: ReapTSHold marked the pair's port for timestamp reuse.
	ReapHinted = xlbXlbReapResultXLB_REAP_HINTED
)

// ReapRequest is one request to the reaper, as the kernel reads it
// (bpf/layout.h struct reap_req, 28 bytes):
//
//	Key        FlowKey    // the entry the request is about
//	Generation uint32     // the pair's generation when the loop decided
//	Op         ReapOp     // what to do
//	Result     ReapResult // the reaper's answer, written by Reap
//	Pad        uint16     // ignored
//	Next       uint32     // ReapUDP answered ReapKept: the jiffies (low 32 bits) at which the pair falls due as it stands
type ReapRequest = xlbReapReq

// ReapClock is what the reaper judges requests by: the caller's now (the
// maintenance loop's clock, so tests can move it) and the rules'
// durations, all in ticks.
type ReapClock struct {
	Now          Jiffies
	TimeWait     Jiffies
	OrphanTTL    Jiffies
	EmbryonicTTL Jiffies
	// SNATHold is how long after its pair's close a held reverse entry
	// (FlagHold) keeps its SNAT port (ReapHold; pkg/maintenance SNATHold).
	SNATHold Jiffies
	// UDPTimeout and UDPStreamTimeout are a UDP pair's idle timeouts
	// without and with a reply (ReapUDP).
	UDPTimeout, UDPStreamTimeout Jiffies
}

// Reap runs the reaper (bpf/xlb.c xlb_reap) over reqs, ReapBatch at a time,
// and fills in each request's Result. Every request is re-checked against
// the live entry in the kernel just before anything is removed. The
// reaper's removals are counted per backend (Reaped). Calls are serialised.
func (d *Dataplane) Reap(reqs []ReapRequest, c ReapClock) error {
	d.reapMu.Lock()
	defer d.reapMu.Unlock()
	b := &d.reapBuf
	b.Now, b.TimeWait, b.OrphanTtl, b.EmbryonicTtl = uint64(c.Now), uint64(c.TimeWait), uint64(c.OrphanTTL), uint64(c.EmbryonicTTL)
	b.SnatHold = uint64(c.SNATHold)
	b.UdpTtl, b.UdpStreamTtl = uint64(c.UDPTimeout), uint64(c.UDPStreamTimeout)
	for len(reqs) > 0 {
		n := min(len(reqs), ReapBatch)
		b.Count = uint32(n)
		copy(b.Reqs[:n], reqs[:n])
		if err := d.objs.XlbReapBatch.Update(uint32(0), b, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("dataplane: reap: write requests: %w", err)
		}
		ret, err := runOnce(d.objs.XlbReap)
		if err != nil {
			return fmt.Errorf("dataplane: reap: run: %w", err)
		}
		if ret != xdpPass {
			return fmt.Errorf("dataplane: reap: the reaper returned %d", ret)
		}
		if err := d.objs.XlbReapBatch.Lookup(uint32(0), b); err != nil {
			return fmt.Errorf("dataplane: reap: read results: %w", err)
		}
		copy(reqs[:n], b.Reqs[:n])
		reqs = reqs[n:]
	}
	return nil
}

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
	Embryonic    uint64 // pairs removed the embryonic TTL after their SYN, never established
	// UDPUnreplied and UDPReplied are UDP pairs removed idle for the
	// UDP timeout (no reply seen) or the stream timeout (replied).
	UDPUnreplied, UDPReplied uint64
	// LoneUDP counts lone UDP entries removed, either direction (not in
	// Lone, whose entries are TCP's).
	LoneUDP uint64
}

// Lone is the number of lone TCP entries removed, either direction.
func (r ReapedCounts) Lone() uint64 {
	return r.LoneActive + r.LoneTimeWait + r.LoneReset + r.LoneReverse
}

// AllReapedCounts reads the reaper's counts of every member id, indexed by
// member id (MaxMembers of them).
func (d *Dataplane) AllReapedCounts() ([]ReapedCounts, error) {
	raw, _, err := readArray[uint64](d, d.objs.XlbReaped, int(xlbXlbLimitsXLB_REAPED_CELLS))
	if err != nil {
		return nil, fmt.Errorf("dataplane: read reaped counts: %w", err)
	}
	out := make([]ReapedCounts, MaxMembers)
	for id := range out {
		r := raw[id*int(xlbXlbLimitsXLB_REAPED_REASONS):]
		out[id] = ReapedCounts{
			TimeWait:     r[xlbXlbReapedReasonXLB_REAPED_TIMEWAIT],
			Reset:        r[xlbXlbReapedReasonXLB_REAPED_RESET],
			Orphaned:     r[xlbXlbReapedReasonXLB_REAPED_ORPHANED],
			LoneActive:   r[xlbXlbReapedReasonXLB_REAPED_LONE_ACTIVE],
			LoneTimeWait: r[xlbXlbReapedReasonXLB_REAPED_LONE_TIMEWAIT],
			LoneReset:    r[xlbXlbReapedReasonXLB_REAPED_LONE_RESET],
			LoneReverse:  r[xlbXlbReapedReasonXLB_REAPED_LONE_REVERSE],
			Embryonic:    r[xlbXlbReapedReasonXLB_REAPED_EMBRYONIC],
			UDPUnreplied: r[xlbXlbReapedReasonXLB_REAPED_UDP_UNREPLIED],
			UDPReplied:   r[xlbXlbReapedReasonXLB_REAPED_UDP_REPLIED],
			LoneUDP:      r[xlbXlbReapedReasonXLB_REAPED_LONE_UDP],
		}
	}
	return out, nil
}

var reapOpNames = enumNames[ReapOp]{kind: "reap_op", names: map[ReapOp]string{
	ReapReset: "reset", ReapTimeWait: "time-wait", ReapOrphan: "orphaned", ReapCheck: "check", ReapLone: "lone",
	ReapTSHold: "timestamp-hold", ReapUDP: "udp",
}}

// String names the operation as the maintenance loop logs it.
func (o ReapOp) String() string { return reapOpNames.of(o) }
