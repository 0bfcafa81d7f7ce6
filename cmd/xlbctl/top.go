package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// runTop redraws status and backends with per-second rates every
// o.interval until ctx ends (SIGINT) or o.iterations frames were drawn,
// each frame in place over the last (inPlace). A failed request is shown
// in the frame and retried on the next tick, so top survives a daemon
// restart. Exit code: 0, or 1 when the last request of an --iterations
// run failed. With --json every body is printed as is.
func runTop(ctx context.Context, c *client, o options, u units, stdout, stderr io.Writer) int {
	var base, last *api.Document // base: the latest document with an earlier sample than last
	var lastErr error
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		body, d, err := c.get(ctx)
		if err == nil {
			if serr := selectService(d, o.service); serr != nil {
				return fail(stderr, serr)
			}
		}
		lastErr = err
		var frame bytes.Buffer
		switch {
		case o.json && err == nil:
			frame.Write(body)
		case o.json:
			fmt.Fprintf(stderr, "xlbctl: %v\n", err)
		default:
			fmt.Fprintf(&frame, "xlbctl top  %s  %s  (every %s, Ctrl-C to quit)\n\n", c.url, time.Now().Format("15:04:05"), o.interval)
			if err != nil {
				fmt.Fprintf(&frame, "error: %v\n", err)
			}
		}
		if err == nil {
			if last != nil && !sameSample(last, d) {
				base = last
			}
			last = d
			if !o.json {
				if err := renderTop(&frame, base, d, u); err != nil {
					return fail(stderr, err)
				}
			}
		}
		out := frame.Bytes()
		if !o.json {
			out = inPlace(out, termRows(stdout))
		}
		if _, err := stdout.Write(out); err != nil {
			return fail(stderr, err)
		}
		if o.iterations > 0 && n >= o.iterations {
			break
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-tick.C:
		}
	}
	if lastErr != nil {
		return exitError
	}
	return exitOK
}

// sameSample reports whether two documents carry the same maintenance
// sample (then no rate can be computed between them).
func sameSample(a, b *api.Document) bool {
	x, y := a.Dataplane.SampledAtUnixMs, b.Dataplane.SampledAtUnixMs
	return x == nil || y == nil || *x == *y
}
