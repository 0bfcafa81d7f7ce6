package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// requestSize is the keepalive load's request, echoed back whole.
const requestSize = 64

// keepaliveLoad is requests on long-lived connections: -workers
// connections opened before the measurement, each a loop of a 64-byte
// request and its echo for -duration. Latency is the round trip.
func keepaliveLoad() load {
	return load{
		name: "keepalive", title: "Keep-alive requests (64-byte request and echo)", unit: "req/s", op: "req",
		about:   "one long-lived connection per worker, each a loop of a 64-byte request and its echo; latency is the round trip",
		handler: func(c *testnet.Conn) error { return smallEcho(c) },
		run: func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort) (sample, error) {
			return runKeepalive(ctx, l.Client(), targets, o.Workers, o.Duration)
		},
	}
}

// smallEcho is testnet.Echo with a small buffer: the idle load holds
// -idle-pairs connections on it at once.
func smallEcho(c io.ReadWriter) error { return testnet.EchoBuffer(c, 512) }

// runKeepalive opens workers connections from h to targets (round robin),
// then runs request loops on all of them for d and measures.
func runKeepalive(ctx context.Context, h *testnet.Host, targets []netip.AddrPort, workers int, d time.Duration) (sample, error) {
	lats := make([][]time.Duration, workers)
	r, err := runStreams(ctx, h, targets, workers, d, func(i int, c net.Conn, deadline time.Time) error {
		var err error
		lats[i], err = requestLoop(ctx, c, deadline)
		return err
	})
	if err != nil {
		return sample{}, fmt.Errorf("keepalive: %w", err)
	}
	var all []time.Duration
	for _, ls := range lats {
		all = append(all, ls...)
	}
	slices.Sort(all)
	s := sample{cpu: r.cpu, ops: float64(len(all))}
	s.failed, s.note = r.failures()
	if s.failed == workers {
		return s, fmt.Errorf("keepalive: every connection failed, e.g. %s", s.note)
	}
	s.value = s.ops / r.elapsed.Seconds()
	s.p50, s.p99 = quantile(all, 0.5), quantile(all, 0.99)
	return s, nil
}

// requestLoop sends requests on c and reads their echo until deadline and
// returns each round trip; an error ends the loop.
func requestLoop(ctx context.Context, c net.Conn, deadline time.Time) ([]time.Duration, error) {
	req, resp := make([]byte, requestSize), make([]byte, requestSize)
	lats := make([]time.Duration, 0, 1<<16)
	if err := c.SetDeadline(deadline.Add(10 * time.Second)); err != nil {
		return nil, err
	}
	for ctx.Err() == nil {
		t0 := time.Now()
		if !t0.Before(deadline) {
			return lats, nil
		}
		if _, err := c.Write(req); err != nil {
			return lats, err
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			return lats, err
		}
		lats = append(lats, time.Since(t0))
	}
	return lats, nil
}

// quantile is the q-quantile of sorted ds (nearest rank; 0 when empty).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, max(0, int(q*float64(len(ds)-1))))]
}
