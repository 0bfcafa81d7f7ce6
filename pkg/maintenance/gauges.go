package maintenance

import (
	"fmt"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// gauges are the pair counts of one moment, from counters only: what the
// data path opened, closed and replaced per member, minus what the reaper
// removed per member (bpf/layout.h enum xlb_reaped_reason has the
// formulas). A pair is accounted for by whoever deletes its forward entry,
// so each pair leaves exactly one gauge exactly once: a pair removed
// embryonic_ttl after its SYN leaves the active gauge (ReapedCounts.
// Embryonic). A held reverse entry (XLB_F_HOLD) is what a replaced pair
// left behind; the replacement accounted for the pair, so its removal
// counts nowhere. A lone reverse entry that outlives two checks lost its
// forward entry outside XLB (every other deletion XLB makes removes a pair
// whole, in one program run): its pair was never accounted, and leaves the
// active gauge when it is repaired.
//
// UDP pairs (issue 31) have their own terms: the data path counts a UDP
// pair's creation in its member's backend-side slot (BackendStats.
// UDPOpened), and the reaper its removal by state or as a lone entry, so
// udp_active = opened − expired unreplied − expired replied − lone; the
// unreplied ones are the per-service counts the data path keeps exactly
// (xlb_udp_unreplied).
type gauges struct {
	active, timewait, resetting  uint64
	orphaned, embryonic, repairs uint64 // the reaper's totals
	per                          []BackendSample

	udpActive                      uint64
	udpExpUnreplied, udpExpReplied uint64 // the reaper's totals
	services                       []ServiceSample
	udpUnreplied                   uint64 // the services' sum
}

// readGauges reads the reaper's counts first and the data path's after, so
// a removal is never seen before the closure it follows: a gauge read
// between the two can only be high, never below zero. The services'
// unreplied UDP counts are read last, for the same reason (a reply or a
// removal after the stats were read lowers them; it cannot raise them).
func readGauges(dp *dataplane.Dataplane, want func() []Member) (gauges, error) {
	var g gauges
	reaped, err := dp.AllReapedCounts()
	if err != nil {
		return g, fmt.Errorf("maintenance: %w", err)
	}
	stats, err := dp.AllBackendStats()
	if err != nil {
		return g, fmt.Errorf("maintenance: %w", err)
	}
	handshakes, err := dp.HandshakeHistograms()
	if err != nil {
		return g, fmt.Errorf("maintenance: %w", err)
	}
	timestamps, err := dp.BackendTimestamps()
	if err != nil {
		return g, fmt.Errorf("maintenance: %w", err)
	}
	unreplied, err := dp.UDPUnreplied()
	if err != nil {
		return g, fmt.Errorf("maintenance: %w", err)
	}
	overCap, err := dp.ServiceCounters()
	if err != nil {
		return g, fmt.Errorf("maintenance: %w", err)
	}
	// the listed members' backend ids, by member id
	listed := make(map[uint32]uint32)
	if want != nil {
		for _, m := range want() {
			listed[m.ID] = m.Backend
		}
	}
	for id := range stats {
		st, r := stats[id], reaped[id]
		b := BackendSample{
			ID:        uint32(id),
			Active:    sub(st.Opened, st.ClosedFIN, st.ClosedRST, r.Orphaned, r.LoneActive, r.LoneReverse, r.Embryonic),
			TimeWait:  sub(st.ClosedFIN, r.TimeWait, st.ReplacedFIN, r.LoneTimeWait),
			Stats:     st,
			Reaped:    r,
			Handshake: handshakes[id],
			UDPActive: sub(st.UDPOpened, r.UDPUnreplied, r.UDPReplied, r.LoneUDP),
			UDPOpened: st.UDPOpened,
		}
		bid, isListed := listed[uint32(id)]
		if isListed {
			b.Backend = bid
			if int(bid) < len(timestamps) {
				b.Timestamps = timestamps[bid]
			}
		}
		resetting := sub(st.ClosedRST, r.Reset, st.ReplacedRST, r.LoneReset)
		g.active += b.Active
		g.timewait += b.TimeWait
		g.resetting += resetting
		g.orphaned += r.Orphaned
		g.embryonic += r.Embryonic
		g.repairs += r.Lone()
		g.udpActive += b.UDPActive
		g.udpExpUnreplied += r.UDPUnreplied
		g.udpExpReplied += r.UDPReplied
		if isListed || b.Active+b.TimeWait+resetting+b.UDPActive > 0 {
			g.per = append(g.per, b)
		}
	}
	for id, n := range unreplied {
		var over uint64
		if id < len(overCap) {
			over = overCap[id].UDPOverCap
		}
		if n == 0 && over == 0 {
			continue // a TCP service, or a UDP one without figures yet
		}
		g.services = append(g.services, ServiceSample{ID: uint16(id), UDPUnreplied: n, UDPOverCap: over})
		g.udpUnreplied += n
	}
	return g, nil
}

// sub is a minus the rest, 0 when that would be negative.
func sub(a uint64, rest ...uint64) uint64 {
	for _, r := range rest {
		if r >= a {
			return 0
		}
		a -= r
	}
	return a
}
