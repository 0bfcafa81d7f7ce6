package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/flow"
	"github.com/xlbproject/xlb/test/lab"
)

// TCP connection lifecycle through the real data path and maintenance loop
// (seed "Orderly close and reset", "Inactive connection
// cleanup"): every connection is counted once by initiator and reason, the
// flow map drains, nothing is ever a half pair.
//
// Backends run a scripted handler on :8080; the client's first byte picks
// the behaviour. Clients dial from unique fixed ports (below the ephemeral
// range), so no 4-tuple is reused while its pair waits out time-wait.

// Close styles: the first byte the client sends.
const (
	styleClientFIN  = 'c' // echo; the client half-closes first, the backend follows
	styleBackendFIN = 'b' // the backend writes a line and closes first
	styleClientRST  = 'x' // echo; the client resets (SO_LINGER 0)
	styleBackendRST = 'r' // the backend resets
	styleStream     = 's' // after the client's FIN the backend streams lifecycleStream bytes
)

// lifecycleAddr is listen:80 of the in-process XLB.
const lifecycleAddr = "192.0.2.10:80"

var lifecycleStyles = []byte{styleClientFIN, styleBackendFIN, styleClientRST, styleBackendRST}

const lifecycleStream = 1 << 20

// streamByte is byte i of what the stream style sends.
func streamByte(i int) byte { return byte(i*131 + i>>10) }

// lifecycleHandler is the backends' scripted handler.
func lifecycleHandler(c *lab.Conn) error {
	var cmd [1]byte
	if _, err := io.ReadFull(c, cmd[:]); err != nil {
		return err
	}
	switch cmd[0] {
	case styleClientFIN, styleClientRST:
		return lab.Echo(c)
	case styleBackendFIN:
		_, err := c.Write([]byte("bye\n"))
		return err // the server closes: FIN
	case styleBackendRST:
		return c.Reset()
	case styleStream:
		if _, err := io.Copy(io.Discard, c); err != nil {
			return err
		}
		buf := make([]byte, lifecycleStream)
		for i := range buf {
			buf[i] = streamByte(i)
		}
		_, err := c.Write(buf)
		return err
	}
	return fmt.Errorf("unknown command %q", cmd[0])
}

// lifecycleLab is a one-arm lab whose backends run lifecycleHandler on
// :8080, with an in-process XLB.
func lifecycleLab(t *testing.T) (*lab.Lab, *inprocXLB) {
	t.Helper()
	l := lab.New(t, lab.Options{Topology: lab.OneArm, EchoPort: -1, SinkPort: -1})
	for _, b := range l.Backends {
		if _, err := b.Serve(":8080", lifecycleHandler); err != nil {
			t.Fatal(err)
		}
	}
	return l, startInproc(t, l, inprocOptions{})
}

// portSource hands out unique client ports.
type portSource struct{ next atomic.Int32 }

func newPortSource() *portSource {
	p := &portSource{}
	p.next.Store(10000)
	return p
}

func (p *portSource) get() int {
	n := int(p.next.Add(1))
	if n > 32000 {
		panic("lifecycle: client ports exhausted")
	}
	return n
}

// lifecycleConn runs one connection of the given style from client port
// port and checks what comes back.
func lifecycleConn(client *lab.Host, port int, style byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialFrom(ctx, port, lifecycleAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	msg := []byte{style, 'h', 'e', 'l', 'l', 'o'}
	if style == styleBackendFIN || style == styleBackendRST {
		// Only what the handler reads: a backend closing with unread
		// data would reset instead.
		msg = msg[:1]
	}
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	switch style {
	case styleClientFIN, styleClientRST:
		got := make([]byte, len(msg)-1)
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg[1:]) {
			return fmt.Errorf("echo %q: %v", got, err)
		}
		if style == styleClientRST {
			if err := c.SetLinger(0); err != nil {
				return err
			}
			return c.Close() // RST
		}
		if err := c.CloseWrite(); err != nil { // FIN first
			return err
		}
		if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
			return fmt.Errorf("after FIN: %q, %v", rest, err)
		}
		return nil // both FINs done; Close sends nothing
	case styleBackendFIN:
		got, err := io.ReadAll(c) // until the backend's FIN
		if err != nil || string(got) != "bye\n" {
			return fmt.Errorf("backend close: %q, %v", got, err)
		}
		return c.Close() // second FIN
	case styleBackendRST:
		got, err := io.ReadAll(c)
		if !lab.IsReset(err) {
			return fmt.Errorf("backend reset: read %q, %v; want a reset", got, err)
		}
		return nil
	}
	return fmt.Errorf("style %q", style)
}

