package testnet

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// CleanupStale removes leftovers of topologies whose prefix starts with
// prefix (for example after a crashed `make demo`): named namespaces in
// NetnsDir and links in the caller's namespace whose names start with
// prefix. prefix must be at least 2 characters, so it cannot match
// everything.
func CleanupStale(prefix string) error {
	if len(prefix) < 2 || strings.ContainsAny(prefix, "/.") {
		return fmt.Errorf("testnet: CleanupStale: refusing prefix %q", prefix)
	}
	names, nsErr := staleNamespaces(prefix)
	links, linkErr := staleLinks(prefix)
	errs := []error{nsErr, linkErr}
	for _, n := range names {
		errs = append(errs, deleteNamed(n))
	}
	for _, link := range links {
		// Deleting one end of a veth pair also deletes the other.
		if err := netlink.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("testnet: delete link %s: %w", link.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what CleanupStale(prefix) would remove, as "netns NAME"
// and "link NAME": tests check that it is empty after Close.
func Leftovers(prefix string) ([]string, error) {
	names, nsErr := staleNamespaces(prefix)
	links, linkErr := staleLinks(prefix)
	var out []string
	for _, n := range names {
		out = append(out, "netns "+n)
	}
	for _, l := range links {
		out = append(out, "link "+l.Attrs().Name)
	}
	return out, errors.Join(nsErr, linkErr)
}

// staleNamespaces lists the named namespaces in NetnsDir whose names start
// with prefix. A missing NetnsDir means none.
func staleNamespaces(prefix string) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("testnet: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// staleLinks lists the links of the caller's namespace whose names start
// with prefix.
func staleLinks(prefix string) ([]netlink.Link, error) {
	all, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("testnet: list links: %w", err)
	}
	var links []netlink.Link
	for _, l := range all {
		if strings.HasPrefix(l.Attrs().Name, prefix) {
			links = append(links, l)
		}
	}
	return links, nil
}

// CloseOnSignal makes SIGINT and SIGTERM run the functions before in
// order (e.g. stop the daemon under test), then cleanup (e.g.
// Topology.Close), and exit the process with status 128+signal (130 or
// 143), so an interrupted test or demo leaves nothing behind. The returned
// stop function cancels this; call it once the signal no longer needs
// handling. A second signal during the cleanup exits at once.
func CloseOnSignal(cleanup func() error, before ...func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case sig := <-ch:
			code := 128 + int(sig.(syscall.Signal))
			fmt.Fprintf(os.Stderr, "testnet: %v: cleaning up\n", sig)
			go func() {
				<-ch
				os.Exit(code)
			}()
			for _, f := range before {
				f()
			}
			if err := cleanup(); err != nil {
				fmt.Fprintf(os.Stderr, "testnet: close after %v: %v\n", sig, err)
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
