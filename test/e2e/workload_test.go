package e2e

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// The workload that crosses hand-offs, crashes and restarts (issue 12,
// "Tests that must exist and pass"): connections that stream both ways
// through XLB with every byte checked, idle connections checked by a
// round trip at the end, and a prober that keeps opening new connections.
// The backends greet every connection with their number, so each side
// knows where a connection went.

// identEcho is a backend's handler: one byte, the backend's number
// (1…), then an echo of everything until the client's FIN.
func identEcho(n byte) testnet.Handler {
	return func(c *testnet.Conn) error {
		if _, err := c.Write([]byte{n}); err != nil {
			return err
		}
		return testnet.Echo(c)
	}
}

// greetedLab is a one-arm lab whose backends run identEcho on :8080.
func greetedLab(t testing.TB) *lab.Lab {
	t.Helper()
	l := lab.New(t, lab.Options{Topology: lab.OneArm, EchoPort: -1, SinkPort: -1})
	for i, b := range l.Backends {
		if _, err := b.Serve(":8080", identEcho(byte(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// streamPattern is byte off of what stream id sends (and gets back).
func streamPattern(id int, off int64) byte {
	x := uint64(off)*0x9E3779B97F4A7C15 ^ uint64(id+1)*0xC2B2AE3D27D4EB4F
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	return byte(x >> 32)
}

// Workload sizes (the numbers) and pacing: each stream writes
// 256…2047 bytes every streamPace, enough to cross every swap with data in
// flight without saturating a shared 2-core machine.
const (
	streamConns = 200
	idleConns   = 50
	streamPace  = 40 * time.Millisecond
	// ioTimeout bounds any single read or write: data has to move again
	// within it, whatever happens to the daemon.
	ioTimeout = 60 * time.Second
)

// greet dials listen:80 from client, reads the backend's number and
// returns the connection.
func greet(client *lab.Host) (*net.TCPConn, byte, error) { return greetAt(client, listenAddr) }

// roundTrip writes msg and expects it back.
func roundTrip(c *net.TCPConn, msg []byte) error {
	c.SetDeadline(time.Now().Add(ioTimeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if string(got) != string(msg) {
		return fmt.Errorf("round trip: got %q, want %q", got, msg)
	}
	return nil
}

// stream is one connection that streams both ways until told to stop.
type stream struct {
	id      int
	c       *net.TCPConn
	backend byte
	sent    atomic.Int64 // bytes written
	recvd   atomic.Int64 // bytes received back, each checked
}

// write sends paced chunks of the stream's pattern until stop closes,
// then half-closes.
func (s *stream) write(stop <-chan struct{}) error {
	rng := rand.New(rand.NewPCG(uint64(s.id), 12))
	buf := make([]byte, 2048)
	tick := time.NewTicker(streamPace)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return s.c.CloseWrite()
		case <-tick.C:
		}
		n := 256 + rng.IntN(len(buf)-256)
		off := s.sent.Load()
		for i := range n {
			buf[i] = streamPattern(s.id, off+int64(i))
		}
		s.c.SetWriteDeadline(time.Now().Add(ioTimeout))
		if _, err := s.c.Write(buf[:n]); err != nil {
			return fmt.Errorf("write at byte %d: %w", off, err)
		}
		s.sent.Add(int64(n))
	}
}

// read checks every byte that comes back until the backend's FIN, then
// that as many came back as were sent.
func (s *stream) read() error {
	buf := make([]byte, 32<<10)
	for {
		s.c.SetReadDeadline(time.Now().Add(ioTimeout))
		n, err := s.c.Read(buf)
		off := s.recvd.Load()
		for i := range n {
			if want := streamPattern(s.id, off+int64(i)); buf[i] != want {
				return fmt.Errorf("byte %d is %#x, want %#x", off+int64(i), buf[i], want)
			}
		}
		s.recvd.Add(int64(n))
		if errors.Is(err, io.EOF) {
			if got, sent := s.recvd.Load(), s.sent.Load(); got != sent {
				return fmt.Errorf("FIN after %d of %d bytes", got, sent)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read at byte %d: %w", s.recvd.Load(), err)
		}
	}
}

// workload runs streams, idle connections and a prober through XLB.
type workload struct {
	l       *lab.Lab
	streams []*stream
	idle    []*net.TCPConn
	idleTo  []byte // backend of each idle connection
	prober  *prober

	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error // stream failures, in order
}

// startWorkload opens the streams and idle connections (each greeted,
// idle ones after one round trip) and starts the prober.
func startWorkload(t testing.TB, l *lab.Lab) *workload {
	t.Helper()
	w := &workload{l: l, stop: make(chan struct{})}
	for i := range streamConns + idleConns {
		c, backend, err := greet(l.Client())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		if i >= streamConns {
			if err := roundTrip(c, []byte(fmt.Sprintf("idle %03d hello", i))); err != nil {
				t.Fatalf("idle connection %d: %v", i, err)
			}
			w.idle, w.idleTo = append(w.idle, c), append(w.idleTo, backend)
			continue
		}
		s := &stream{id: i, c: c, backend: backend}
		w.streams = append(w.streams, s)
		for _, f := range []func() error{func() error { return s.write(w.stop) }, s.read} {
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				if err := f(); err != nil {
					w.fail(fmt.Errorf("stream %d (backend %d): %w", s.id, s.backend, err))
				}
			}()
		}
	}
	w.prober = startProber(t, l.Client())
	t.Cleanup(w.halt)
	return w
}

func (w *workload) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

// halt stops the writers and the prober (idempotent).
func (w *workload) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.prober.halt()
}

// failures returns the stream failures so far.
func (w *workload) failures() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.errs...)
}

// check fails t if a stream failed or a probe failed so far.
func (w *workload) check(t testing.TB, when string) {
	t.Helper()
	if errs := w.failures(); len(errs) > 0 {
		t.Fatalf("%s: %d stream failures (%d resets), first: %v", when, len(errs), countResets(errs), errs[0])
	}
	if errs := w.prober.failures(); len(errs) > 0 {
		t.Fatalf("%s: %d of %d new connections failed (%d resets or refusals), first: %v",
			when, len(errs), w.prober.count(), countResets(errs), errs[0])
	}
}

// received returns the bytes each stream got back so far.
func (w *workload) received() []int64 {
	out := make([]int64, len(w.streams))
	for i, s := range w.streams {
		out[i] = s.recvd.Load()
	}
	return out
}

// waitFlowing waits until every stream got more back than in before.
func (w *workload) waitFlowing(t testing.TB, before []int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		stuck := 0
		for i, s := range w.streams {
			if s.recvd.Load() <= before[i] {
				stuck++
			}
		}
		if stuck == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d streams got nothing back within %v", stuck, len(w.streams), timeout)
		}
		w.check(t, "while waiting for the streams")
		time.Sleep(20 * time.Millisecond)
	}
}