// runStyles runs one connection per entry of styles with workers
// concurrent clients and fails the test on the first error.
func runStyles(t *testing.T, l *lab.Lab, ports *portSource, styles []byte, workers int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(styles) {
					return
				}
				if err := lifecycleConn(l.Client(), ports.get(), styles[i]); err != nil {
					errs <- fmt.Errorf("connection %d (%q): %w", i, styles[i], err)
					next.Store(int64(len(styles)))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// expectedClosed counts styles per initiator and reason.
func expectedClosed(styles []byte) flow.Closed {
	var c flow.Closed
	for _, s := range styles {
		switch s {
		case styleClientFIN, styleStream:
			c.ClientFIN++
		case styleBackendFIN:
			c.BackendFIN++
		case styleClientRST:
			c.ClientRST++
		case styleBackendRST:
			c.BackendRST++
		}
	}
	return c
}

// drain waits until every closure has been counted, then jumps the loop's
// clock past time-wait and waits for an empty flow map. It checks the
// counters exactly and that no pair was orphaned, repaired or broken.
func drain(t *testing.T, x *inprocXLB, want flow.Closed, opened uint64) {
	t.Helper()
	// The last FIN or RST of a connection may still be on its way when the
	// client returns.
	x.WaitSample(t, 60*time.Second, fmt.Sprintf("closures %+v counted", want), func(s *flow.Sample) bool {
		return s.Closed.Total() >= want.Total()
	})
	x.Advance(t, flow.TimeWait+time.Second)
	s := x.WaitSample(t, 60*time.Second, "flow map empty", func(s *flow.Sample) bool {
		return s.FlowEntries == 0 && s.Active == 0 && s.TimeWait == 0 && s.Resetting == 0
	})
	// One more cycle: nothing comes back.
	s = x.WaitSample(t, 30*time.Second, "another cycle", func(*flow.Sample) bool { return true })
	if s.FlowEntries != 0 {
		t.Fatalf("flow map has %d entries again", s.FlowEntries)
	}
	if s.Closed != want {
		t.Fatalf("closed %+v, want exactly %+v", s.Closed, want)
	}
	if s.Opened != opened || s.Counters.PairsReplaced != 0 {
		t.Fatalf("opened %d (want %d), replaced %d (want 0: no tuple was reused)", s.Opened, opened, s.Counters.PairsReplaced)
	}
	if s.Orphaned != 0 || s.InvariantRepairs != 0 || s.Counters.InvariantViolations != 0 || s.Lone != 0 {
		t.Fatalf("orphaned %d, repairs %d, data-path invariant violations %d, lone %d; want all 0",
			s.Orphaned, s.InvariantRepairs, s.Counters.InvariantViolations, s.Lone)
	}
	if s.Counters.Actions[0] != 0 {
		t.Fatalf("XDP_ABORTED %d times", s.Counters.Actions[0])
	}
}

// TestLifecycleCloseCounts: 500 connections closed by the client with FIN,
// 500 by the backend with FIN, 100 by client RST and 100 by backend RST.
func TestLifecycleCloseCounts(t *testing.T) {
	l, x := lifecycleLab(t)
	var styles []byte
	for _, n := range []struct {
		style byte
		count int
	}{{styleClientFIN, 500}, {styleBackendFIN, 500}, {styleClientRST, 100}, {styleBackendRST, 100}} {
		styles = append(styles, bytes.Repeat([]byte{n.style}, n.count)...)
	}
	rand.New(rand.NewPCG(3, 3)).Shuffle(len(styles), func(i, j int) { styles[i], styles[j] = styles[j], styles[i] })
	start := time.Now()
	runStyles(t, l, newPortSource(), styles, 16)
	t.Logf("%d connections in %v", len(styles), time.Since(start).Round(time.Millisecond))
	want := flow.Closed{ClientFIN: 500, BackendFIN: 500, ClientRST: 100, BackendRST: 100}
	drain(t, x, want, uint64(len(styles)))
	t.Logf("drained after %v", time.Since(start).Round(time.Millisecond))
}

// TestLifecycleHalfClose: after the client's FIN the backend streams 1 MiB;
// every byte arrives, then the connection closes as a client FIN.
func TestLifecycleHalfClose(t *testing.T) {
	l, x := lifecycleLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := l.Client().DialFrom(ctx, 10000, lifecycleAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write([]byte{styleStream}); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// While the backend streams, the pair is half-closed, not terminal.
	s := x.WaitSample(t, 30*time.Second, "half-closed pair", func(s *flow.Sample) bool { return s.FlowEntries == 2 })
	if s.Active != 1 || s.Closed.Total() != 0 {
		t.Fatalf("half-closed pair: active %d closed %+v", s.Active, s.Closed)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read after half-close: %v (%d bytes)", err, len(got))
	}
	if len(got) != lifecycleStream {
		t.Fatalf("received %d bytes, want %d", len(got), lifecycleStream)
	}
	for i, b := range got {
		if b != streamByte(i) {
			t.Fatalf("byte %d is %#x, want %#x", i, b, streamByte(i))
		}
	}
	drain(t, x, flow.Closed{ClientFIN: 1}, 1)
	if b, ok := x.Loop.Latest().Backend(0); !ok || b.Stats.ReceivedBytes < lifecycleStream {
		t.Fatalf("backend 0 stats %+v: want at least %d bytes received from it", b.Stats, lifecycleStream)
	}
}

// TestLifecycleChurn: 20,000 short connections with seeded random close
// styles; the flow map returns to zero with no invariant violation.
func TestLifecycleChurn(t *testing.T) {
	l, x := lifecycleLab(t)
	rng := rand.New(rand.NewPCG(20000, 42))
	styles := make([]byte, 20000)
	for i := range styles {
		styles[i] = lifecycleStyles[rng.IntN(len(lifecycleStyles))]
	}
	start := time.Now()
	runStyles(t, l, newPortSource(), styles, 32)
	t.Logf("%d connections in %v", len(styles), time.Since(start).Round(time.Millisecond))
	drain(t, x, expectedClosed(styles), uint64(len(styles)))
	t.Logf("drained after %v", time.Since(start).Round(time.Millisecond))
}
