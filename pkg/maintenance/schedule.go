package maintenance

import (
	"container/heap"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// due is a reap request that falls due at deadline.
type due struct {
	deadline dataplane.Jiffies
	key      dataplane.FlowKey
	gen      uint32
}

// schedule holds the requests of one rule (the time-wait of closed pairs,
// the embryonic deadline of new pairs, the end of a SNAT port hold),
// earliest deadline first, at most limit of them.
//
// Events arrive nearly in time order and every request of a rule waits
// the same duration, so deadlines arrive nearly sorted: they queue in a
// FIFO, O(1) each. One that arrives earlier than the FIFO's last (events
// of two CPUs interleaved by the ring buffer or the per-CPU queues) goes to
// a heap instead, so the order stays exact.
//
// The limit bounds the memory a flood of events can take: it is the number
// of pairs (or entries) the flow map holds, so the schedule never holds
// more entries than the table has room for, whatever the event rate. An
// event that finds the schedule full is not scheduled (add returns false):
// the walk, which applies every rule on its own, finds its pair within a
// pass.
type schedule struct {
	limit int
	fifo  []due // fifo[head:] in deadline order
	head  int
	late  dueHeap // requests that arrived out of order
}

func newSchedule(limit int) schedule { return schedule{limit: max(1, limit)} }

// Len is the number of requests waiting.
func (s *schedule) Len() int { return len(s.fifo) - s.head + len(s.late) }

// add schedules d, unless the schedule is full.
func (s *schedule) add(d due) bool {
	if s.Len() >= s.limit {
		return false
	}
	if n := len(s.fifo); n == s.head || s.fifo[n-1].deadline <= d.deadline {
		s.fifo = append(s.fifo, d)
	} else {
		heap.Push(&s.late, d)
	}
	return true
}

// popDue removes and passes to fn every request whose deadline is at or
// before now, earliest first.
func (s *schedule) popDue(now dataplane.Jiffies, fn func(due)) {
	for {
		fifoDue := s.head < len(s.fifo) && s.fifo[s.head].deadline <= now
		lateDue := len(s.late) > 0 && s.late[0].deadline <= now
		switch {
		case fifoDue && (!lateDue || s.fifo[s.head].deadline <= s.late[0].deadline):
			fn(s.fifo[s.head])
			s.head++
		case lateDue:
			fn(heap.Pop(&s.late).(due))
		default:
			s.compact()
			return
		}
	}
}

// minCompact is the fewest popped slots worth moving the FIFO for, and
// the capacity below which neither queue gives memory back.
const minCompact = 1024

// compact drops the FIFO's popped slots once they are at least half of it
// (or all of it), and gives memory back once a queue is mostly unused
// (after a flood).
func (s *schedule) compact() {
	live := len(s.fifo) - s.head
	if s.head > 0 && s.head >= len(s.fifo)/2 && (live == 0 || s.head >= minCompact) {
		if cap(s.fifo) > minCompact && live < cap(s.fifo)/4 {
			s.fifo = append(make([]due, 0, max(minCompact, 2*live)), s.fifo[s.head:]...)
		} else {
			s.fifo = s.fifo[:copy(s.fifo, s.fifo[s.head:])]
		}
		s.head = 0
	}
	if cap(s.late) > minCompact && len(s.late) < cap(s.late)/4 {
		s.late = append(make(dueHeap, 0, max(minCompact, 2*len(s.late))), s.late...)
	}
}

// dueHeap is a min-heap of requests by deadline (container/heap).
type dueHeap []due

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}
