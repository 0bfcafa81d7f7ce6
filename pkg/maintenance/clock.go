package maintenance

import "github.com/xlbproject/xlb/pkg/dataplane"

// Clock tells the maintenance loop what time it is on the data path's clock
// (jiffies, the clock flow entries store last_seen in).
type Clock interface {
	Now() (dataplane.Jiffies, error)
}

// KernelClock is the real clock: the data path's own jiffies, read through
// dp.KernelNow.
func KernelClock(dp *dataplane.Dataplane) Clock { return kernelClock{dp} }

type kernelClock struct{ dp *dataplane.Dataplane }

func (c kernelClock) Now() (dataplane.Jiffies, error) { return c.dp.KernelNow() }
