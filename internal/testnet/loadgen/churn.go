package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
)

// CloseOrder says which side of a connection closes first, and so which
// one holds TIME_WAIT for its 4-tuple.
type CloseOrder int

const (
	// ClientFirst: after the reply the client sends FIN first; the server
	// answers with its own (testnet.RequestClientCloses). The client holds
	// TIME_WAIT.
	ClientFirst CloseOrder = iota
	// ServerFirst: the server closes right after its reply, as an HTTP
	// server does for "Connection: close" (testnet.RequestServerCloses);
	// the client reads to EOF and closes. The server holds TIME_WAIT, so a
	// balancer must not hand the server's 4-tuple out again for 60 s
	// (issue 13).
	ServerFirst
)

func (o CloseOrder) String() string {
	if o == ServerFirst {
		return "server-first"
	}
	return "client-first"
}

func (o CloseOrder) request() []byte {
	if o == ServerFirst {
		return []byte(testnet.RequestServerCloses)
	}
	return []byte(testnet.RequestClientCloses)
}

// Defaults for zero Config fields.
const (
	DefaultWorkers = 16 // as the issue 13 measurements (wrk, 16 connections)
	DefaultWindow  = 10 * time.Second
	// DefaultConnectTimeout lets a SYN be retransmitted (after 1 s, then
	// 3 s) before the connect counts as failed, so a lost SYN shows as a
	// slow connect, the stall issue 13 is about.
	DefaultConnectTimeout = 10 * time.Second
	DefaultIOTimeout      = 10 * time.Second
)

