package maintenance

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

func popAll(s *schedule, now dataplane.Jiffies) []dataplane.Jiffies {
	var out []dataplane.Jiffies
	s.popDue(now, func(d due) { out = append(out, d.deadline) })
	return out
}

// Requests come out earliest first, whether they arrived in order (the
// FIFO) or not (the heap), and only once due.
func TestScheduleOrder(t *testing.T) {
	s := newSchedule(1 << 20)
	rng := rand.New(rand.NewPCG(1, 2))
	var want []dataplane.Jiffies
	for i := range 10000 {
		d := dataplane.Jiffies(1000 + i)
		if i%7 == 0 {
			d -= dataplane.Jiffies(rng.IntN(50)) // late: posted by another CPU
		}
		if !s.add(due{deadline: d}) {
			t.Fatal("schedule refused a request below its limit")
		}
		want = append(want, d)
	}
	if len(s.late) == 0 {
		t.Fatal("no request went to the heap")
	}
	slices.Sort(want)
	var got []dataplane.Jiffies
	for now := dataplane.Jiffies(900); now <= 11100; now += 100 {
		for _, d := range popAll(&s, now) {
			if d > now {
				t.Fatalf("request due at %d popped at %d", d, now)
			}
			got = append(got, d)
		}
	}
	if !slices.Equal(got, want) || s.Len() != 0 {
		t.Fatalf("popped %d requests (out of order: %v), %d left", len(got), !slices.IsSorted(got), s.Len())
	}
}

// A schedule never holds more than its limit, and gives the memory a
// flood took back once it has drained.
func TestScheduleBoundedUnderFlood(t *testing.T) {
	const limit = 100_000
	s := newSchedule(limit)
	refused := 0
	for i := range 3 * limit {
		if !s.add(due{deadline: dataplane.Jiffies(i)}) {
			refused++
		}
		if s.Len() > limit {
			t.Fatalf("%d requests held, limit %d", s.Len(), limit)
		}
	}
	if refused != 2*limit {
		t.Fatalf("%d refused, want %d", refused, 2*limit)
	}
	if got := popAll(&s, 3*limit); len(got) != limit {
		t.Fatalf("popped %d, want %d", len(got), limit)
	}
	if cap(s.fifo) > minCompact || cap(s.late) > minCompact {
		t.Fatalf("drained schedule keeps capacity %d/%d", cap(s.fifo), cap(s.late))
	}
	// Steady state: as many in as out, the FIFO does not grow.
	for i := range 50 * minCompact {
		s.add(due{deadline: dataplane.Jiffies(4*limit + i)})
		if i >= minCompact {
			popAll(&s, dataplane.Jiffies(4*limit+i-minCompact))
		}
	}
	if s.Len() > minCompact+1 || cap(s.fifo) > 8*minCompact {
		t.Fatalf("steady state: %d held, capacity %d", s.Len(), cap(s.fifo))
	}
}
