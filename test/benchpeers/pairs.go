package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Connect loops of a dial helper, and how many connects may fail before
// it gives up.
const (
	idleDialers     = 16
	idleFailureRate = 0.01
)

// openIdle opens n connections to targets (round robin), idleDialers at
// a time. Connects that fail are retried; more than idleFailureRate of n
// failing is an error.
func openIdle(ctx context.Context, targets []netip.AddrPort, n int) ([]net.Conn, error) {
	var mu sync.Mutex
	conns := make([]net.Conn, 0, n)
	var next, failures atomic.Int64
	var firstErr atomic.Value
	maxFailures := int64(float64(n)*idleFailureRate) + 1
	var wg sync.WaitGroup
	for range idleDialers {
		wg.Go(func() {
			d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: -1}
			for i := int(next.Add(1)) - 1; i < n; {
				if ctx.Err() != nil || failures.Load() > maxFailures {
					return
				}
				c, err := d.DialContext(ctx, "tcp", targets[i%len(targets)].String())
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				i = int(next.Add(1)) - 1
			}
		})
	}
	wg.Wait()
	if f := failures.Load(); f > maxFailures || len(conns) < n {
		for _, c := range conns {
			c.Close()
		}
		return nil, fmt.Errorf("%d of %d idle pairs open, %d connects failed, e.g. %v", len(conns), n, f, firstErr.Load())
	}
	return conns, nil
}

// trickle writes one byte to each connection in turn, every connection
// once per period, until ctx ends, and returns how many writes failed.
func trickle(ctx context.Context, conns []net.Conn, period time.Duration) int {
	const tick = 10 * time.Millisecond
	perTick := max(1, int(int64(len(conns))*int64(tick)/int64(period)))
	t := time.NewTicker(tick)
	defer t.Stop()
	b := []byte{'.'}
	failed, i := 0, 0
	for {
		select {
		case <-ctx.Done():
			return failed
		case <-t.C:
		}
		for range perTick {
			c := conns[i%len(conns)]
			i++
			c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := c.Write(b); err != nil {
				failed++
			}
		}
	}
}
