package maintenance

import (
	"container/heap"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// due is a pair whose time-wait ends at deadline.
type due struct {
	deadline dataplane.Jiffies
	key      dataplane.FlowKey
	gen      uint32
}

// schedule holds the pairs in time-wait, earliest deadline first. Close
// events arrive nearly in time order, so pushes are cheap; a heap keeps the
// order exact when the per-CPU queues interleave.
type schedule []due

func (s schedule) Len() int           { return len(s) }
func (s schedule) Less(i, j int) bool { return s[i].deadline < s[j].deadline }
func (s schedule) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *schedule) Push(x any)        { *s = append(*s, x.(due)) }
func (s *schedule) Pop() any {
	old := *s
	d := old[len(old)-1]
	*s = old[:len(old)-1]
	return d
}

func (s *schedule) add(d due) { heap.Push(s, d) }

// popDue removes and passes to fn every pair whose deadline is at or before now.
func (s *schedule) popDue(now dataplane.Jiffies, fn func(due)) {
	for s.Len() > 0 && (*s)[0].deadline <= now {
		fn(heap.Pop(s).(due))
	}
}
