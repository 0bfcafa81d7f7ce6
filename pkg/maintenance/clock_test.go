package maintenance_test

import (
	"sync"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// manualClock is a maintenance.Clock that only moves when told to, so a
// test can jump past time-wait or the orphan TTL without waiting. Safe for
// concurrent use.
type manualClock struct {
	mu  sync.Mutex
	now dataplane.Jiffies
}

// newManualClock returns a clock reading start.
func newManualClock(start dataplane.Jiffies) *manualClock { return &manualClock{now: start} }

// Now returns the current reading.
func (c *manualClock) Now() (dataplane.Jiffies, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now, nil
}

// Set makes the clock read j.
func (c *manualClock) Set(j dataplane.Jiffies) {
	c.mu.Lock()
	c.now = j
	c.mu.Unlock()
}

// Add moves the clock forward by j.
func (c *manualClock) Add(j dataplane.Jiffies) {
	c.mu.Lock()
	c.now += j
	c.mu.Unlock()
}