// Config describes one churn run.
type Config struct {
	// Target is the address every connection goes to (a listen address of
	// XLB, a backend, a NAT address), serving testnet.Respond.
	Target netip.AddrPort
	// Sources are the client addresses connections leave from, in turn:
	// connection n of the run (over all workers) from Sources[n %
	// len(Sources)], its port chosen by the kernel at connect as without
	// them (IP_BIND_ADDRESS_NO_PORT, so net.ipv4.tcp_tw_reuse and the
	// whole port range apply per destination). Each must be an address of
	// the namespace (lab.Lab's AddClientAddresses). Linux gives each
	// (source, destination) address pair a TCP timestamp offset of its
	// own, so several sources are several clients whose timestamps are
	// unrelated (issue 36). Empty: the kernel's choice, the namespace's
	// address toward Target.
	Sources []netip.Addr
	// Workers is the number of connections in flight at once, each a loop
	// of its own (0: DefaultWorkers). Without Rate the workers run as
	// fast as the path allows: the lab's full rate, which differs from
	// machine to machine (twice as fast on some hosts of the same kind).
	Workers int
	// Rate paces the run (connections per second, 0: unpaced): the
	// workers take their start times from one schedule of slots Start +
	// i/Rate. A worker that falls behind skips the slots already past
	// instead of bursting to catch up, so at most Rate*d + Workers + 1
	// connections start in any interval of length d, whatever the
	// machine's speed; on a machine too slow for Rate the run achieves
	// less (Result.Rate). A test that must stay under a configured
	// capacity offers a rate derived from that capacity.
	Rate float64
	// Duration is how long workers start new connections (required).
	Duration time.Duration
	// Close is who closes first.
	Close CloseOrder
	// Window is the width of the completion windows (0: DefaultWindow).
	Window time.Duration
	// ConnectTimeout bounds one connect, IOTimeout the exchange after it
	// (0: the defaults).
	ConnectTimeout, IOTimeout time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if !c.Target.IsValid() {
		return c, errors.New("loadgen: no target")
	}
	if c.Duration <= 0 {
		return c, errors.New("loadgen: no duration")
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Workers < 0 {
		return c, fmt.Errorf("loadgen: %d workers", c.Workers)
	}
	if c.Rate < 0 {
		return c, fmt.Errorf("loadgen: rate %v/s", c.Rate)
	}
	for _, a := range c.Sources {
		if !a.Is4() && !a.Is6() || a.Is4() != c.Target.Addr().Is4() {
			return c, fmt.Errorf("loadgen: source %v for target %v", a, c.Target)
		}
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.IOTimeout <= 0 {
		c.IOTimeout = DefaultIOTimeout
	}
	return c, nil
}

// Run opens connections from h's namespace to cfg.Target with cfg.Workers
// workers for cfg.Duration (or until ctx ends) and returns what they
// measured once every worker finished its last connection. Each
// connection: connect (timed), send the close order's request, read
// testnet.RespondReply, close in the chosen order. A failed connection
// is counted by kind and the worker goes on with the next. The error is
// about the run itself (bad Config, a worker that could not enter the
// namespace), never about a connection.
func Run(ctx context.Context, h *testnet.Host, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	ws := make([]*worker, cfg.Workers)
	errs := make([]error, cfg.Workers)
	sched := &schedule{start: start, rate: cfg.Rate}
	src := &sources{addrs: cfg.Sources}
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &worker{cfg: cfg, start: start, sched: sched, src: src}
		wg.Go(func() {
			errs[i] = h.Do(func() error { ws[i].loop(ctx, deadline); return nil })
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return merge(cfg, start, time.Since(start), ws), nil
}

// schedule hands out the start times of a paced run (Config.Rate): slot
// i is at start + i/rate, each slot goes to one caller, and a slot whose
// time has passed when no caller took it is skipped.
type schedule struct {
	start time.Time
	rate  float64      // 0: unpaced
	n     atomic.Int64 // the next slot not handed out
}

// next is the time the caller's next connection may start: the earliest
// slot not handed out yet and not already past (the zero Time when
// unpaced).
func (s *schedule) next() time.Time {
	if s.rate == 0 {
		return time.Time{}
	}
	due := int64(math.Ceil(time.Since(s.start).Seconds() * s.rate))
	for {
		cur := s.n.Load()
		i := max(cur, due)
		if s.n.CompareAndSwap(cur, i+1) {
			return s.start.Add(time.Duration(float64(i) / s.rate * float64(time.Second)))
		}
	}
}

// sources hands out Config.Sources in turn, one per connection.
type sources struct {
	addrs []netip.Addr
	n     atomic.Uint64
}

// next is the source address of the caller's next connection (nil
// without Sources: the kernel chooses).
func (s *sources) next() *net.TCPAddr {
	if len(s.addrs) == 0 {
		return nil
	}
	a := s.addrs[(s.n.Add(1)-1)%uint64(len(s.addrs))]
	return &net.TCPAddr{IP: a.AsSlice()}
}

// bindNoPort sets IP_BIND_ADDRESS_NO_PORT on a socket about to be bound
// to a source address: the bind takes the address only, and connect
// picks the port for the 4-tuple, as it does for an unbound socket.
func bindNoPort(_, _ string, rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// worker is one loop of connections; its records are merged at the end.
type worker struct {
	cfg   Config
	start time.Time
	sched *schedule
	src   *sources

	windows   []int           // completions per window since start
	connects  []time.Duration // connect time of each established connection
	refusals  []time.Duration // connect time of each refused one
	failures  [numFailures]int
	firstErrs []error
}

// loop runs connections until deadline or ctx ends. It runs on a thread
// in the namespace (testnet.Host.Do), where its sockets are created.
func (w *worker) loop(ctx context.Context, deadline time.Time) {
	d := net.Dialer{Timeout: w.cfg.ConnectTimeout}
	if len(w.cfg.Sources) > 0 {
		d.Control = bindNoPort
	}
	target := w.cfg.Target.String()
	req := w.cfg.Close.request()
	buf := make([]byte, 2*len(testnet.RespondReply))
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if at := w.sched.next(); !at.IsZero() {
			if !at.Before(deadline) {
				return
			}
			if d := time.Until(at); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		if a := w.src.next(); a != nil {
			d.LocalAddr = a
		}
		t0 := time.Now()
		c, err := d.DialContext(ctx, "tcp", target)
		took := time.Since(t0)
		if err != nil {
			if ctx.Err() != nil {
				return // cancelled: not a failure of the path
			}
			kind := classify(err, true)
			if kind == Refused {
				w.refusals = append(w.refusals, took)
			}
			w.fail(kind, err)
			continue
		}
		w.connects = append(w.connects, took)
		if err := w.exchange(c.(*net.TCPConn), req, buf); err != nil {
			w.fail(classify(err, false), err)
			continue
		}
		i := int(time.Since(w.start) / w.cfg.Window)
		for len(w.windows) <= i {
			w.windows = append(w.windows, 0)
		}
		w.windows[i]++
	}
}

// exchange sends req, reads the reply and closes c in the configured
// order.
func (w *worker) exchange(c *net.TCPConn, req, buf []byte) error {
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(w.cfg.IOTimeout)); err != nil {
		return err
	}
	if _, err := c.Write(req); err != nil {
		return err
	}
	want := len(testnet.RespondReply)
	var n int
	var err error
	if w.cfg.Close == ServerFirst {
		// Read to the server's FIN; a byte more than the reply is wrong.
		n, err = io.ReadFull(c, buf[:want+1])
		if errors.Is(err, io.ErrUnexpectedEOF) && n == want {
			err = nil
		} else if err == nil {
			err = errBadReply
		}
	} else {
		n, err = io.ReadFull(c, buf[:want])
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = errBadReply
	}
	if err != nil {
		return err
	}
	if string(buf[:n]) != testnet.RespondReply {
		return errBadReply
	}
	return c.Close() // client first: our FIN; server first: the answer to its FIN
}

// maxErrors bounds the errors a run keeps as examples.
const maxErrors = 10

func (w *worker) fail(kind Failure, err error) {
	w.failures[kind]++
	if len(w.firstErrs) < maxErrors {
		at := time.Since(w.start).Round(time.Millisecond)
		w.firstErrs = append(w.firstErrs, fmt.Errorf("%v at +%v: %w", kind, at, err))
	}
}
