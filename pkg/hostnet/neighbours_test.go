package hostnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xlbproject/xlb/internal/testnet"
)

// nextHopCall is one call a recordingWriter received.
type nextHopCall struct {
	ifindex int
	ip      netip.Addr // invalid for UpdateInterfaceMAC
	mac     string
}

// recordingWriter records the watcher's calls.
type recordingWriter struct {
	mu    sync.Mutex
	calls []nextHopCall
	stale []func(ifindex int, ip netip.Addr) bool // MarkNextHopsStale's matches
}

func (r *recordingWriter) UpdateNeighbour(ifindex int, ip netip.Addr, mac net.HardwareAddr) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, nextHopCall{ifindex, ip, mac.String()})
	return 1, nil
}

func (r *recordingWriter) UpdateInterfaceMAC(ifindex int, mac net.HardwareAddr) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, nextHopCall{ifindex: ifindex, mac: mac.String()})
	return 1, nil
}

func (r *recordingWriter) MarkNeighbourStale(ifindex int, ip netip.Addr) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, nextHopCall{ifindex: ifindex, ip: ip, mac: "stale"})
	return 1, nil
}

func (r *recordingWriter) MarkNextHopsStale(match func(ifindex int, ip netip.Addr) bool) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stale = append(r.stale, match)
	return 1, nil
}

// staleMatches reports whether a MarkNextHopsStale call matched the next
// hop (ifindex, ip).
func (r *recordingWriter) staleMatches(ifindex int, ip netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.stale, func(m func(int, netip.Addr) bool) bool { return m(ifindex, ip) })
}

// count is how many recorded calls match c.
func (r *recordingWriter) count(c nextHopCall) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, got := range r.calls {
		if got == c {
			n++
		}
	}
	return n
}

// any reports whether a recorded call matches f.
func (r *recordingWriter) any(f func(nextHopCall) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.calls, f)
}

