package dataplane

import (
	"fmt"
)

// Counters are the data path's global counters, summed over CPUs. Every
// field is monotonic while the program stays loaded.
type Counters struct {
	// Actions counts XDP verdicts by action: index 0 aborted (never
	// expected), 1 drop, 2 pass, 3 tx, 4 redirect.
	Actions [5]uint64
	// PairsCreated counts connection pairs installed (seed "New connections").
	PairsCreated uint64
	// SNATExhausted counts SYNs answered with RST because no SNAT port was
	// free within the bounded probes.
	SNATExhausted uint64
	// TableFull counts SYNs answered with RST because the flow map was full.
	TableFull uint64
	// NoBackend counts SYNs answered with RST because no backend was routable.
	NoBackend uint64
	// FIBMiss counts SYNs dropped because the backend's next hop was unresolved.
	FIBMiss uint64
	// SYNReused counts retransmitted SYNs that reused a live pair.
	SYNReused uint64
	// PairsReplaced counts terminal pairs replaced by a new SYN on their tuple.
	PairsReplaced uint64
	// InvariantViolations counts FIN/RST packets whose entry had no valid counterpart.
	InvariantViolations uint64
	// Closed counts connections that became terminal, by initiator and reason
	// (DESIGN §4 counting rule): [client FIN, backend FIN, client RST, backend RST].
	ClosedClientFIN, ClosedBackendFIN, ClosedClientRST, ClosedBackendRST uint64
	// ShutdownResets counts RSTs sent while the shutdown flag was set.
	ShutdownResets uint64
	// TTLExceeded counts packets passed to the stack because their TTL would expire.
	TTLExceeded uint64
}

// Counters reads and sums the per-CPU counters.
func (d *Dataplane) Counters() (Counters, error) {
	var raw [xlbXlbCounterXLB_C_MAX]uint64
	var per []uint64
	for i := range raw {
		if err := d.objs.XlbCounters.Lookup(uint32(i), &per); err != nil {
			return Counters{}, fmt.Errorf("dataplane: read counter %d: %w", i, err)
		}
		for _, v := range per {
			raw[i] += v
		}
	}
	var c Counters
	copy(c.Actions[:], raw[:5])
	c.PairsCreated = raw[xlbXlbCounterXLB_C_PAIRS_CREATED]
	c.SNATExhausted = raw[xlbXlbCounterXLB_C_SNAT_EXHAUSTED]
	c.TableFull = raw[xlbXlbCounterXLB_C_TABLE_FULL]
	c.NoBackend = raw[xlbXlbCounterXLB_C_NO_BACKEND]
	c.FIBMiss = raw[xlbXlbCounterXLB_C_FIB_MISS]
	c.SYNReused = raw[xlbXlbCounterXLB_C_SYN_REUSED]
	c.PairsReplaced = raw[xlbXlbCounterXLB_C_PAIRS_REPLACED]
	c.InvariantViolations = raw[xlbXlbCounterXLB_C_INVARIANT]
	c.ClosedClientFIN = raw[xlbXlbCounterXLB_C_CLOSED_CLIENT_FIN]
	c.ClosedBackendFIN = raw[xlbXlbCounterXLB_C_CLOSED_BACKEND_FIN]
	c.ClosedClientRST = raw[xlbXlbCounterXLB_C_CLOSED_CLIENT_RST]
	c.ClosedBackendRST = raw[xlbXlbCounterXLB_C_CLOSED_BACKEND_RST]
	c.ShutdownResets = raw[xlbXlbCounterXLB_C_SHUTDOWN_RESETS]
	c.TTLExceeded = raw[xlbXlbCounterXLB_C_TTL_EXCEEDED]
	return c, nil
}

// BackendStats are one backend's data-path counters, summed over CPUs.
// Bytes are IPv4 bytes (header included) as forwarded.
type BackendStats struct {
	SentPackets     uint64 // client -> backend
	SentBytes       uint64
	ReceivedPackets uint64 // backend -> client
	ReceivedBytes   uint64
	Opened          uint64 // pairs created toward this backend
}

// BackendStats reads the counters of the given backend ids: two slots per
// backend, one per direction (bpf/layout.h struct backend_stats).
func (d *Dataplane) BackendStats(ids []uint32) (map[uint32]BackendStats, error) {
	out := make(map[uint32]BackendStats, len(ids))
	var per []xlbBackendStats
	for _, id := range ids {
		if id >= MaxBackends {
			return nil, fmt.Errorf("dataplane: backend id %d out of range", id)
		}
		var s BackendStats
		for _, dir := range []Direction{DirClient, DirBackend} {
			slot := id*2 + uint32(dir)
			if err := d.objs.XlbBackendStats.Lookup(slot, &per); err != nil {
				return nil, fmt.Errorf("dataplane: read backend %d stats: %w", id, err)
			}
			for _, p := range per {
				if dir == DirClient {
					s.SentPackets += p.Packets
					s.SentBytes += p.Bytes
					s.Opened += p.Opened
				} else {
					s.ReceivedPackets += p.Packets
					s.ReceivedBytes += p.Bytes
				}
			}
		}
		out[id] = s
	}
	return out, nil
}
