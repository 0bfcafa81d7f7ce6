package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// Established connections that must survive hostile traffic (issue 13:
// SYN flood, RST storm, next-hop change, sysctl reset): each does a round
// trip every so often while the test does its worst, and all are checked
// and closed cleanly at the end.

// tupleEcho is the backends' handler of those tests: one line "REMOTE
// LOCAL\n", the connection as the backend sees it (XLB's SNAT address and
// port, the backend's own address), then an echo of everything until the
// client's FIN.
func tupleEcho(c *testnet.Conn) error {
	if _, err := fmt.Fprintf(c, "%s %s\n", c.Remote(), c.TCP().LocalAddr()); err != nil {
		return err
	}
	return testnet.Echo(c)
}

// tupleLab is a one-arm lab whose backends serve tupleEcho on :8080.
type tupleLab struct {
	*lab.Lab
	servers []*testnet.Server // one per backend, in backend order
}

func newTupleLab(t testing.TB) *tupleLab {
	t.Helper()
	l := &tupleLab{Lab: lab.New(t, lab.Options{Topology: lab.OneArm, EchoPort: -1, SinkPort: -1})}
	for _, b := range l.Backends {
		s, err := b.Serve(":8080", tupleEcho)
		if err != nil {
			t.Fatal(err)
		}
		l.servers = append(l.servers, s)
	}
	return l
}

// heldConn is one established connection through XLB.
type heldConn struct {
	id      int
	c       *net.TCPConn
	client  netip.AddrPort // the client's end
	snat    netip.AddrPort // the client as the backend sees it: SNAT address and port
	backend netip.AddrPort // the backend's end
	rounds  atomic.Int64   // round trips done
}

// heldSet is a set of heldConns and the loops that keep them busy.
type heldSet struct {
	conns []*heldConn
	stop  chan struct{}
	wg    sync.WaitGroup

	mu   sync.Mutex
	errs []error
}

// holdConnections opens n connections from client to listenAddr, reads
// each one's tuple line and does a first round trip. With every > 0 each
// then does a round trip every `every` until finish.
func holdConnections(t testing.TB, client *lab.Host, n int, every time.Duration) *heldSet {
	t.Helper()
	s := &heldSet{stop: make(chan struct{})}
	for i := range n {
		hc, err := openHeld(client, i)
		if err != nil {
			t.Fatalf("held connection %d: %v", i, err)
		}
		t.Cleanup(func() { hc.c.Close() })
		s.conns = append(s.conns, hc)
	}
	if every > 0 {
		for _, hc := range s.conns {
			s.wg.Go(func() { s.exchange(hc, every) })
		}
	}
	t.Cleanup(s.halt)
	return s
}

// openHeld dials listenAddr, reads the tuple line and does a round trip.
func openHeld(client *lab.Host, id int) (*heldConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.DialFrom(ctx, 0, listenAddr)
	if err != nil {
		return nil, err
	}
	hc := &heldConn{id: id, c: c, client: c.LocalAddr().(*net.TCPAddr).AddrPort()}
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	line, err := readLine(c)
	if err == nil {
		remote, local, _ := strings.Cut(line, " ")
		if hc.snat, err = netip.ParseAddrPort(remote); err == nil {
			hc.backend, err = netip.ParseAddrPort(local)
		}
	}
	if err == nil {
		err = hc.roundTrip()
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("tuple line %q: %w", line, err)
	}
	return hc, nil
}

// readLine reads up to '\n' a byte at a time (nothing else is in flight).
func readLine(c net.Conn) (string, error) {
	var b strings.Builder
	var one [1]byte
	for b.Len() < 256 {
		if _, err := io.ReadFull(c, one[:]); err != nil {
			return b.String(), err
		}
		if one[0] == '\n' {
			return b.String(), nil
		}
		b.WriteByte(one[0])
	}
	return b.String(), fmt.Errorf("line too long")
}

// roundTrip sends a message naming the connection and the round and
// expects it back (workload_test.go's roundTrip, 60 s bound).
func (hc *heldConn) roundTrip() error {
	k := hc.rounds.Add(1)
	if err := roundTrip(hc.c, []byte(fmt.Sprintf("held %03d round %06d", hc.id, k))); err != nil {
		return fmt.Errorf("held connection %d (%v -> %v, round %d): %w", hc.id, hc.client, hc.backend, k, err)
	}
	return nil
}

func (s *heldSet) exchange(hc *heldConn, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if err := hc.roundTrip(); err != nil {
			s.fail(err)
			return
		}
	}
}

func (s *heldSet) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *heldSet) failures() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// halt stops the round-trip loops and waits for them (idempotent).
func (s *heldSet) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.wg.Wait()
}

// check fails t if a connection failed so far.
func (s *heldSet) check(t testing.TB, when string) {
	t.Helper()
	if errs := s.failures(); len(errs) > 0 {
		t.Fatalf("%s: %d of %d held connections failed (%d resets), first: %v", when, len(errs), len(s.conns), countResets(errs), errs[0])
	}
}

// remove takes hc out of the set (a test that ends it itself); call it
// only without round-trip loops or after halt.
func (s *heldSet) remove(hc *heldConn) {
	for i, x := range s.conns {
		if x == hc {
			s.conns = append(s.conns[:i], s.conns[i+1:]...)
			return
		}
	}
}

// finish stops the loops and checks every connection: no failure so far,
// one more round trip, and a clean close (our FIN, the backend's FIN
// with nothing else). It returns the round trips done in all.
func (s *heldSet) finish(t testing.TB) int64 {
	t.Helper()
	s.halt()
	for _, hc := range s.conns {
		if err := hc.roundTrip(); err != nil {
			s.fail(err)
			continue
		}
		hc.c.CloseWrite()
		hc.c.SetReadDeadline(time.Now().Add(ioTimeout))
		if rest, err := io.ReadAll(hc.c); err != nil || len(rest) != 0 {
			s.fail(fmt.Errorf("held connection %d at close: %q, %v", hc.id, rest, err))
		}
		hc.c.Close()
	}
	s.check(t, "at the end")
	var n int64
	for _, hc := range s.conns {
		n += hc.rounds.Load()
	}
	return n
}
