package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// The UDP loads (issue 31): the backends serve UDP on backendPort, and a
// peer balances the UDP service VIP:servicePort (peer.udp).
const (
	// udpRequestSize is the udp-rr load's datagram, echoed back whole.
	udpRequestSize = 64
	// udpLossAfter is how long udp-rr waits for an echo before it counts
	// the datagram as lost and sends another.
	udpLossAfter = 200 * time.Millisecond
	// udpBulkSize is each datagram of the udp-bulk load: it fits the
	// lab's 1500-byte MTU with its IPv4 and UDP headers.
	udpBulkSize = 1400
	// udpProbe is the datagram the udp-bulk sinks answer (so a peer's
	// readiness is checked as for udp-rr); every other one they only
	// count.
	udpProbe = "xlb-bench-peers probe"
)

// udpRRLoad is request and response over UDP: -workers connected UDP
// sockets, each a loop of a 64-byte datagram and its echo for -duration.
// Latency is the round trip; an echo that has not come within 200 ms
// counts as lost and the next datagram goes out.
func udpRRLoad() load {
	return load{
		name: "udp-rr", title: "UDP request and response (64-byte datagram and echo)", unit: "exch/s", op: "exch",
		about:      "one connected UDP socket per worker, each a loop of a 64-byte datagram and its echo; latency is the round trip; an echo not back within 200 ms counts as lost (socket errors: lost) and the next datagram goes out",
		udpHandler: testnet.UDPEcho,
		runUDP: func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort, _ []*testnet.UDPServer) (sample, error) {
			return runUDPRR(ctx, l.Client(), targets, o.Workers, o.Duration)
		},
	}
}

// udpBulkLoad is -streams unpaced senders of 1,400-byte datagrams into
// the backends' UDP sink for -duration; the value is what the sinks
// counted over the sending time, the loss what they did not.
func udpBulkLoad() load {
	return load{
		name: "udp-bulk", title: "UDP bulk, client → backend (1,400-byte datagrams)", unit: "Gbit/s", op: "MiB",
		about:      "the bulk streams are connected UDP sockets that send 1,400-byte datagrams as fast as they can into the backends' UDP sink, which counts what arrived; the note gives the datagrams lost on the way (at the balancer or the sink's socket)",
		udpHandler: bulkSink,
		runUDP: func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort, servers []*testnet.UDPServer) (sample, error) {
			return runUDPBulk(ctx, l.Client(), targets, o.Streams, o.Duration, servers)
		},
	}
}

// bulkSink is testnet.UDPSink that answers udpProbe.
func bulkSink(from netip.AddrPort, req []byte) []byte {
	if string(req) == udpProbe {
		return testnet.UDPEcho(from, req)
	}
	return nil
}

// udpProbeFor is the datagram that checks whether the load's servers
// answer through a peer.
func udpProbeFor(ld load) []byte {
	if ld.name == "udp-bulk" {
		return []byte(udpProbe)
	}
	return []byte("ping")
}

