package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// Lab benchmarks: each measures the same workload through XLB and, as the
// reference in the same run, straight to a backend on the same bridge
// (no XLB hop), and reports the ratio. Absolute numbers on a shared
// 2-core machine mean little; the ratio is what to compare.

// streamOnce sends n bytes to a sink at addr and returns the elapsed time.
func streamOnce(h *lab.Host, addr string, n int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	c, err := h.Dial(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, 256<<10)
	for sent := 0; sent < n; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		return 0, err
	}
	got, err := testnet.ReadSinkCount(c)
	if err != nil {
		return 0, err
	}
	if int(got) < n {
		return 0, fmt.Errorf("sink counted %d of %d bytes", got, n)
	}
	return time.Since(start), nil
}

// connectOnce opens a connection to an echo server, exchanges 64 bytes, closes.
func connectOnce(h *lab.Host, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := h.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	msg := make([]byte, 64)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	_, err = io.ReadFull(c, msg)
	return err
}

// benchDaemon runs the daemon in a one-arm lab with one backend, balancing
// 80 -> echo (8080) and 81 -> sink (8081).
func benchDaemon(b *testing.B) (*lab.Lab, func()) {
	b.Helper()
	l := lab.New(b, lab.Options{Topology: lab.OneArm, Backends: 1})
	cfg := strings.Replace(labConfig(l, ""), "ports:\n", "ports:\n  - local_port: 81\n    remote_port: 8081\n", 1)
	p, err := startXLBEnv(b, l, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.WaitLog("xlb running", 60*time.Second); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	return l, func() { b.StopTimer(); p.Stop(60 * time.Second) }
}

// BenchmarkLabThroughput streams 64 MiB per iteration into a sink, through
// XLB (192.0.2.10:81 -> backend:8081) and directly, alternating.
func BenchmarkLabThroughput(b *testing.B) {
	l, stop := benchDaemon(b)
	defer stop()
	const size = 64 << 20
	var via, direct time.Duration
	for i := 0; i < b.N; i++ {
		d, err := streamOnce(l.Client(), "192.0.2.10:81", size)
		if err != nil {
			b.Fatal(err)
		}
		via += d
		d, err = streamOnce(l.Client(), l.SinkAddr(0), size)
		if err != nil {
			b.Fatal(err)
		}
		direct += d
	}
	gbps := func(d time.Duration) float64 { return float64(size) * 8 * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbps(via), "xlb-Gbit/s")
	b.ReportMetric(gbps(direct), "direct-Gbit/s")
	b.ReportMetric(gbps(via)/gbps(direct), "ratio")
}

// BenchmarkLabConnections opens 500 short connections per iteration,
// through XLB and directly, alternating in blocks of 50.
func BenchmarkLabConnections(b *testing.B) {
	l, stop := benchDaemon(b)
	defer stop()
	var via, direct time.Duration
	n := 0
	for i := 0; i < b.N; i++ {
		for block := 0; block < 10; block++ {
			start := time.Now()
			for j := 0; j < 50; j++ {
				if err := connectOnce(l.Client(), listenAddr); err != nil {
					b.Fatal(err)
				}
			}
			via += time.Since(start)
			start = time.Now()
			for j := 0; j < 50; j++ {
				if err := connectOnce(l.Client(), l.EchoAddr(0)); err != nil {
					b.Fatal(err)
				}
			}
			direct += time.Since(start)
			n += 50
		}
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	b.ReportMetric(rate(via), "xlb-conn/s")
	b.ReportMetric(rate(direct), "direct-conn/s")
	b.ReportMetric(rate(via)/rate(direct), "ratio")
}
