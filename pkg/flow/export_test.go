package flow

// SetAfterRead installs a hook that runs in every cycle between the flow
// map read and the first delete (tests only: it lets a test change the map
// under a cycle's feet).
func SetAfterRead(l *Loop, f func()) {
	l.mu.Lock()
	l.afterRead = f
	l.mu.Unlock()
}

// CellOf exposes the lone-detection cell hash to tests.
func CellOf(gen uint32) uint32 { return cellOf(gen) }

// NextWait exposes nextWait to the tests.
var NextWait = nextWait
