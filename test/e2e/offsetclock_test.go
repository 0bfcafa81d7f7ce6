package e2e

import (
	"sync"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// offsetClock is a maintenance.Clock reading a base clock plus an offset
// that only grows: real traffic keeps stamping flow entries with the
// kernel's clock while the test jumps the loop's notion of now forward
// past time-wait or the orphan TTL. Safe for concurrent use.
type offsetClock struct {
	base maintenance.Clock
	mu   sync.Mutex
	off  dataplane.Jiffies
}

// newOffsetClock returns base with a zero offset.
func newOffsetClock(base maintenance.Clock) *offsetClock { return &offsetClock{base: base} }

// Now returns the base reading plus the offset.
func (c *offsetClock) Now() (dataplane.Jiffies, error) {
	j, err := c.base.Now()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return j + c.off, nil
}

// Add grows the offset by j.
func (c *offsetClock) Add(j dataplane.Jiffies) {
	c.mu.Lock()
	c.off += j
	c.mu.Unlock()
}