// waitCalls polls until the writer has seen c at least n times.
func waitCalls(t *testing.T, r *recordingWriter, c nextHopCall, n int) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); r.count(c) < n; {
		if time.Now().After(end) {
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("no call %+v (x%d) within 20 s; calls: %+v", c, n, r.calls)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nextHopNet is a watcher namespace with two veth pairs: w0 (watched,
// 192.0.2.1/24) whose peer w1 (192.0.2.2/24) sits in a namespace of its
// own, and u0—u1 (not watched, 198.51.100.1/24), both ends in the
// watcher's namespace.
type nextHopNet struct {
	ns, peer     netns.NsHandle
	h, peerH     *netlink.Handle
	watched      int // ifindex of w0
	unwatched    int // ifindex of u0
	peerIfindex  int // ifindex of w1 in the peer namespace
	peerMAC, mac net.HardwareAddr
}

func newNextHopNet(t *testing.T) *nextHopNet {
	t.Helper()
	testnet.RequireRoot(t)
	n := &nextHopNet{peerMAC: net.HardwareAddr{0x02, 0, 0, 0x13, 0, 2}, mac: net.HardwareAddr{0x02, 0, 0, 0x13, 0, 1}}
	for _, p := range []*netns.NsHandle{&n.ns, &n.peer} {
		ns, err := testnet.NewAnon()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		*p = ns
	}
	var err error
	if n.h, err = netlink.NewHandleAt(n.ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.h.Close)
	if n.peerH, err = netlink.NewHandleAt(n.peer); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.peerH.Close)
	idx, err := testnet.AddVeth(
		testnet.VethEnd{Netlink: n.h, Name: "w0", MAC: n.mac, Addr: netip.MustParsePrefix("192.0.2.1/24")},
		testnet.VethEnd{Netlink: n.peerH, Netns: n.peer, Name: "w1", MAC: n.peerMAC, Addr: netip.MustParsePrefix("192.0.2.2/24")})
	if err != nil {
		t.Fatal(err)
	}
	n.watched, n.peerIfindex = idx.A, idx.B
	idx, err = testnet.AddVeth(
		testnet.VethEnd{Netlink: n.h, Name: "u0", Addr: netip.MustParsePrefix("198.51.100.1/24")},
		testnet.VethEnd{Name: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	n.unwatched = idx.A
	return n
}

// neighSet is `ip neigh replace ip lladdr mac dev ifindex nud permanent`.
func (n *nextHopNet) neighSet(t *testing.T, ifindex int, ip string, mac net.HardwareAddr) {
	t.Helper()
	err := n.h.NeighSet(&netlink.Neigh{LinkIndex: ifindex, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: net.ParseIP(ip), HardwareAddr: mac})
	if err != nil {
		t.Fatal(err)
	}
}

// watch starts a watcher of w0 inside the watcher namespace, stopped at
// cleanup.
func (n *nextHopNet) watch(t *testing.T, w NextHopWriter, resync time.Duration) *NextHopWatcher {
	t.Helper()
	return n.watchWith(t, w, resync, time.After, nil)
}

// watchWith is watch with the timer route events settle on and the
// gateways' keeper.
func (n *nextHopNet) watchWith(t *testing.T, w NextHopWriter, resync time.Duration, after func(time.Duration) <-chan time.Time,
	keep KeepResolved) *NextHopWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var nw *NextHopWatcher
	err := testnet.In(n.ns, func() error {
		var err error
		nw, err = watchNextHops(ctx, []int{n.watched}, w, keep, logrus.StandardLogger(), resync, after)
		return err
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-nw.Done():
		case <-time.After(20 * time.Second):
			t.Error("the watcher did not stop within 20 s of its context's end")
		}
	})
	return nw
}

// The peer of a watched interface changes its MAC and announces it
// (arp_notify: a gratuitous ARP): the kernel's neighbour entry, learnt by
// ARP, follows, and so does UpdateNeighbour. A neighbour replaced by hand
// and the interface's own address change are passed on too; nothing on an
// unwatched interface is.
func TestWatchNextHopsFollowsNeighbourAndLink(t *testing.T) {
	n := newNextHopNet(t)
	// Learn the peer by ARP: a connection attempt to a closed port.
	err := testnet.In(n.ns, func() error {
		c, err := net.DialTimeout("tcp", "192.0.2.2:9", 5*time.Second)
		if err == nil {
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingWriter{}
	w := n.watch(t, rec, NextHopResync)
	peer := netip.MustParseAddr("192.0.2.2")
	waitCalls(t, rec, nextHopCall{n.watched, peer, n.peerMAC.String()}, 1)
	waitCalls(t, rec, nextHopCall{ifindex: n.watched, mac: n.mac.String()}, 1)

	// The peer moves to a new MAC and announces it.
	moved := net.HardwareAddr{0x02, 0, 0, 0x13, 0, 0x22}
	err = testnet.In(n.peer, func() error {
		if err := testnet.Sysctl("net.ipv4.conf.w1.arp_notify", "1"); err != nil {
			return err
		}
		l, err := n.peerH.LinkByIndex(n.peerIfindex)
		if err != nil {
			return err
		}
		return n.peerH.LinkSetHardwareAddr(l, moved)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitCalls(t, rec, nextHopCall{n.watched, peer, moved.String()}, 1)

	// ip neigh replace on both interfaces: the unwatched one first, so
	// that the watched one's call proves the other was seen and skipped.
	other := net.HardwareAddr{0x02, 0, 0, 0x13, 0, 0x33}
	n.neighSet(t, n.unwatched, "198.51.100.7", other)
	n.neighSet(t, n.watched, "192.0.2.7", other)
	waitCalls(t, rec, nextHopCall{n.watched, netip.MustParseAddr("192.0.2.7"), other.String()}, 1)
	if rec.any(func(c nextHopCall) bool { return c.ifindex == n.unwatched }) {
		t.Error("a call for the unwatched interface")
	}

	// The watched interface's own address changes.
	own := net.HardwareAddr{0x02, 0, 0, 0x13, 0, 0x11}
	l, err := n.h.LinkByIndex(n.watched)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.h.LinkSetHardwareAddr(l, own); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, rec, nextHopCall{ifindex: n.watched, mac: own.String()}, 1)

	// An unchanged neighbour is not passed on again between resyncs.
	if c := rec.count(nextHopCall{n.watched, netip.MustParseAddr("192.0.2.7"), other.String()}); c != 1 {
		t.Errorf("192.0.2.7 passed on %d times, want once", c)
	}
	select {
	case <-w.Done():
		t.Fatal("the watcher stopped on its own")
	default:
	}
}

// The periodic resync passes every neighbour on again, changed or not:
// it covers events rtnetlink dropped.
func TestWatchNextHopsResyncs(t *testing.T) {
	n := newNextHopNet(t)
	mac := net.HardwareAddr{0x02, 0, 0, 0x13, 0, 0x44}
	n.neighSet(t, n.watched, "192.0.2.9", mac)
	rec := &recordingWriter{}
	n.watch(t, rec, 100*time.Millisecond)
	waitCalls(t, rec, nextHopCall{n.watched, netip.MustParseAddr("192.0.2.9"), mac.String()}, 3)
	waitCalls(t, rec, nextHopCall{ifindex: n.watched, mac: n.mac.String()}, 3)
}

// failingWriter fails every update.
type failingWriter struct{ recordingWriter }

func (f *failingWriter) UpdateNeighbour(ifindex int, ip netip.Addr, mac net.HardwareAddr) (int, error) {
	f.recordingWriter.UpdateNeighbour(ifindex, ip, mac)
	return 0, fmt.Errorf("refused")
}

// A writer that fails is logged and asked again (the last MAC written
// stays unknown), never the end of the watcher.
func TestWatchNextHopsSurvivesWriterErrors(t *testing.T) {
	n := newNextHopNet(t)
	mac := net.HardwareAddr{0x02, 0, 0, 0x13, 0, 0x55}
	n.neighSet(t, n.watched, "192.0.2.11", mac)
	rec := &failingWriter{}
	w := n.watch(t, rec, 100*time.Millisecond)
	waitCalls(t, &rec.recordingWriter, nextHopCall{n.watched, netip.MustParseAddr("192.0.2.11"), mac.String()}, 3)
	select {
	case <-w.Done():
		t.Fatal("the watcher stopped after a writer error")
	default:
	}
}
