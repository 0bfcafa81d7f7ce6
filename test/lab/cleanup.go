package lab

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Close stops the backend servers and removes every namespace the lab
// created (their links go with them). It is idempotent and safe on a
// partly built lab. Processes started with Host.Command keep their
// namespace alive (nameless) until they exit: stop them first.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		var errs []error
		for _, h := range l.hosts {
			errs = append(errs, h.closeServers())
		}
		for _, h := range slices.Backward(l.hosts) {
			h.close()
			errs = append(errs, deleteNamespace(h.NS))
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// CleanupStale removes leftovers of labs whose prefix starts with prefix
// (for example after a crashed `make demo`): named namespaces in NetnsDir
// and links in the caller's namespace whose names start with prefix.
// prefix must be at least 2 characters, so it cannot match everything.
func CleanupStale(prefix string) error {
	if len(prefix) < 2 || strings.ContainsAny(prefix, "/.") {
		return fmt.Errorf("lab: CleanupStale: refusing prefix %q", prefix)
	}
	var errs []error
	names, err := StaleNamespaces(prefix)
	errs = append(errs, err)
	for _, n := range names {
		errs = append(errs, deleteNamespace(n))
	}
	links, err := netlink.LinkList()
	if err != nil {
		errs = append(errs, fmt.Errorf("lab: list links: %w", err))
	}
	for _, link := range links {
		if strings.HasPrefix(link.Attrs().Name, prefix) {
			// Deleting one end of a veth pair also deletes the other.
			if err := netlink.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
				errs = append(errs, fmt.Errorf("lab: delete link %s: %w", link.Attrs().Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// StaleNamespaces lists the named namespaces in NetnsDir whose names start
// with prefix. A missing NetnsDir means none.
func StaleNamespaces(prefix string) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// CloseOnSignal makes SIGINT and SIGTERM run the given functions in order
// (e.g. stop the daemon under test), close the lab, and exit the process
// with status 128+signal (130 or 143). The returned stop function cancels
// this; call it (before or after Close) once the signal no longer needs
// handling. A second signal during cleanup exits at once.
func (l *Lab) CloseOnSignal(before ...func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case sig := <-ch:
			code := 128 + int(sig.(syscall.Signal))
			go func() {
				<-ch
				os.Exit(code)
			}()
			for _, f := range before {
				f()
			}
			if err := l.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "lab: close after %v: %v\n", sig, err)
			}
			os.Exit(code)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
	}
}
