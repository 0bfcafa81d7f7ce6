package e2e

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// nextHopRecoverLimit is the bound: an established flow picks up
// a backend's new MAC within 2 s.
const nextHopRecoverLimit = 2 * time.Second

// A backend's MAC changes (its interface gets a new address and, with
// arp_notify, announces it with a gratuitous ARP): the kernel's neighbour
// entry in XLB's namespace changes, the daemon updates the data path's
// next hop, and the established connection to that backend works again
// within 2 s; new connections reach the backend too.
func TestNextHopMACChange(t *testing.T) {
	l := newTupleLab(t)
	p := startXLB(t, l.Lab, labConfig(l.Lab, ""))
	held := holdConnections(t, l.Client(), len(l.Backends), 0)
	victim := held.conns[0]
	b := l.Backends[backendIndex(t, l.Lab, victim.backend.Addr())]
	if err := b.Do(func() error {
		for _, k := range []string{"net.ipv4.conf.all.arp_notify", "net.ipv4.conf.eth0.arp_notify"} {
			if err := testnet.Sysctl(k, "1"); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	oldMAC := b.MAC()
	newMAC := net.HardwareAddr{0x02, 0x0f, 0, 0, 0, byte(b.IP().As4()[3])}

	// Round trips on the victim's connection, one after the other, each
	// stamped with when it started and ended.
	rt := startRoundTrips(victim)
	defer rt.halt()
	time.Sleep(200 * time.Millisecond) // some round trips before the change
	link, err := b.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	if err := b.Netlink().LinkSetHardwareAddr(link, newMAC); err != nil {
		t.Fatal(err)
	}
	recovered, err := rt.firstAfter(changed, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	took := recovered.Sub(changed)
	t.Logf("backend %v: MAC %v -> %v; the established connection's first round trip started after the change completed %v later",
		b.IP(), oldMAC, newMAC, took.Round(time.Millisecond))
	logNeighbour(t, l.Lab, b)
	time.Sleep(500 * time.Millisecond) // the connection keeps working after recovery
	rt.halt()
	if err := rt.failure(); err != nil {
		t.Fatalf("the established connection: %v", err)
	}
	if took > nextHopRecoverLimit {
		t.Fatalf("the established connection recovered %v after the MAC change, want within %v", took, nextHopRecoverLimit)
	}
	// New connections reach every backend, the changed one included.
	reached := map[string]int{}
	for range 3 * len(l.Backends) {
		hc, err := openHeld(l.Client(), 1000)
		if err != nil {
			t.Fatalf("new connection after the MAC change: %v", err)
		}
		reached[hc.backend.Addr().String()]++
		hc.c.Close()
	}
	if reached[b.IP().String()] == 0 {
		t.Fatalf("no new connection reached the backend whose MAC changed: %v", reached)
	}
	held.finish(t)
	stopXLB(t, l.Lab, p)
}

// logNeighbour logs XLB's neighbour entry for backend b.
func logNeighbour(t *testing.T, l *lab.Lab, b *lab.Backend) {
	t.Helper()
	ns, err := l.XLB.Netlink().NeighList(l.XLB.Ifindex(), netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.IP.Equal(b.IP().AsSlice()) {
			t.Logf("XLB's neighbour entry for %v: %v state %#x", b.IP(), n.HardwareAddr, n.State)
		}
	}
}

// roundTrips runs round trips on one connection back to back and
// records when each started and ended.
type roundTrips struct {
	hc   *heldConn
	stop chan struct{}
	once sync.Once
	done chan struct{}

	mu    sync.Mutex
	spans [][2]time.Time
	err   error
}

func startRoundTrips(hc *heldConn) *roundTrips {
	rt := &roundTrips{hc: hc, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(rt.done)
		for {
			select {
			case <-rt.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			start := time.Now()
			err := hc.roundTrip()
			rt.mu.Lock()
			if err != nil {
				rt.err = err
			} else {
				rt.spans = append(rt.spans, [2]time.Time{start, time.Now()})
			}
			rt.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return rt
}

func (rt *roundTrips) halt() {
	rt.once.Do(func() { close(rt.stop) })
	<-rt.done
}

func (rt *roundTrips) failure() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.err
}

// firstAfter waits for the first round trip that started after t to
// complete and returns when it did.
func (rt *roundTrips) firstAfter(t time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		rt.mu.Lock()
		for _, s := range rt.spans {
			if s[0].After(t) {
				rt.mu.Unlock()
				return s[1], nil
			}
		}
		err := rt.err
		rt.mu.Unlock()
		if err != nil {
			return time.Time{}, err
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no round trip started after the change completed within %v", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
