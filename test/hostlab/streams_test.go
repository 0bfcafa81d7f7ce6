package hostlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xlbproject/xlb/test/lab"
)

// streamExchangeTimeout bounds one exchange of a stream (write a chunk,
// read its echo): generous, the machine is shared and noisy, and nothing
// here measures how long a hand-off pauses a flow.
const streamExchangeTimeout = 30 * time.Second

// streams are long-lived connections from the lab client through XLB to the
// backends' echo servers. Each one sends a chunk of random bytes (1 byte to
// 4 KiB) every interval, reads the echo and compares it byte for byte, until
// closed; a connection that breaks (reset, timeout, wrong bytes) records
// its error and stops.
type streams struct {
	list []*stream
	stop chan struct{}
	wg   sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

type stream struct {
	id        int
	c         net.Conn
	rng       *rand.Rand
	sent      atomic.Int64 // bytes written (and, once exchanged, echoed)
	exchanges atomic.Int64
	mu        sync.Mutex
	err       error
}

// openStreams dials n streams to addr from client, one at a time, checks a
// first exchange on each and starts their loops.
func openStreams(client *lab.Host, addr string, n int, every time.Duration) (*streams, error) {
	s := &streams{stop: make(chan struct{})}
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), streamExchangeTimeout)
		c, err := client.Dial(ctx, addr)
		cancel()
		if err != nil {
			s.close()
			return nil, fmt.Errorf("stream %d of %d: %w", i+1, n, err)
		}
		st := &stream{id: i + 1, c: c, rng: rand.New(rand.NewPCG(uint64(i), 12))}
		s.list = append(s.list, st)
		if err := st.exchange(); err != nil {
			s.close()
			return nil, fmt.Errorf("stream %d of %d: first exchange: %w", i+1, n, err)
		}
	}
	for _, st := range s.list {
		s.wg.Add(1)
		go s.loop(st, every)
	}
	return s, nil
}

func (s *streams) loop(st *stream, every time.Duration) {
	defer s.wg.Done()
	// Spread the streams over the interval.
	t := time.NewTimer(time.Duration(st.rng.Int64N(int64(every))))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if err := st.exchange(); err != nil {
			st.fail(err)
			return
		}
		t.Reset(every)
	}
}

// exchange writes a random chunk while reading its echo and compares them.
func (st *stream) exchange() error {
	msg := make([]byte, 1+st.rng.IntN(4<<10))
	for i := range msg {
		msg[i] = byte(st.rng.Uint32())
	}
	st.c.SetDeadline(time.Now().Add(streamExchangeTimeout))
	werr := make(chan error, 1)
	go func() { _, err := st.c.Write(msg); werr <- err }()
	got := make([]byte, len(msg))
	_, rerr := io.ReadFull(st.c, got)
	if err := <-werr; err != nil {
		return fmt.Errorf("write after %d bytes: %w", st.sent.Load(), err)
	}
	if rerr != nil {
		return fmt.Errorf("read the echo after %d bytes: %w", st.sent.Load(), rerr)
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("the echo of %d bytes differs, after %d bytes", len(msg), st.sent.Load())
	}
	st.sent.Add(int64(len(msg)))
	st.exchanges.Add(1)
	return nil
}

func (st *stream) fail(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err == nil {
		st.err = fmt.Errorf("stream %d (%s): %w", st.id, st.c.LocalAddr(), err)
	}
}

func (st *stream) failure() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// failures returns the error of every stream that broke so far.
func (s *streams) failures() error {
	var errs []error
	for _, st := range s.list {
		errs = append(errs, st.failure())
	}
	return errors.Join(errs...)
}

// marks returns each stream's exchange count, for progressed.
func (s *streams) marks() []int64 {
	m := make([]int64, len(s.list))
	for i, st := range s.list {
		m[i] = st.exchanges.Load()
	}
	return m
}

// progressed reports whether every stream completed at least k exchanges
// since marks were taken, and how many have not.
func (s *streams) progressed(marks []int64, k int64) (bool, int) {
	behind := 0
	for i, st := range s.list {
		if st.exchanges.Load() < marks[i]+k {
			behind++
		}
	}
	return behind == 0, behind
}

// bytes returns the bytes sent and echoed back over all streams.
func (s *streams) bytes() int64 {
	var n int64
	for _, st := range s.list {
		n += st.sent.Load()
	}
	return n
}

// close stops the loops and ends every stream cleanly: a half-close
// (FIN), after which the echo server must send nothing more than the echoes
// already counted and then close (EOF). It returns the failures of every
// stream, those of the loops included; later calls return the same.
func (s *streams) close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		for _, st := range s.list {
			if st.failure() == nil {
				if err := st.finish(); err != nil {
					st.fail(err)
				}
			}
			st.c.Close()
		}
		s.closeErr = s.failures()
	})
	return s.closeErr
}

// finish half-closes a stream and waits for the server's EOF.
func (st *stream) finish() error {
	st.c.SetDeadline(time.Now().Add(streamExchangeTimeout))
	if err := st.c.(*net.TCPConn).CloseWrite(); err != nil {
		return fmt.Errorf("half-close: %w", err)
	}
	rest, err := io.ReadAll(st.c)
	if err != nil {
		return fmt.Errorf("after the half-close: %w", err)
	}
	if len(rest) > 0 {
		return fmt.Errorf("%d unexpected bytes after the half-close", len(rest))
	}
	return nil
}
