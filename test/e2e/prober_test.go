package e2e

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/test/lab"
)

// The prober opens new connections through XLB all the time, several at
// once, so that every swap of the daemon has handshakes in flight. How
// long a handshake took (connect(): from the SYN to the SYN-ACK) is how
// long a new SYN went unanswered: a SYN nobody answers is retransmitted
// after 1 s, so a lost one shows as a dial of a second or more.

const (
	proberWorkers = 4
	proberPause   = 20 * time.Millisecond // between one worker's connections
	proberTimeout = 15 * time.Second      // a dial gives up (three SYN retransmissions)
)

// probe is one new connection.
type probe struct {
	start   time.Time
	dial    time.Duration // SYN to established
	backend byte          // the backend that greeted it
	// retrans counts the SYNs sent again (TCP_INFO total_retrans right
	// after the handshake): a SYN that went unanswered.
	retrans uint32
	err     error
	worker  int
}

type prober struct {
	host *lab.Host
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	mu     sync.Mutex
	probes []probe
}

// startProber starts the prober's workers on host until halt.
func startProber(t testing.TB, host *lab.Host) *prober {
	p := &prober{host: host, stop: make(chan struct{})}
	for w := range proberWorkers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case <-p.stop:
					return
				case <-time.After(proberPause):
				}
				pr := p.one()
				pr.worker = w
				p.mu.Lock()
				p.probes = append(p.probes, pr)
				p.mu.Unlock()
			}
		}()
	}
	t.Cleanup(p.halt)
	return p
}

// halt stops the workers and waits for them (idempotent).
func (p *prober) halt() {
	p.once.Do(func() { close(p.stop) })
	p.wg.Wait()
}

// one opens a connection, reads the backend's greeting and closes.
func (p *prober) one() probe {
	var pr probe
	var c net.Conn
	d := net.Dialer{Timeout: proberTimeout}
	err := p.host.Do(func() error {
		pr.start = time.Now()
		var err error
		c, err = d.Dial("tcp", listenAddr)
		pr.dial = time.Since(pr.start)
		return err
	})
	if err != nil {
		pr.err = fmt.Errorf("new connection at %s: %w", pr.start.Format("15:04:05.000"), err)
		return pr
	}
	defer c.Close()
	info, err := tcpInfo(c.(*net.TCPConn))
	if err != nil {
		pr.err = err
		return pr
	}
	pr.retrans = info.Total_retrans
	c.SetReadDeadline(time.Now().Add(proberTimeout))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		pr.err = fmt.Errorf("new connection at %s, greeting: %w", pr.start.Format("15:04:05.000"), err)
		return pr
	}
	pr.backend = b[0]
	return pr
}

// tcpInfo is the kernel's TCP_INFO of c.
func tcpInfo(c *net.TCPConn) (*unix.TCPInfo, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var info *unix.TCPInfo
	var serr error
	if err := raw.Control(func(fd uintptr) { info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		return nil, err
	}
	return info, serr
}

// between returns the probes that started in [from, to].
func (p *prober) between(from, to time.Time) []probe {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []probe
	for _, pr := range p.probes {
		if !pr.start.Before(from) && !pr.start.After(to) {
			out = append(out, pr)
		}
	}
	return out
}

// window sums up the probes that started in [from, to] (a zero from:
// since the start): the longest handshake, how many, and how many SYNs
// were sent again.
func (p *prober) window(from, to time.Time) (longest time.Duration, n, retrans int) {
	probes := p.between(from, to)
	for _, pr := range probes {
		longest = max(longest, pr.dial)
		retrans += int(pr.retrans)
	}
	return longest, len(probes), retrans
}

// settle waits until every worker recorded a probe started after at, so
// that every probe started before at is recorded, however long its
// handshake took.
func (p *prober) settle(t testing.TB, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(2 * proberTimeout)
	for {
		seen := map[int]bool{}
		for _, pr := range p.between(at.Add(time.Nanosecond), time.Now()) {
			seen[pr.worker] = true
		}
		if len(seen) == proberWorkers {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d prober workers opened a connection in %v", len(seen), proberWorkers, 2*proberTimeout)
		}
		time.Sleep(proberPause)
	}
}

func (p *prober) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.probes)
}

func (p *prober) failures() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, pr := range p.probes {
		if pr.err != nil {
			errs = append(errs, pr.err)
		}
	}
	return errs
}
