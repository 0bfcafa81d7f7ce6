package testnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Handler serves one accepted connection. It reads and writes through c,
// which counts bytes; the server closes c after the handler returns. A
// returned error is recorded (ConnRecord.Err); a reset from the peer is
// expected in tests and recorded as ConnRecord.Reset, not as a failure of
// the server. New behaviours ("backend closes first", "send N bytes after
// the client's FIN", "answer with RST") are one Handler each; see Echo and
// Sink.
type Handler func(c *Conn) error

// Conn is the server side of one connection as a Handler sees it. Read and
// Write count bytes. It deliberately has no ReadFrom/WriteTo so io.Copy
// cannot bypass the counters.
type Conn struct {
	tcp *net.TCPConn
	mu  sync.Mutex
	in  int64
	out int64
}

// Read reads from the connection and counts the bytes received.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.tcp.Read(p)
	c.mu.Lock()
	c.in += int64(n)
	c.mu.Unlock()
	return n, err
}

// Write writes to the connection and counts the bytes sent.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.tcp.Write(p)
	c.mu.Lock()
	c.out += int64(n)
	c.mu.Unlock()
	return n, err
}

// CloseWrite sends FIN (half-close).
func (c *Conn) CloseWrite() error { return c.tcp.CloseWrite() }

// Reset closes the connection with an RST (SO_LINGER 0).
func (c *Conn) Reset() error {
	if err := c.tcp.SetLinger(0); err != nil {
		return err
	}
	return c.tcp.Close()
}

// TCP is the underlying connection, for deadlines and socket options.
// Bytes moved through it directly are not counted.
func (c *Conn) TCP() *net.TCPConn { return c.tcp }

// Remote is the peer's address as the server sees it.
func (c *Conn) Remote() netip.AddrPort { return addrPort(c.tcp.RemoteAddr()) }

// Bytes returns the bytes received and sent so far.
func (c *Conn) Bytes() (in, out int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.in, c.out
}

// ConnRecord describes one finished connection.
type ConnRecord struct {
	Remote   netip.AddrPort // the peer as seen by the server (XLB's SNAT address in e2e tests)
	Local    netip.AddrPort
	BytesIn  int64 // received from the peer
	BytesOut int64 // sent to the peer
	Reset    bool  // the peer reset the connection (ECONNRESET/EPIPE)
	Err      error // any other error the handler returned
}

// Stats summarise a server's connections since it started or since the
// last ResetStats.
type Stats struct {
	Accepted  int                // connections accepted
	Completed int                // handlers finished (len(Conns) + RecordsDropped)
	Active    int                // accepted but not finished
	Remotes   map[netip.Addr]int // peer address → connections accepted from it
	BytesIn   int64              // received, over completed connections
	BytesOut  int64              // sent, over completed connections
	Resets    int                // completed connections reset by the peer
	Errors    int                // completed connections whose handler returned another error
	// Conns holds the first MaxRecords completed connections in completion order.
	Conns          []ConnRecord
	RecordsDropped int
}

// MaxRecords bounds Stats.Conns per server so long benchmarks stay small.
const MaxRecords = 1 << 16

// Server accepts TCP connections inside a namespace and runs a Handler on
// each in its own goroutine.
type Server struct {
	ln      net.Listener
	handler Handler
	wg      sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond // signalled when a handler finishes
	stats  Stats
	active map[*net.TCPConn]struct{}
	closed bool
}

// Serve starts handler on addr (":port" or "ip:port") inside h's
// namespace. Closing the topology closes the server.
func (h *Host) Serve(addr string, handler Handler) (*Server, error) {
	return h.ServeWith(net.ListenConfig{}, addr, handler)
}

// ServeWith is Serve with the listener (and so every accepted connection)
// configured by lc, e.g. lc.KeepAliveConfig for the backends' TCP
// keepalive.
func (h *Host) ServeWith(lc net.ListenConfig, addr string, handler Handler) (*Server, error) {
	ln, err := h.listen(lc, addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		ln:      ln,
		handler: handler,
		active:  map[*net.TCPConn]struct{}{},
		stats:   Stats{Remotes: map[netip.Addr]int{}},
	}
	s.cond = sync.NewCond(&s.mu)
	h.addServer(s)
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the listening address.
func (s *Server) Addr() netip.AddrPort { return addrPort(s.ln.Addr()) }

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE; keep serving
			continue
		}
		tc := c.(*net.TCPConn)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			tc.Close()
			return
		}
		s.active[tc] = struct{}{}
		s.stats.Accepted++
		s.stats.Remotes[addrPort(tc.RemoteAddr()).Addr()]++
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(tc)
	}
}

func (s *Server) serve(tc *net.TCPConn) {
	defer s.wg.Done()
	c := &Conn{tcp: tc}
	err := s.handler(c)
	tc.Close()
	in, out := c.Bytes()
	rec := ConnRecord{
		Remote:   addrPort(tc.RemoteAddr()),
		Local:    addrPort(tc.LocalAddr()),
		BytesIn:  in,
		BytesOut: out,
		Reset:    IsReset(err),
	}
	if !rec.Reset {
		rec.Err = err
	}
	s.mu.Lock()
	delete(s.active, tc)
	st := &s.stats
	st.Completed++
	st.BytesIn += in
	st.BytesOut += out
	switch {
	case rec.Reset:
		st.Resets++
	case rec.Err != nil:
		st.Errors++
	}
	if len(st.Conns) < MaxRecords {
		st.Conns = append(st.Conns, rec)
	} else {
		st.RecordsDropped++
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// Stats returns a copy of the current statistics.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot()
}

func (s *Server) snapshot() Stats {
	st := s.stats
	st.Active = len(s.active)
	st.Remotes = maps.Clone(s.stats.Remotes)
	st.Conns = append([]ConnRecord(nil), s.stats.Conns...)
	return st
}

// ResetStats zeroes the statistics. Connections still active are counted
// again when they finish (but not as accepted).
func (s *Server) ResetStats() {
	s.mu.Lock()
	s.stats = Stats{Remotes: map[netip.Addr]int{}}
	s.mu.Unlock()
}

// WaitCompleted waits until at least n connections have completed since the
// last ResetStats, or ctx ends, and returns the statistics at that moment.
func (s *Server) WaitCompleted(ctx context.Context, n int) (Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	waitLocked(ctx, &s.mu, s.cond, func() bool { return s.stats.Completed >= n })
	st := s.snapshot()
	if st.Completed < n {
		return st, fmt.Errorf("testnet: %d of %d connections completed on %v: %w", st.Completed, n, s.Addr(), ctx.Err())
	}
	return st, nil
}

// Close stops accepting, closes active connections and waits for every
// goroutine of the server to finish. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	for c := range s.active {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// IsReset reports whether err means the peer reset the connection.
func IsReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// addrPort converts a *net.TCPAddr to an unmapped netip.AddrPort.
func addrPort(a net.Addr) netip.AddrPort {
	ta, ok := a.(*net.TCPAddr)
	if !ok || ta == nil {
		return netip.AddrPort{}
	}
	ap := ta.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

var _ io.ReadWriter = (*Conn)(nil)
