package testnet

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

func TestDoSwitchesAndRestores(t *testing.T) {
	p := newPair(t)
	h := p.a
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()

	sentinel := errors.New("sentinel")
	err = h.Do(func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		defer cur.Close()
		if !cur.Equal(h.handle) {
			return errors.New("Do ran outside the host's namespace")
		}
		// Nested Do into another namespace.
		return errors.Join(p.b.Do(func() error {
			cur, err := netns.Get()
			if err != nil {
				return err
			}
			defer cur.Close()
			if !cur.Equal(p.b.handle) {
				return errors.New("nested Do ran outside the other namespace")
			}
			return nil
		}), sentinel)
	})
	if !errors.Is(err, sentinel) || strings.Contains(err.Error(), "outside") {
		t.Fatalf("Do: %v", err)
	}
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("panic in Do: recovered %v", v)
			}
		}()
		h.Do(func() error { panic("boom") })
	}()
	cur, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if !cur.Equal(orig) {
		t.Fatal("caller's thread changed namespace")
	}
	// A fresh locked thread starts in the root namespace too.
	onLockedThread(func() error {
		c, err := netns.Get()
		if err == nil && !c.Equal(orig) {
			t.Error("a later locked thread is not in the original namespace")
		}
		c.Close()
		return nil
	})
}

// An anonymous namespace is a namespace of its own that In enters, and
// creating it leaves the caller where it was.
func TestNewAnon(t *testing.T) {
	RequireRoot(t)
	root, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ns, err := NewAnon()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if ns.Equal(root) {
		t.Fatal("NewAnon returned the caller's namespace")
	}
	err = In(ns, func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		defer cur.Close()
		if !cur.Equal(ns) {
			return errors.New("In ran outside the namespace")
		}
		return DisableIPv6()
	})
	if err != nil {
		t.Fatal(err)
	}
}
