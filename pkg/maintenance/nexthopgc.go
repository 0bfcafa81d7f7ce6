package maintenance

import "github.com/xlbproject/xlb/pkg/dataplane"

// nextHopRefs collects, for Options.NextHopGC, the next-hop slots
// (FlowValue.Nexthop) named by the entries the walk reads, over a window
// of whole passes.
//
// Why a whole pass is enough (the issue's "next hops that follow the
// network"; bpf/layout.h struct nexthop): every entry in the map when the
// window opens and still there when it closes is read by one of its
// passes, so its slot is in the set. An entry created during the window may
// be missed by the walk, but the data path stamps the slot it names
// (nexthop.used) at pair creation, later than since. So a slot that is
// neither in the set nor used since the window opened is named by no entry,
// and the hook may free it (dataplane.FreeNextHops, which re-checks the
// stamp in the kernel just before each free, so a SYN that names the slot
// after this decision keeps it). A packet whose slot was freed anyway
// looks its next hop up again. Stale slots (a changed route, a failed
// neighbour) are collected the same way once no entry names them.
//
// A window ends with the first pass that ends at least a pass length
// (passCycles) after it opened: a small table, walked whole every cycle,
// is collected at the pace of a large one, not every cycle.
type nextHopRefs struct {
	bits   []uint64 // dataplane.MaxNextHops bits: slot id i is bit i%64 of word i/64
	since  uint32   // clock (low 32 bits) of the window's first cycle
	open   bool     // a window is collecting
	ready  bool     // the window is complete: hand it to the hook
	cycles uint64   // cycles since the window opened, that one included
}

func newNextHopRefs() *nextHopRefs {
	return &nextHopRefs{bits: make([]uint64, (int(dataplane.MaxNextHops)+63)/64)}
}

// begin opens a window at now, unless one is open.
func (r *nextHopRefs) begin(now dataplane.Jiffies) {
	if !r.open {
		r.open, r.since, r.cycles = true, now.Low32(), 0
	}
}

// mark records that an entry names slot id. Ids outside the slots name
// none (they cannot keep a slot).
func (r *nextHopRefs) mark(id uint32) {
	if id < uint32(dataplane.MaxNextHops) {
		r.bits[id/64] |= 1 << (id % 64)
	}
}

// reset empties the set and closes the window.
func (r *nextHopRefs) reset() {
	clear(r.bits)
	r.open, r.ready = false, false
}

// collectNextHops hands a complete window to Options.NextHopGC, if one is
// ready. A failure is logged, not a cycle failure: the slots stay claimed
// and the next window tries again.
func (l *Loop) collectNextHops() {
	r := l.walk.refs
	if r == nil || !r.ready {
		return
	}
	err := l.o.NextHopGC(r.bits, r.since)
	r.reset()
	if err != nil {
		l.log.WithError(err).Warn("maintenance: next-hop garbage collection failed; unused next-hop slots stay claimed until a later pass frees them")
	}
}
