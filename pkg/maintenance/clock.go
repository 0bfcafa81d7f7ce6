package maintenance

import (
	"sync"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// Clock tells the maintenance loop what time it is on the data path's clock
// (jiffies, the clock flow entries store last_seen and closed_at in).
type Clock interface {
	Now() (dataplane.Jiffies, error)
}

// KernelClock is the real clock: the data path's own jiffies, read through
// dp.KernelNow.
func KernelClock(dp *dataplane.Dataplane) Clock { return kernelClock{dp} }

type kernelClock struct{ dp *dataplane.Dataplane }

func (c kernelClock) Now() (dataplane.Jiffies, error) { return c.dp.KernelNow() }

// ManualClock is a clock that only moves when told to (tests). Safe for
// concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now dataplane.Jiffies
}

// NewManualClock returns a clock reading start.
func NewManualClock(start dataplane.Jiffies) *ManualClock { return &ManualClock{now: start} }

// Now returns the current reading.
func (c *ManualClock) Now() (dataplane.Jiffies, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now, nil
}

// Set makes the clock read j.
func (c *ManualClock) Set(j dataplane.Jiffies) {
	c.mu.Lock()
	c.now = j
	c.mu.Unlock()
}

// Add moves the clock forward by j.
func (c *ManualClock) Add(j dataplane.Jiffies) {
	c.mu.Lock()
	c.now += j
	c.mu.Unlock()
}

// OffsetClock is a base clock plus an offset that only grows (end-to-end
// tests: real traffic keeps stamping entries with the kernel's clock while
// the test jumps the loop's notion of now forward past time-wait or the
// orphan TTL). Safe for concurrent use.
type OffsetClock struct {
	base Clock
	mu   sync.Mutex
	off  dataplane.Jiffies
}

// NewOffsetClock returns base with a zero offset.
func NewOffsetClock(base Clock) *OffsetClock { return &OffsetClock{base: base} }

// Now returns the base reading plus the offset.
func (c *OffsetClock) Now() (dataplane.Jiffies, error) {
	j, err := c.base.Now()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return j + c.off, nil
}

// Add grows the offset by j.
func (c *OffsetClock) Add(j dataplane.Jiffies) {
	c.mu.Lock()
	c.off += j
	c.mu.Unlock()
}

// age is how long ago t was at now; 0 when t is not in the past (an entry
// refreshed after now was read, or a test clock set behind the kernel's).
func age(now, t dataplane.Jiffies) dataplane.Jiffies {
	if now > t {
		return now - t
	}
	return 0
}
