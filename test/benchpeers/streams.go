package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// streamsRun is what runStreams measured.
type streamsRun struct {
	elapsed time.Duration
	cpu     cpuUse
	errs    []error // per connection
}

// runStreams opens n connections from h to targets (round robin), then,
// with the host's CPU measured, runs f on every connection at once until
// deadline (now + d) and closes them. f's error ends that connection's
// part of the load only.
func runStreams(ctx context.Context, h *testnet.Host, targets []netip.AddrPort, n int, d time.Duration,
	f func(i int, c net.Conn, deadline time.Time) error) (streamsRun, error) {
	rr := roundRobin{targets: targets}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := h.Dial(dctx, rr.pick().String())
		cancel()
		if err != nil {
			return streamsRun{}, fmt.Errorf("connect: %w", err)
		}
		conns = append(conns, c)
	}
	m, err := startCPU()
	if err != nil {
		return streamsRun{}, err
	}
	start := time.Now()
	deadline := start.Add(d)
	r := streamsRun{errs: make([]error, n)}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { r.errs[i] = f(i, c, deadline) })
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.cpu, err = m.stop()
	return r, err
}

// failures counts the connections that failed and describes the first.
func (r streamsRun) failures() (int, string) {
	n, note := 0, ""
	for _, err := range r.errs {
		if err != nil {
			if n == 0 {
				note = fmt.Sprintf("connections failed, e.g. %v", err)
			}
			n++
		}
	}
	return n, note
}
