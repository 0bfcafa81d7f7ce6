package maintenance

import (
	"sort"
	"time"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// Sample is what one maintenance cycle saw and did. The loop publishes one
// per cycle (Options.OnSample), failed cycles included once a cycle has
// succeeded, and never modifies it afterwards; readers must not modify it
// either (Backends included). The status API and the metrics read only
// samples, never BPF maps (DESIGN §3, §4). Samples stop only when the loop
// stops or a cycle hangs, so a sample's age measures the loop's liveness,
// not its success.
//
// Pair counts (Active, TimeWait, Resetting, per backend) describe the flow
// map after the cycle's removals. They are differences of counters (pairs
// opened, closed and replaced by the data path; removed by the reaper), read
// after the cycle's removals, not a recount of the map.
//
// A failed cycle's sample (Maintenance.Failing) carries the pair figures of
// the latest successful cycle: Cycle, Now, FlowEntries, Active, TimeWait,
// Resetting, Lone, Opened, Closed and Backends (per-backend counts and
// statistics) are that cycle's. Opened and Closed stay with the pair
// counts so that a connection still leaves Active and enters Closed in the
// same sample (DESIGN §4 counting rule) and the per-backend shares still
// add up. Counters, the data path's raw event counters, are read afresh
// when the read works, else carried too (CountersStale). Time, Duration,
// Removed, Orphaned, InvariantRepairs and Maintenance always describe the
// failed cycle itself.
type Sample struct {
	// Time is the wall-clock time at the end of the cycle, failed or not.
	Time time.Time
	// Cycle numbers successful cycles from 1: a failed cycle's sample
	// repeats the number of the successful cycle whose pair figures it
	// carries. Maintenance.Errors counts the failed ones.
	Cycle uint64
	// Now is the data path clock reading (jiffies) the pair figures were
	// decided with (the latest successful cycle's).
	Now dataplane.Jiffies
	// Duration is the cycle's wall-clock duration, failed or not.
	Duration time.Duration

	// UDP are the UDP pairs' figures (issue 31), instance-wide; Services
	// the per-service ones, by service id (UDP services only).
	UDP      UDPSample
	Services []ServiceSample

	// Maintenance is the loop's health as of this cycle: failed cycles
	// since the loop started and the current spell of failures.
	Maintenance Maintenance
	// CountersStale is true in a failed cycle's sample whose counter read
	// failed as well: Counters are then the previous sample's.
	CountersStale bool

	// FlowEntries is the number of directional entries in the flow map
	// after the cycle: two per connection pair plus the held reverse
	// entries the hold schedule waits for (lone entries awaiting repair
	// aside); FlowCapacity is the flow map's max_entries. Both are
	// entries, not pairs.
	FlowEntries  uint64
	FlowCapacity uint64

	// Active is the number of non-terminal pairs (open or half-closed),
	// embryonic ones included.
	Active uint64
	// TimeWait is the number of pairs that saw both FINs and are kept
	// for the 60 s TCP time-wait interval.
	TimeWait uint64
	// Resetting is the number of pairs that saw a RST and are removed on
	// the next cycle.
	Resetting uint64
	// Backends holds per-member pair counts, data-path statistics and
	// handshake histograms, sorted by member id: every member of
	// Options.Members plus any member with pairs.
	Backends []BackendSample

	// Counters are the data path's global counters, read after the
	// cycle's map read (so every closure the read saw is included).
	Counters dataplane.Counters
	// Opened is the number of pairs the data path created
	// (Counters.PairsCreated).
	Opened uint64
	// Closed counts connections by initiator and reason, once each, when
	// the data path saw them become terminal (DESIGN §4 counting rule).
	Closed Closed
	// Orphaned counts pairs removed after OrphanTTL without a packet in
	// either direction, since the flow map was created. Not part of Closed.
	Orphaned uint64
	// EmbryonicExpired counts pairs removed EmbryonicTTL after their SYN
	// because the client never ACKed the backend's SYN-ACK, since the flow
	// map was created (xlb_connections_embryonic_expired_total). Not part
	// of Closed.
	EmbryonicExpired uint64
	// InvariantRepairs counts lone entries (counterpart missing or of
	// another generation) removed since the flow map was created. The
	// data path counts FIN/RST packets on lone entries separately
	// (Counters.InvariantViolations).
	InvariantRepairs uint64
	// Lone is the number of lone entries this cycle's checks found; the
	// next cycle removes each one that is still lone.
	Lone uint64

	// Removed is what this cycle removed.
	Removed Removed
	// Walk is the state of the incremental walk after this cycle.
	Walk WalkStatus
	// CloseEvents describes the close events the loop has read.
	CloseEvents CloseEvents
}

// CloseEvents describes the close event stream from the data path.
type CloseEvents struct {
	// Path is how events arrive: dataplane.PathRingBuffer or
	// dataplane.PathPerCPUQueue.
	Path string
	// Read counts events read since the loop started.
	Read uint64
	// Lost counts events that never arrived: the ring buffer was full
	// (Counters.CloseEventsLost) or a per-CPU queue slot was overwritten.
	// The walk finds those pairs instead, within one pass.
	Lost uint64
	// TimeWaitScheduled is the number of pairs waiting for the end of
	// their time-wait.
	TimeWaitScheduled uint64
	// EmbryonicScheduled is the number of new pairs (dataplane.CloseOpen)
	// waiting for their embryonic deadline, established ones included
	// (the deadline only checks them).
	EmbryonicScheduled uint64
	// HoldScheduled is the number of held reverse entries
	// (dataplane.CloseHold) waiting for the end of their SNAT hold
	// (SNATHold after their pair's close).
	HoldScheduled uint64
	// UDPScheduled is the number of UDP pairs waiting for their next
	// re-check (dataplane.ReapUDP): one per live UDP pair, unless its
	// event was lost or found the schedule full (the walk has it then).
	UDPScheduled uint64
	// Unscheduled counts events since the loop started that found their
	// schedule full: each schedule holds at most as many requests as the
	// flow map holds pairs (entries, for holds), so a SYN flood cannot
	// grow it beyond the table. The walk applies the same rules and finds
	// those pairs within a pass.
	Unscheduled uint64
}

// Maintenance is the health of the maintenance loop as of one sample. A
// spell is a run of consecutive failed cycles; it ends with the next
// successful cycle. Cycles abandoned because their context ended (the loop
// stopping) are neither failures nor successes.
type Maintenance struct {
	// Errors counts failed cycles since the loop started, this one
	// included (xlb_maintenance_errors_total).
	Errors uint64
	// ConsecutiveFailures is the length of the current spell, this cycle
	// included; 0 when this cycle succeeded.
	ConsecutiveFailures uint64
	// FailingSince is the end of the spell's first failed cycle (that
	// cycle's Sample.Time); zero when this cycle succeeded.
	FailingSince time.Time
	// LastError is this cycle's error text; "" when it succeeded.
	LastError string
}

// Failing reports whether the sample's cycle failed (a spell is under way).
func (m Maintenance) Failing() bool { return m.ConsecutiveFailures > 0 }

// Closed counts closed connections by initiator and reason.
type Closed struct {
	ClientFIN  uint64 // both FINs seen, the client's first
	BackendFIN uint64 // both FINs seen, the backend's first
	ClientRST  uint64 // reset by the client
	BackendRST uint64 // reset by the backend
}

// Total is the number of closed connections.
func (c Closed) Total() uint64 { return c.ClientFIN + c.BackendFIN + c.ClientRST + c.BackendRST }

// Removed counts one cycle's removals, in pairs except Repaired and Hold
// (entries).
type Removed struct {
	TimeWait  uint64 // pairs whose time-wait ended
	Reset     uint64 // RST pairs, on the cycle after the RST
	Orphaned  uint64 // idle pairs
	Embryonic uint64 // pairs never established, EmbryonicTTL after their SYN
	Hold      uint64 // held reverse entries whose SNAT hold ended
	// UDP counts UDP pairs removed by their timeout (UDPTimeout without
	// a reply, UDPStreamTimeout with one; Sample.UDP splits the totals
	// by state).
	UDP      uint64
	Repaired uint64 // lone entries
	// Kept counts removals the reaper refused on its re-check: a packet,
	// a close or a new pair moved the pair on after the decision. A pair
	// found established (or closed) at its embryonic deadline is the
	// usual case, not a refusal, and is not counted.
	Kept uint64
}

// Member is one backend of one service: its member id
// (0..dataplane.MaxMembers-1), which keys the data path's per-backend
// counter cells, and its address's backend id
// (0..dataplane.MaxBackends-1), which keys its timestamp state (DESIGN
// §9).
type Member struct {
	ID, Backend uint32
}

// BackendSample is one member's share of a sample: one backend of one
// service.
type BackendSample struct {
	// ID is the member id (0..dataplane.MaxMembers-1).
	ID uint32
	// UDPActive and UDPOpened count the member's UDP pairs (issue 31):
	// live now, and created since the member id was taken.
	UDPActive, UDPOpened uint64
	// Backend is the address's backend id, whose timestamp state
	// Timestamps is; 0 (and Timestamps zero) for a member with pairs
	// that Options.Members does not list.
	Backend uint32
	// Active and TimeWait count this backend's pairs, as Sample.Active
	// and Sample.TimeWait do.
	Active   uint64
	TimeWait uint64
	// Stats are the backend's data-path counters (packets, bytes, pairs
	// opened), summed over CPUs.
	Stats dataplane.BackendStats
	// Reaped are the reaper's removals of the member's pairs by reason
	// (orphaned, embryonic, ...), since the member id was last reset.
	Reaped dataplane.ReapedCounts
	// Handshake is the backend's handshake latency histogram, summed over
	// CPUs (dataplane.HandshakeHistograms: buckets not cumulative, bounds
	// dataplane.HandshakeBuckets), read with Stats.
	Handshake dataplane.Histogram
	// Timestamps is what the data path last saw of the backend
	// address's TCP timestamps (dataplane.BackendTimestamps, by backend
	// id), read with Stats.
	Timestamps dataplane.TimestampState
}

// Backend returns the sample of member id.
func (s *Sample) Backend(id uint32) (BackendSample, bool) {
	i := sort.Search(len(s.Backends), func(i int) bool { return s.Backends[i].ID >= id })
	if i < len(s.Backends) && s.Backends[i].ID == id {
		return s.Backends[i], true
	}
	return BackendSample{}, false
}

func closedOf(c dataplane.Counters) Closed {
	return Closed{ClientFIN: c.ClosedClientFIN, BackendFIN: c.ClosedBackendFIN, ClientRST: c.ClosedClientRST, BackendRST: c.ClosedBackendRST}
}

// UDPSample is the UDP pairs' instance-wide figures of a cycle (issue 31).
type UDPSample struct {
	Active    uint64 // live UDP pairs
	Unreplied uint64 // of them, without a reply yet
	Opened    uint64 // created, since the first pin
	// ExpiredUnreplied and ExpiredReplied count the pairs removed by
	// their timeout, without and with a reply.
	ExpiredUnreplied, ExpiredReplied uint64
	OverCap                          uint64 // first datagrams passed: the service's udp_unreplied_max was reached
	NoBackend                        uint64 // first datagrams passed: no routable backend
	FragsPassed                      uint64 // UDP fragments passed untouched
}

// ServiceSample is one UDP service's figures of a cycle (issue 31).
type ServiceSample struct {
	ID           uint16 // the service id
	UDPUnreplied uint64 // its pairs without a reply (xlb_udp_unreplied)
	UDPOverCap   uint64 // its first datagrams passed over its cap
}
