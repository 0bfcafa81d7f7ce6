package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// bulkBuffer is the size of each write (and read) of the bulk loads.
const bulkBuffer = 256 << 10

// mib is what CPU time per operation is counted in for the bulk loads.
const mib = 1 << 20

// bulkUpLoad is -streams connections writing into the backends' sink
// (testnet.Sink) for -duration; the value is what the sinks counted over
// the time until the last count came back.
func bulkUpLoad() load {
	return load{
		name: "bulk-up", title: "Bulk, client → backend", unit: "Gbit/s", op: "MiB",
		about:   "the bulk streams write 256 KiB at a time into the backends' sink, which counts what arrived",
		handler: testnet.Sink,
		run: func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort) (sample, error) {
			return runBulk(ctx, l.Client(), targets, o.Streams, o.Duration, sendStream)
		},
	}
}

// bulkDownLoad is -streams connections reading what the backends send
// (source) for -duration; the value is what the client read.
func bulkDownLoad() load {
	return load{
		name: "bulk-down", title: "Bulk, backend → client", unit: "Gbit/s", op: "MiB",
		about:   "the backends write 256 KiB at a time into the bulk streams, the client counts what it read",
		handler: source,
		run: func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort) (sample, error) {
			return runBulk(ctx, l.Client(), targets, o.Streams, o.Duration, receiveStream)
		},
	}
}

// source writes to the client until the client goes away.
func source(c *testnet.Conn) error {
	buf := make([]byte, bulkBuffer)
	for {
		if _, err := c.Write(buf); err != nil {
			if testnet.IsReset(err) {
				return nil // the client closed: the end of the stream
			}
			return err
		}
	}
}

// runBulk opens streams connections from h to targets (round robin) and
// runs stream on each until deadline; stream returns the bytes delivered.
func runBulk(ctx context.Context, h *testnet.Host, targets []netip.AddrPort, streams int, d time.Duration,
	stream func(context.Context, net.Conn, time.Time) (int64, error)) (sample, error) {
	bytes := make([]int64, streams)
	r, err := runStreams(ctx, h, targets, streams, d, func(i int, c net.Conn, deadline time.Time) error {
		var err error
		bytes[i], err = stream(ctx, c, deadline)
		return err
	})
	if err != nil {
		return sample{}, fmt.Errorf("bulk: %w", err)
	}
	var total int64
	for _, b := range bytes {
		total += b
	}
	s := sample{cpu: r.cpu, ops: float64(total) / mib}
	s.failed, s.note = r.failures()
	if s.failed == streams {
		return s, fmt.Errorf("bulk: every stream failed, e.g. %s", s.note)
	}
	s.value = float64(total) * 8 / r.elapsed.Seconds() / 1e9
	return s, nil
}

// sendStream writes until deadline, half-closes and returns the count
// the sink answers with.
func sendStream(ctx context.Context, c net.Conn, deadline time.Time) (int64, error) {
	buf := make([]byte, bulkBuffer)
	if err := c.SetDeadline(deadline.Add(30 * time.Second)); err != nil {
		return 0, err
	}
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	tc, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return 0, errors.New("bulk: not a TCP connection")
	}
	if err := tc.CloseWrite(); err != nil {
		return 0, err
	}
	n, err := testnet.ReadSinkCount(c)
	return int64(n), err
}

// receiveStream reads until deadline and returns the bytes read.
func receiveStream(ctx context.Context, c net.Conn, deadline time.Time) (int64, error) {
	buf := make([]byte, bulkBuffer)
	if err := c.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	var total int64
	for ctx.Err() == nil {
		n, err := c.Read(buf)
		total += int64(n)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
				return total, nil
			}
			return total, err
		}
	}
	return total, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
