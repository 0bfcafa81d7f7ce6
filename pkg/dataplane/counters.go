package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// Counters are the data path's global counters, summed over CPUs. Every
// field is monotonic while the program stays loaded.
type Counters struct {
	// Actions counts XDP verdicts by action, indexed by the kernel's
	// enum xdp_action: 0 aborted (never expected), 1 drop, 2 pass, 3 tx,
	// 4 redirect.
	Actions [XDPActions]uint64
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
	// TTLExceeded counts balanced packets (and ICMP errors about pairs)
	// dropped because their TTL was 1 or less: they never create a pair
	// and are never forwarded.
	TTLExceeded uint64
	// CloseEventsLost counts close events the ring buffer had no room
	// for; the maintenance walk finds those pairs instead.
	CloseEventsLost uint64
	// RSTOutOfWindow counts RSTs dropped because their sequence number
	// was outside the receiver's window (RFC 5961 §3).
	RSTOutOfWindow uint64
	// RSTInexact counts RSTs forwarded without ending their pair: in the
	// receiver's window but not at its next expected sequence as the
	// data path knows it (RFC 5961 §3: the endpoint answers such a RST
	// with a challenge ACK, or, rarely, takes it when its own view is
	// ahead).
	RSTInexact uint64
	// PairGoneInFlight counts packets dropped because another CPU
	// replaced or reaped their pair while they were rewritten: what the
	// entry held may have been the new pair's (bpf/flow.h, stale
	// pointers). The sender retransmits.
	PairGoneInFlight uint64
	// SNATTakeovers counts SNAT ports taken over from a terminal pair
	// that left the backend no TIME_WAIT (the client closed first, or a
	// RST); the old pair is removed and counted as replaced.
	SNATTakeovers uint64
	// SNATTimewaitReuses counts SNAT ports held for a backend's TIME_WAIT
	// (a backend-first or simultaneous close of a pair that negotiated
	// timestamps) that a SYN with timestamps took once the reuse guard
	// had passed: the backend accepts it by its newer timestamps (RFC
	// 6191; bpf/tsopt.h). The old pair is removed, counted as replaced.
	SNATTimewaitReuses uint64
	// SNATFallbacks counts SYNs sent on to another routable backend
	// because the one picked had no free SNAT port (or no next hop).
	SNATFallbacks uint64
	// SchedFallbacks counts SYNs of a weighted round robin or Maglev
	// service that found no usable table and took the round robin pick.
	SchedFallbacks uint64
	// HoldDrops counts packets dropped on a held SNAT port: the backend's
	// TIME_WAIT side of a pair the client's new SYN replaced.
	HoldDrops uint64
	// ICMPToClient and ICMPToBackend count ICMP errors about a pair
	// translated through the NAT toward that side.
	ICMPToClient, ICMPToBackend uint64
	// NextHopRefreshes counts packets whose next-hop slot had been freed
	// or gone stale (a route or neighbour change) and that looked their
	// next hop up again.
	NextHopRefreshes uint64
	// NotOurs counts frames the data path would have looked at (to a
	// service's listen address, any port: the listen prefilter knows
	// addresses only; to a SNAT address's port range; or an ICMP error
	// about a pair) that were addressed to another MAC
	// than the ingress interface's, or to a group address: another
	// host's frames a switch or bridge flooded to this port. They pass
	// to the kernel untouched, which drops them (bpf/ours.h).
	NotOurs uint64
	// FragsForwarded counts IPv4 fragments of a pair forwarded: first
	// fragments (MF set, offset 0), rewritten as any segment, and later
	// ones that followed their first fragment (bpf/frag.h).
	FragsForwarded uint64
	// FragsPassed counts IPv4 TCP fragments to a service's listen
	// address or a SNAT address passed to the kernel untouched: a first
	// fragment of no pair or of a SYN (fragments never create a pair), a
	// later one whose first fragment was not forwarded in the last
	// XLB_FRAG_TTL_MS, or whose pair is gone.
	FragsPassed uint64
	// IPOptionsForwarded counts segments of a pair with IPv4 options
	// forwarded, the options copied unchanged.
	IPOptionsForwarded uint64
	// UDPPairsCreated counts UDP pairs created (PairsCreated counts TCP
	// pairs only).
	UDPPairsCreated uint64
	// UDPOverCap counts first datagrams of a UDP service passed to the
	// kernel because the service had udp_unreplied_max pairs without a
	// reply (ServiceCounters: per service).
	UDPOverCap uint64
	// UDPNoBackend counts first datagrams passed to the kernel because
	// their service had no routable backend (NoBackend counts the SYNs
	// answered with a RST).
	UDPNoBackend uint64
	// UDPFragsPassed counts fragments of UDP datagrams to a listen
	// address or a SNAT address, passed to the kernel untouched: UDP
	// fragments are not tracked.
	UDPFragsPassed uint64
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
	copy(c.Actions[:], raw[:len(c.Actions)])
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
	c.CloseEventsLost = raw[xlbXlbCounterXLB_C_CLOSE_EVENTS_LOST]
	c.RSTOutOfWindow = raw[xlbXlbCounterXLB_C_RST_OUT_OF_WINDOW]
	c.RSTInexact = raw[xlbXlbCounterXLB_C_RST_INEXACT]
	c.PairGoneInFlight = raw[xlbXlbCounterXLB_C_PAIR_GONE_IN_FLIGHT]
	c.SNATTakeovers = raw[xlbXlbCounterXLB_C_SNAT_TAKEOVERS]
	c.SNATTimewaitReuses = raw[xlbXlbCounterXLB_C_SNAT_TIMEWAIT_REUSES]
	c.SNATFallbacks = raw[xlbXlbCounterXLB_C_SNAT_FALLBACKS]
	c.SchedFallbacks = raw[xlbXlbCounterXLB_C_SCHED_FALLBACK]
	c.HoldDrops = raw[xlbXlbCounterXLB_C_HOLD_DROPS]
	c.ICMPToClient = raw[xlbXlbCounterXLB_C_ICMP_TO_CLIENT]
	c.ICMPToBackend = raw[xlbXlbCounterXLB_C_ICMP_TO_BACKEND]
	c.NextHopRefreshes = raw[xlbXlbCounterXLB_C_NEXTHOP_REFRESH]
	c.NotOurs = raw[xlbXlbCounterXLB_C_NOT_OURS]
	c.FragsForwarded = raw[xlbXlbCounterXLB_C_FRAGS_FORWARDED]
	c.FragsPassed = raw[xlbXlbCounterXLB_C_FRAGS_PASSED]
	c.IPOptionsForwarded = raw[xlbXlbCounterXLB_C_IP_OPTIONS_FORWARDED]
	c.UDPPairsCreated = raw[xlbXlbCounterXLB_C_UDP_PAIRS_CREATED]
	c.UDPOverCap = raw[xlbXlbCounterXLB_C_UDP_OVER_CAP]
	c.UDPNoBackend = raw[xlbXlbCounterXLB_C_UDP_NO_BACKEND]
	c.UDPFragsPassed = raw[xlbXlbCounterXLB_C_UDP_FRAGS_PASSED]
	return c, nil
}