// workloadSummary is what finish found.
type workloadSummary struct {
	bytes      int64 // sent by all streams, and all came back
	resets     int
	probes     int
	maxProbe   time.Duration // the longest a new connection's handshake took
	synRetrans int           // SYNs of new connections sent again
}

func (s workloadSummary) String() string {
	return fmt.Sprintf("%d bytes streamed both ways, %d resets; %d new connections, longest handshake %v, %d SYNs sent again",
		s.bytes, s.resets, s.probes, s.maxProbe.Round(time.Microsecond), s.synRetrans)
}

// finish stops the workload and checks it: every stream's bytes came
// back intact and it closed cleanly, every idle connection answers a
// round trip, every probe succeeded. Resets (ECONNRESET, EPIPE) are
// counted among the failures.
func (w *workload) finish(t testing.TB) workloadSummary {
	t.Helper()
	w.halt()
	w.wg.Wait()
	for i, c := range w.idle {
		if err := roundTrip(c, []byte(fmt.Sprintf("idle %03d still there?", i))); err != nil {
			w.fail(fmt.Errorf("idle connection %d (backend %d): %w", i, w.idleTo[i], err))
			continue
		}
		c.CloseWrite()
		c.SetReadDeadline(time.Now().Add(ioTimeout))
		if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
			w.fail(fmt.Errorf("idle connection %d (backend %d) at close: %q, %v", i, w.idleTo[i], rest, err))
		}
		c.Close()
	}
	for _, s := range w.streams {
		s.c.Close()
	}
	var sum workloadSummary
	for _, s := range w.streams {
		sum.bytes += s.sent.Load()
	}
	errs := append(w.failures(), w.prober.failures()...)
	sum.resets = countResets(errs)
	sum.maxProbe, sum.probes, sum.synRetrans = w.prober.window(time.Time{}, time.Now())
	if len(errs) > 0 {
		for _, err := range errs[:min(len(errs), 10)] {
			t.Error(err)
		}
		t.Fatalf("%d failures, %d of them resets", len(errs), sum.resets)
	}
	return sum
}

// countResets counts the errors that are resets of a connection
// (ECONNRESET or EPIPE; a refused SYN, ECONNREFUSED, is a reset too).
func countResets(errs []error) int {
	n := 0
	for _, err := range errs {
		if testnet.IsReset(err) || errors.Is(err, syscall.ECONNREFUSED) {
			n++
		}
	}
	return n
}
