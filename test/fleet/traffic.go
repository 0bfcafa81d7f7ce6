package fleet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// conn is a client connection through the service that has read its
// banner: Host is the XLB host that carries it.
type conn struct {
	c      *net.TCPConn
	r      *bufio.Reader
	Host   netip.Addr
	Opened time.Time
	life   *Life // long-lived connections only
}

// dialService opens a connection to the service from the client namespace
// and reads the banner.
func (l *Lab) dialService(ctx context.Context) (*conn, error) {
	c, err := l.Client.DialFrom(ctx, 0, netip.AddrPortFrom(VIP, ServicePort).String())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("banner: %w", err)
	}
	host, err := bannerHost(line)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return &conn{c: c, r: r, Host: host, Opened: time.Now()}, nil
}

// dialServiceWithin is dialService retried until a connection reads its
// banner or bound passes, each attempt bounded by attempt. It is for the
// first connection after a playbook: a host that announces the VIP has
// told the router, which installs the route a moment later, so a single
// try can still meet "network is unreachable". It returns the connection,
// the failed attempts and the last error (when it gives up).
func (l *Lab) dialServiceWithin(bound, attempt time.Duration) (*conn, int, error) {
	failed := 0
	for deadline := time.Now().Add(bound); ; {
		ctx, cancel := context.WithTimeout(context.Background(), attempt)
		c, err := l.dialService(ctx)
		cancel()
		if err == nil {
			return c, failed, nil
		}
		failed++
		if time.Now().After(deadline) {
			return nil, failed, fmt.Errorf("no connection to %s:%d within %v (%d attempts), last: %w", VIP, ServicePort, bound, failed, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// bannerHost returns the peer address of a banner line.
func bannerHost(line string) (netip.Addr, error) {
	_, peer, ok := strings.Cut(strings.TrimSpace(line), " peer=")
	if !ok {
		return netip.Addr{}, fmt.Errorf("banner %q: no peer", line)
	}
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("banner %q: %w", line, err)
	}
	return ap.Addr(), nil
}

// exchange sends msg and reads it back within timeout.
func (c *conn) exchange(msg string, timeout time.Duration) error {
	c.c.SetDeadline(time.Now().Add(timeout))
	defer c.c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c.c, msg); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if string(buf) != msg {
		return fmt.Errorf("echo %q, sent %q", buf, msg)
	}
	return nil
}

// Failure is a new connection that did not complete.
type Failure struct {
	At  time.Time
	Err string
}

// Break is a long-lived connection that stopped working.
type Break struct {
	At     time.Time
	Opened time.Time
	Host   netip.Addr // the XLB host that carried it
	Err    string
}

// Stats is a snapshot of a Workload.
type Stats struct {
	NewOK       int
	NewFailed   int
	Failures    []Failure
	NewByHost   map[netip.Addr]int
	LongOpen    map[netip.Addr]int // long-lived connections open now, per host
	LongOpened  int
	Breaks      []Break
	Exchanges   int // long-lived messages echoed
	ShortPeriod time.Duration
}

// Workload is the client: a stream of short connections (connect, banner,
// one echoed message, close) and a set of long-lived connections that
// exchange a message every LongLivedInterval. A long-lived connection that
// breaks is recorded and replaced.
type Workload struct {
	l      *Lab
	period time.Duration
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	st    Stats
	long  map[*conn]struct{}
	lives []*Life
	seq   int
}

// Life is the lifetime of one long-lived connection.
type Life struct {
	Host   netip.Addr
	Opened time.Time
	Broken time.Time // zero while it works
}

// StartWorkload starts the client. It opens long-lived connections until
// every host carries at least minPerHost of them (at most maxLong), then
// starts the short connections, one every period.
func (l *Lab) StartWorkload(minPerHost, maxLong int, period time.Duration) (*Workload, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Workload{l: l, period: period, ctx: ctx, cancel: cancel, long: map[*conn]struct{}{}}
	w.st.NewByHost = map[netip.Addr]int{}
	w.st.LongOpen = map[netip.Addr]int{}
	w.st.ShortPeriod = period
	for n := 0; n < maxLong && !w.enough(minPerHost); n++ {
		c, err := w.open()
		if err != nil {
			w.Stop()
			return nil, fmt.Errorf("long-lived connection %d: %w", n+1, err)
		}
		w.startLong(c)
	}
	if !w.enough(minPerHost) {
		st := w.Stats()
		w.Stop()
		return nil, fmt.Errorf("after %d long-lived connections some host carries fewer than %d: %v", maxLong, minPerHost, st.LongOpen)
	}
	w.wg.Add(1)
	go w.shortLoop()
	return w, nil
}

func (w *Workload) enough(minPerHost int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.l.Hosts {
		if w.st.LongOpen[h.Addr] < minPerHost {
			return false
		}
	}
	return true
}

// open opens one connection through the service, counting it as a new
// connection.
func (w *Workload) open() (*conn, error) {
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	c, err := w.l.dialService(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.ctx.Err() == nil {
			w.st.NewFailed++
			w.st.Failures = append(w.st.Failures, Failure{At: time.Now(), Err: err.Error()})
		}
		return nil, err
	}
	w.st.NewOK++
	w.st.NewByHost[c.Host]++
	return c, nil
}

func (w *Workload) shortLoop() {
	defer w.wg.Done()
	t := time.NewTicker(w.period)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		w.short()
	}
}

// short is one short connection: open, one echoed message, close. A
// failure anywhere counts as a failed new connection.
func (w *Workload) short() {
	c, err := w.open()
	if err != nil {
		return
	}
	defer c.c.Close()
	w.mu.Lock()
	w.seq++
	msg := fmt.Sprintf("short-%08d\n", w.seq)
	w.mu.Unlock()
	if err := c.exchange(msg, 5*time.Second); err != nil && w.ctx.Err() == nil {
		w.mu.Lock()
		w.st.NewOK--
		w.st.NewByHost[c.Host]--
		w.st.NewFailed++
		w.st.Failures = append(w.st.Failures, Failure{At: time.Now(), Err: fmt.Sprintf("via %s: %v", c.Host, err)})
		w.mu.Unlock()
	}
}

func (w *Workload) startLong(c *conn) {
	w.mu.Lock()
	c.life = &Life{Host: c.Host, Opened: c.Opened}
	w.lives = append(w.lives, c.life)
	w.long[c] = struct{}{}
	w.st.LongOpen[c.Host]++
	w.st.LongOpened++
	w.mu.Unlock()
	w.wg.Add(1)
	go w.longLoop(c)
}

// longLoop exchanges a message every LongLivedInterval until the
// connection breaks (recorded, then replaced) or the workload stops.
func (w *Workload) longLoop(c *conn) {
	defer w.wg.Done()
	t := time.NewTicker(LongLivedInterval)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-w.ctx.Done():
			c.c.Close()
			return
		case <-t.C:
		}
		err := c.exchange(fmt.Sprintf("tick-%06d\n", i), 5*time.Second)
		if w.ctx.Err() != nil {
			c.c.Close()
			return
		}
		w.mu.Lock()
		if err == nil {
			w.st.Exchanges++
			w.mu.Unlock()
			continue
		}
		delete(w.long, c)
		w.st.LongOpen[c.Host]--
		now := time.Now()
		c.life.Broken = now
		w.st.Breaks = append(w.st.Breaks, Break{At: now, Opened: c.Opened, Host: c.Host, Err: err.Error()})
		w.mu.Unlock()
		c.c.Close()
		// Replace it; a failure to open is a failed new connection.
		for w.ctx.Err() == nil {
			nc, err := w.open()
			if err == nil {
				w.startLong(nc)
				return
			}
			time.Sleep(time.Second)
		}
		return
	}
}

// Stats returns a snapshot.
func (w *Workload) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.st
	st.Failures = append([]Failure(nil), w.st.Failures...)
	st.Breaks = append([]Break(nil), w.st.Breaks...)
	st.NewByHost = map[netip.Addr]int{}
	for k, v := range w.st.NewByHost {
		st.NewByHost[k] = v
	}
	st.LongOpen = map[netip.Addr]int{}
	for k, v := range w.st.LongOpen {
		st.LongOpen[k] = v
	}
	return st
}

// Carried returns how many long-lived connections host carried at from
// (open then and not broken before), and how many more were opened on it
// between from and to.
func (w *Workload) Carried(host netip.Addr, from, to time.Time) (atStart, opened int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.lives {
		if l.Host != host {
			continue
		}
		switch {
		case !l.Opened.After(from) && (l.Broken.IsZero() || l.Broken.After(from)):
			atStart++
		case l.Opened.After(from) && !l.Opened.After(to):
			opened++
		}
	}
	return atStart, opened
}

// Stop stops the client and closes its connections.
func (w *Workload) Stop() {
	w.cancel()
	w.mu.Lock()
	for c := range w.long {
		c.c.Close()
	}
	w.mu.Unlock()
	w.wg.Wait()
}