// BackendStats are one backend's data-path counters, summed over CPUs.
// Bytes are IPv4 bytes (header included) as forwarded.
type BackendStats struct {
	SentPackets     uint64 // client -> backend
	SentBytes       uint64
	ReceivedPackets uint64 // backend -> client
	ReceivedBytes   uint64
	Opened          uint64 // TCP pairs created toward this backend
	// UDPOpened counts UDP pairs created toward this backend: the
	// backend_stats opened of its member's XLB_DIR_BACKEND slot (always 0
	// before layout 11).
	UDPOpened uint64
	ClosedFIN uint64 // pairs that became terminal with both FINs
	ClosedRST uint64 // pairs that became terminal with a RST
	// ClosedFINByBackend and ClosedRSTByBackend are the closures of
	// ClosedFIN and ClosedRST the backend initiated (its FIN first, its
	// RST); the rest the client did.
	ClosedFINByBackend uint64
	ClosedRSTByBackend uint64
	ReplacedFIN        uint64 // time-wait pairs a new SYN on their tuple removed
	ReplacedRST        uint64 // reset pairs a new SYN on their tuple removed
}

// AllBackendStats reads the counters of every member id (a service's
// backend), indexed by member id (MaxMembers of them): one slot per
// member id and direction (bpf/layout.h struct
// backend_stats), and the pair events (enum xlb_pair_event). Each map is
// read with BPF_MAP_LOOKUP_BATCH where the host allows it (FeatureBatchOps),
// else key by key.
func (d *Dataplane) AllBackendStats() ([]BackendStats, error) {
	stats, ncpu, err := readArray[xlbBackendStats](d, d.objs.XlbBackendStats, int(xlbXlbLimitsXLB_BACKEND_STATS_SLOTS))
	if err != nil {
		return nil, fmt.Errorf("dataplane: read backend stats: %w", err)
	}
	events, _, err := readArray[uint64](d, d.objs.XlbPairEvents, int(xlbXlbLimitsXLB_PAIR_EVENT_CELLS))
	if err != nil {
		return nil, fmt.Errorf("dataplane: read backend pair events: %w", err)
	}
	out := make([]BackendStats, MaxMembers)
	for slot := range int(xlbXlbLimitsXLB_BACKEND_STATS_SLOTS) {
		s := &out[slot/dirs]
		for _, p := range stats[slot*ncpu : (slot+1)*ncpu] {
			if Direction(slot%dirs) == DirClient {
				s.SentPackets += p.Packets
				s.SentBytes += p.Bytes
				s.Opened += p.Opened
			} else {
				s.ReceivedPackets += p.Packets
				s.ReceivedBytes += p.Bytes
				s.UDPOpened += p.Opened
			}
		}
	}
	sum := func(idx int) (n uint64) {
		for _, v := range events[idx*ncpu : (idx+1)*ncpu] {
			n += v
		}
		return n
	}
	for id := range out {
		base := id * int(xlbXlbLimitsXLB_PAIR_EVENTS)
		out[id].ClosedFINByBackend = sum(base + int(xlbXlbPairEventXLB_PAIR_CLOSED_FIN_BACKEND))
		out[id].ClosedRSTByBackend = sum(base + int(xlbXlbPairEventXLB_PAIR_CLOSED_RST_BACKEND))
		out[id].ClosedFIN = sum(base+int(xlbXlbPairEventXLB_PAIR_CLOSED_FIN)) + out[id].ClosedFINByBackend
		out[id].ClosedRST = sum(base+int(xlbXlbPairEventXLB_PAIR_CLOSED_RST)) + out[id].ClosedRSTByBackend
		out[id].ReplacedFIN = sum(base + int(xlbXlbPairEventXLB_PAIR_REPLACED_FIN))
		out[id].ReplacedRST = sum(base + int(xlbXlbPairEventXLB_PAIR_REPLACED_RST))
	}
	return out, nil
}

