package dptest

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// nsRunner runs functions on a locked OS thread switched into one network
// namespace. The namespace is anonymous: it disappears when the last handle
// closes, so a crashed test leaves nothing behind.
type nsRunner struct {
	ns netns.NsHandle
}

// newAnonNS creates an anonymous network namespace without moving the
// calling goroutine into it.
func newAnonNS() (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), err
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), fmt.Errorf("create netns: %w", err)
	}
	if err := netns.Set(orig); err != nil {
		// This thread is stuck in the new namespace: leave it locked so
		// the runtime discards it when the goroutine exits.
		ns.Close()
		return netns.None(), fmt.Errorf("restore netns: %w", err)
	}
	runtime.UnlockOSThread()
	return ns, nil
}

// do runs fn inside the namespace on a dedicated locked thread.
func (r *nsRunner) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(r.ns); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("restore netns: %w (thread discarded)", err)
			return // thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
