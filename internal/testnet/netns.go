package testnet

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// In runs f on a fresh goroutine whose OS thread is locked and switched
// into the network namespace ns, waits for it and returns f's error.
// Afterwards the thread is switched back to the namespace it started in;
// if that fails the goroutine exits still locked, so the Go runtime
// discards the thread instead of reusing it in the wrong namespace. A
// panic in f is re-raised on the caller's goroutine. Sockets created in f
// stay in ns for their whole life; f must not call t.FailNow (t.Fatal).
func In(ns netns.NsHandle, f func() error) error {
	return onLockedThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("testnet: enter netns: %w", err)
		}
		return f()
	})
}

// NewAnon creates an anonymous network namespace without moving any
// goroutine into it and returns an open handle. The namespace disappears
// when the handle (and every socket and link in it) is closed, so a
// crashed test leaves nothing behind. Run code in it with In.
func NewAnon() (netns.NsHandle, error) {
	ns := netns.None()
	err := onLockedThread(func() error {
		var err error
		ns, err = netns.New()
		return err
	})
	if err != nil {
		if ns.IsOpen() {
			ns.Close()
		}
		return netns.None(), fmt.Errorf("testnet: create anonymous netns: %w", err)
	}
	return ns, nil
}

// onLockedThread runs f as In does, without entering a namespace first: f
// may switch the thread's namespace itself (netns.New does).
func onLockedThread(f func() error) error {
	type result struct {
		err      error
		panicked bool
		value    any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("testnet: get current netns: %w", err)}
			return
		}
		defer orig.Close()
		var r result
		func() {
			defer func() {
				if v := recover(); v != nil {
					r = result{panicked: true, value: v}
				}
			}()
			r.err = f()
		}()
		if err := netns.Set(orig); err != nil {
			// Stay locked: the thread dies with this goroutine.
			r.err = errors.Join(r.err, fmt.Errorf("testnet: restore netns (thread discarded): %w", err))
			done <- r
			return
		}
		runtime.UnlockOSThread()
		done <- r
	}()
	r := <-done
	if r.panicked {
		panic(r.value)
	}
	return r.err
}