// readArray reads keys 0..n-1 of an array map in one slice: ncpu values
// per key, key by key, for a per-CPU array (ncpu is the possible CPUs),
// one per key otherwise (ncpu is 1). It uses BPF_MAP_LOOKUP_BATCH where
// the host allows it (FeatureBatchOps), else one lookup per key.
func readArray[V any](d *Dataplane, m *ebpf.Map, n int) (vals []V, ncpu int, err error) {
	perCPU := m.Type() == ebpf.PerCPUArray
	ncpu = 1
	if perCPU {
		if ncpu, err = ebpf.PossibleCPU(); err != nil {
			return nil, 0, err
		}
	}
	out := make([]V, n*ncpu)
	if d.featureOn(FeatureBatchOps) {
		keys := make([]uint32, n)
		var cursor ebpf.MapBatchCursor
		for got := 0; got < n; {
			k, err := m.BatchLookup(&cursor, keys[got:], out[got*ncpu:], nil)
			got += k
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			if err != nil {
				return nil, 0, err
			}
		}
		return out, ncpu, nil
	}
	var one []V
	for i := range n {
		if !perCPU {
			err = m.Lookup(uint32(i), &out[i])
		} else if err = m.Lookup(uint32(i), &one); err == nil {
			copy(out[i*ncpu:], one)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	return out, ncpu, nil
}

// UDPUnreplied reads each UDP service's pairs without a reply
// (xlb_udp_unreplied), indexed by service id (MaxServices of them).
func (d *Dataplane) UDPUnreplied() ([]uint64, error) {
	vals, _, err := readArray[uint64](d, d.objs.XlbUdpUnreplied, MaxServices)
	if err != nil {
		return nil, fmt.Errorf("dataplane: read the UDP unreplied counts: %w", err)
	}
	return vals, nil
}

// ServiceCounters are one service id's data-path counters, summed over
// CPUs (xlb_svc_counters).
type ServiceCounters struct {
	// UDPOverCap counts first datagrams passed to the kernel because
	// the service had udp_unreplied_max pairs without a reply.
	UDPOverCap uint64
}

// ServiceCounters reads the per-service counters, indexed by service id
// (MaxServices of them).
func (d *Dataplane) ServiceCounters() ([]ServiceCounters, error) {
	vals, ncpu, err := readArray[uint64](d, d.objs.XlbSvcCounters, int(xlbXlbLimitsXLB_SVC_COUNTER_CELLS))
	if err != nil {
		return nil, fmt.Errorf("dataplane: read the service counters: %w", err)
	}
	out := make([]ServiceCounters, MaxServices)
	for id := range out {
		cell := id*int(xlbXlbLimitsXLB_SVC_COUNTERS) + int(xlbXlbSvcCounterXLB_SVC_UDP_OVER_CAP)
		for _, v := range vals[cell*ncpu : (cell+1)*ncpu] {
			out[id].UDPOverCap += v
		}
	}
	return out, nil
}

// Generation reads the pair generation counter (xlb_shared): the
// generation the last pair created got. Pairs created later have
// generations after it (wrap-safe: int32(gen - g) > 0).
func (d *Dataplane) Generation() (uint64, error) {
	var st xlbXlbState
	if err := d.objs.XlbShared.Lookup(uint32(0), &st); err != nil {
		return 0, fmt.Errorf("dataplane: read the pair generation: %w", err)
	}
	return st.Generation, nil
}