// dialUDP opens n connected UDP sockets from h to targets (round robin),
// each from an ephemeral port: n pairs through a peer.
func dialUDP(h *testnet.Host, targets []netip.AddrPort, n int) ([]*net.UDPConn, error) {
	rr := roundRobin{targets: targets}
	conns := make([]*net.UDPConn, 0, n)
	for range n {
		c, err := h.DialUDP(netip.AddrPort{}, rr.pick().String())
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// runUDPRR runs workers request loops from h to targets for d and
// measures.
func runUDPRR(ctx context.Context, h *testnet.Host, targets []netip.AddrPort, workers int, d time.Duration) (sample, error) {
	conns, err := dialUDP(h, targets, workers)
	if err != nil {
		return sample{}, fmt.Errorf("udp-rr: %w", err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	m, err := startCPU()
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	deadline := start.Add(d)
	lats := make([][]time.Duration, workers)
	lost := make([]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { lats[i], lost[i], errs[i] = udpRequestLoop(ctx, c, deadline) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu, err := m.stop()
	if err != nil {
		return sample{}, err
	}
	var all []time.Duration
	for _, ls := range lats {
		all = append(all, ls...)
	}
	slices.Sort(all)
	s := sample{cpu: cpu, ops: float64(len(all))}
	failedWorkers := 0
	for i, err := range errs {
		s.failed += lost[i]
		if err != nil {
			if failedWorkers == 0 {
				s.note = fmt.Sprintf("sockets failed, e.g. %v", err)
			}
			failedWorkers++
		}
	}
	if s.failed > 0 {
		s.failures = map[string]int{"lost": s.failed}
	}
	if failedWorkers == workers {
		return s, fmt.Errorf("udp-rr: every socket failed, e.g. %s", s.note)
	}
	s.value = s.ops / elapsed.Seconds()
	s.p50, s.p99 = quantile(all, 0.5), quantile(all, 0.99)
	return s, nil
}

// udpRequestLoop sends numbered datagrams on c and reads their echo until
// deadline, and returns each round trip and the datagrams lost (no echo
// within udpLossAfter). A late echo of an earlier datagram is skipped. A
// socket error (a port unreachable: ECONNREFUSED) ends the loop.
func udpRequestLoop(ctx context.Context, c *net.UDPConn, deadline time.Time) ([]time.Duration, int, error) {
	req, resp := make([]byte, udpRequestSize), make([]byte, 2*udpRequestSize)
	lats := make([]time.Duration, 0, 1<<16)
	lost := 0
	for seq := uint64(1); ctx.Err() == nil; seq++ {
		t0 := time.Now()
		if !t0.Before(deadline) {
			return lats, lost, nil
		}
		binary.BigEndian.PutUint64(req, seq)
		if _, err := c.Write(req); err != nil {
			return lats, lost, err
		}
		if err := c.SetReadDeadline(t0.Add(udpLossAfter)); err != nil {
			return lats, lost, err
		}
		for {
			n, err := c.Read(resp)
			if err != nil {
				if isTimeout(err) {
					lost++
					break
				}
				return lats, lost, err
			}
			if n == udpRequestSize && binary.BigEndian.Uint64(resp) == seq {
				lats = append(lats, time.Since(t0))
				break
			}
		}
	}
	return lats, lost, nil
}

// runUDPBulk runs streams unpaced senders from h to targets for d and
// reads what servers (the backends' sinks) counted.
func runUDPBulk(ctx context.Context, h *testnet.Host, targets []netip.AddrPort, streams int, d time.Duration, servers []*testnet.UDPServer) (sample, error) {
	conns, err := dialUDP(h, targets, streams)
	if err != nil {
		return sample{}, fmt.Errorf("udp-bulk: %w", err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, s := range servers {
		s.ResetStats()
	}
	m, err := startCPU()
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	deadline := start.Add(d)
	sent := make([]int64, streams)
	dropped := make([]int64, streams) // refused by the sender's own stack (ENOBUFS)
	errs := make([]error, streams)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { sent[i], dropped[i], errs[i] = udpSendLoop(ctx, c, deadline) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu, err := m.stop()
	if err != nil {
		return sample{}, err
	}
	got := settledCounts(ctx, servers)
	var total, refused int64
	for i, n := range sent {
		total += n
		refused += dropped[i]
	}
	s := sample{cpu: cpu, ops: float64(got.BytesIn) / mib}
	for _, err := range errs {
		if err != nil {
			if s.failed == 0 {
				s.note = fmt.Sprintf("streams failed, e.g. %v; ", err)
			}
			s.failed++
		}
	}
	if s.failed == streams {
		return s, fmt.Errorf("udp-bulk: every stream failed, e.g. %s", s.note)
	}
	loss := 0.0
	if total > 0 {
		loss = 100 * float64(max(0, total-got.Datagrams)) / float64(total)
	}
	s.note += fmt.Sprintf("loss %.2f%% (%d of %d datagrams sent; %d more refused by the client's stack)", loss, max(0, total-got.Datagrams), total, refused)
	s.value = float64(got.BytesIn) * 8 / elapsed.Seconds() / 1e9
	return s, nil
}

// udpSendLoop sends udpBulkSize datagrams on c as fast as it can until
// deadline and returns how many went out and how many the local stack
// refused for want of buffer (ENOBUFS: sent again as the next one). Any
// other error (ECONNREFUSED: a port unreachable) ends the loop.
func udpSendLoop(ctx context.Context, c *net.UDPConn, deadline time.Time) (sent, dropped int64, err error) {
	buf := make([]byte, udpBulkSize)
	for i := 0; ctx.Err() == nil; i++ {
		if i%64 == 0 && !time.Now().Before(deadline) {
			break
		}
		if _, err := c.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOBUFS) {
				dropped++
				continue
			}
			return sent, dropped, err
		}
		sent++
	}
	return sent, dropped, nil
}

// settledCounts waits until the servers' counts stop growing (the
// datagrams still queued on the way have arrived: two polls 50 ms apart
// agree), at most 2 s, and returns their sums.
func settledCounts(ctx context.Context, servers []*testnet.UDPServer) testnet.UDPStats {
	sum := func() testnet.UDPStats {
		var t testnet.UDPStats
		for _, s := range servers {
			st := s.Stats()
			t.Datagrams += st.Datagrams
			t.BytesIn += st.BytesIn
		}
		return t
	}
	last := sum()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && ctx.Err() == nil; {
		time.Sleep(50 * time.Millisecond)
		now := sum()
		if now.Datagrams == last.Datagrams {
			break
		}
		last = now
	}
	return last
}
