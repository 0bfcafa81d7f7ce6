package hostnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NextHopResync is how often WatchNextHops re-reads every neighbour and
// interface address of the watched interfaces: rtnetlink drops events
// when a listener's socket buffer overflows (ENOBUFS), and a slot the
// data path claimed with an address read just before a change misses that
// change's event.
const NextHopResync = 30 * time.Second

// nextHopRetry is the pause before subscribing again after a subscription
// ended with an error.
const nextHopRetry = time.Second

// NextHopWriter is the part of the data path WatchNextHops keeps current
// (*dataplane.Dataplane): the MACs of its next-hop slots, and which of them
// are stale.
type NextHopWriter interface {
	// UpdateNeighbour gives every slot of the next hop (ifindex, ip)
	// destination MAC mac and returns how many slots changed.
	UpdateNeighbour(ifindex int, ip netip.Addr, mac net.HardwareAddr) (int, error)
	// UpdateInterfaceMAC gives every slot on ifindex source MAC mac,
	// records mac as the address frames must carry to be balanced on
	// ifindex (frames for other MACs pass to the kernel), and returns how
	// many slots changed.
	UpdateInterfaceMAC(ifindex int, mac net.HardwareAddr) (int, error)
	// MarkNeighbourStale marks the slots of the next hop (ifindex, ip)
	// stale (its neighbour failed): their pairs look their next hop up
	// again at their next packet. It returns how many it marked.
	MarkNeighbourStale(ifindex int, ip netip.Addr) (int, error)
	// MarkNextHopsStale marks stale every slot with a neighbour address
	// for which match(ifindex, ip) is true (a route change moved
	// destinations away from it), and returns how many it marked.
	MarkNextHopsStale(match func(ifindex int, ip netip.Addr) bool) (int, error)
}

// KeepResolved keeps the kernel's neighbour entry of a gateway resolved
// (Resolver.KeepResolved).
type KeepResolved func(ifindex int, ip netip.Addr) error

// NextHopWatcher keeps the data path's next hops on the kernel's
// neighbours, interface addresses and routes (issue 13 "Next hops that
// follow the network": an established flow picks up a new MAC within 1 s;
// issue 27: and a new route or a failed neighbour at its next packet).
// Start it with WatchNextHops; it stops when its context ends.
type NextHopWatcher struct {
	dp      NextHopWriter
	log     logrus.FieldLogger
	h       *netlink.Handle // made on the watcher's own thread, in the caller's namespace
	watched map[int]bool
	resync  time.Duration
	after   func(time.Duration) <-chan time.Time
	keep    KeepResolved
	kept    map[neighKey]bool
	neigh   map[neighKey]string // the MAC last written per neighbour
	links   map[int]string      // the MAC last written per interface
	routes  routeTable          // every IPv4 route as last read; nil before the first read
	done    chan struct{}
}

// WatchNextHops watches the IPv4 neighbours and the link addresses of the
// interfaces ifindexes, and the IPv4 routes of every table, in the
// caller's network namespace (the calling thread's) through rtnetlink: a
// neighbour that gains or changes its link-layer address is passed to
// dp.UpdateNeighbour, one that turns FAILED to dp.MarkNeighbourStale, an
// interface whose address changes to dp.UpdateInterfaceMAC. Route events
// gather for routeSettle; then the routes are read again and the next hops
// the change moved destinations away from (movedHops: a gateway gone or
// replaced, a new more specific route) go to dp.MarkNextHopsStale, so the
// established pairs through them look their next hop up again (issue 27
// finding 1). The gateways of the routes on the watched interfaces go to
// keep (nil: none), once each: the kernel keeps them resolved and probed,
// so pairs can move to a new gateway at once, and a gateway that stops
// answering turns FAILED (and, with net.ipv4.fib_multipath_use_neigh, a
// multipath route stops choosing it). It reads everything once at the
// start, after subscribing, and again every NextHopResync (and after every
// new subscription) to cover lost events; routes changed while no watcher
// ran are not compared with anything. Errors are logged, never fatal: a
// subscription that fails or ends is tried again a second later. It fails
// only when it cannot open the namespace or a netlink handle in it.
//
// The watcher keeps a thread of its own (locked), in the caller's
// namespace, where it makes every socket. A new thread is there already
// when every thread of the process is (the daemon: no capability
// needed); otherwise (a caller that switched its own thread, as tests do)
// it enters the namespace with setns, which needs CAP_SYS_ADMIN, and the
// thread ends with the watcher.
func WatchNextHops(ctx context.Context, ifindexes []int, dp NextHopWriter, keep KeepResolved, log logrus.FieldLogger) (*NextHopWatcher, error) {
	return watchNextHops(ctx, ifindexes, dp, keep, log, NextHopResync, time.After)
}

// watchNextHops is WatchNextHops with the resync period and the timer that
// lets route events settle (routeSettle) chosen by the caller: tests fire
// that timer themselves.
func watchNextHops(ctx context.Context, ifindexes []int, dp NextHopWriter, keep KeepResolved, log logrus.FieldLogger, resync time.Duration,
	after func(time.Duration) <-chan time.Time) (*NextHopWatcher, error) {
	if log == nil {
		log = logrus.StandardLogger()
	}
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("hostnet: next-hop watcher: open the network namespace: %w", err)
	}
	w := &NextHopWatcher{dp: dp, log: log, watched: map[int]bool{},
		resync: resync, after: after, keep: keep, kept: map[neighKey]bool{}, neigh: map[neighKey]string{}, links: map[int]string{}, done: make(chan struct{})}
	for _, i := range ifindexes {
		w.watched[i] = true
	}
	started := make(chan error, 1)
	go w.run(ctx, ns, started)
	if err := <-started; err != nil {
		return nil, fmt.Errorf("hostnet: next-hop watcher: %w", err)
	}
	return w, nil
}

// enterOwnThread locks the calling goroutine to its thread and moves the
// thread into ns unless it is there. It returns whether the thread moved
// (then it must end with the goroutine, never serve another).
func enterOwnThread(ns netns.NsHandle) (bool, error) {
	runtime.LockOSThread()
	cur, err := netns.Get()
	if err != nil {
		return true, fmt.Errorf("open the thread's network namespace: %w", err)
	}
	defer cur.Close()
	if cur.Equal(ns) {
		return false, nil
	}
	if err := netns.Set(ns); err != nil {
		return true, fmt.Errorf("enter the caller's network namespace: %w", err)
	}
	return true, nil
}

// Done is closed once the watcher has stopped (its context ended) and
// released its sockets.
func (w *NextHopWatcher) Done() <-chan struct{} { return w.done }

// subscription is one set of rtnetlink subscriptions.
type subscription struct {
	neigh  chan netlink.NeighUpdate
	links  chan netlink.LinkUpdate
	routes chan netlink.RouteUpdate
	stop   chan struct{}
}

func (w *NextHopWatcher) run(ctx context.Context, ns netns.NsHandle, started chan<- error) {
	defer close(w.done)
	moved, err := enterOwnThread(ns)
	ns.Close()
	if !moved {
		defer runtime.UnlockOSThread()
	}
	if err != nil {
		started <- err
		return
	}
	if w.h, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
		started <- fmt.Errorf("netlink handle: %w", err)
		return
	}
	defer w.h.Close()
	started <- nil
	tick := time.NewTicker(w.resync)
	defer tick.Stop()
	var retry, settle <-chan time.Time
	sub, err := w.subscribe()
	if err != nil {
		w.log.WithError(err).Warn("cannot subscribe to neighbour and link events; retrying")
		retry = time.After(nextHopRetry)
	}
	w.resyncAll()
	for {
		select {
		case <-ctx.Done():
			sub.close()
			return
		case u, ok := <-sub.neigh:
			if ok {
				w.onNeighbour(u.Neigh, u.Type == unix.RTM_NEWNEIGH)
				continue
			}
		case u, ok := <-sub.links:
			if ok {
				w.onLink(u.Link)
				continue
			}
		case _, ok := <-sub.routes:
			if ok {
				if settle == nil {
					settle = w.after(routeSettle)
				}
				continue
			}
		case <-settle:
			settle = nil
			w.syncRoutes()
			continue
		case <-retry:
			retry = nil
			if sub, err = w.subscribe(); err != nil {
				w.log.WithError(err).Warn("cannot subscribe to neighbour and link events; retrying")
				retry = time.After(nextHopRetry)
			}
			w.resyncAll()
			continue
		case <-tick.C:
			w.resyncAll()
			continue
		}
		// A subscription ended (its socket failed: lost events).
		sub.close()
		sub = subscription{}
		retry = time.After(nextHopRetry)
	}
}

// subscribe opens both subscriptions on the watcher's thread, in its
// namespace.
func (w *NextHopWatcher) subscribe() (subscription, error) {
	s := subscription{neigh: make(chan netlink.NeighUpdate, 256), links: make(chan netlink.LinkUpdate, 64),
		routes: make(chan netlink.RouteUpdate, 256), stop: make(chan struct{})}
	report := func(err error) {
		select {
		case <-s.stop: // the socket was closed on purpose
		default:
			w.log.WithError(err).Warn("netlink event subscription ended; subscribing again and re-reading every neighbour")
		}
	}
	err := netlink.NeighSubscribeWithOptions(s.neigh, s.stop, netlink.NeighSubscribeOptions{ErrorCallback: report})
	if err != nil {
		close(s.stop)
		return subscription{}, fmt.Errorf("neighbour events: %w", err)
	}
	err = netlink.LinkSubscribeWithOptions(s.links, s.stop, netlink.LinkSubscribeOptions{ErrorCallback: report})
	if err != nil {
		s.links, s.routes = nil, nil
		s.close()
		return subscription{}, fmt.Errorf("link events: %w", err)
	}
	err = netlink.RouteSubscribeWithOptions(s.routes, s.stop, netlink.RouteSubscribeOptions{ErrorCallback: report})
	if err != nil {
		s.routes = nil
		s.close()
		return subscription{}, fmt.Errorf("route events: %w", err)
	}
	return s, nil
}

// close ends every subscription and drains them until their readers have
// returned (a reader blocked on a full channel would never see its
// socket closed).
func (s subscription) close() {
	if s.stop == nil {
		return
	}
	close(s.stop)
	for s.neigh != nil || s.links != nil || s.routes != nil {
		select {
		case _, ok := <-s.neigh:
			if !ok {
				s.neigh = nil
			}
		case _, ok := <-s.links:
			if !ok {
				s.links = nil
			}
		case _, ok := <-s.routes:
			if !ok {
				s.routes = nil
			}
		}
	}
}

// resyncAll passes every neighbour with an address and every interface
// address of the watched interfaces on, whether or not they changed since
// the last write: a slot claimed meanwhile may hold an older one. It reads
// the routes again too (syncRoutes).
func (w *NextHopWatcher) resyncAll() {
	w.syncRoutes()
	for i := range w.watched {
		if l, err := w.h.LinkByIndex(i); err != nil {
			w.log.WithError(err).WithField("ifindex", i).Warn("cannot read the interface's address")
		} else {
			delete(w.links, i)
			w.onLink(l)
		}
		ns, err := w.h.NeighList(i, netlink.FAMILY_V4)
		if err != nil {
			w.log.WithError(err).WithField("ifindex", i).Warn("cannot list the interface's neighbours")
			continue
		}
		for _, n := range ns {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				delete(w.neigh, neighKey{i, ip.Unmap()})
			}
			w.onNeighbour(n, true)
		}
	}
}

// onNeighbour passes a neighbour's address on when it is new or changed.
// A neighbour that turned FAILED (it answers no ARP) has its slots marked
// stale: their pairs look their next hop up again, and take another route
// if there is one (a multipath route skips a failed neighbour with
// net.ipv4.fib_multipath_use_neigh). Deletions and entries still resolving
// (incomplete) change nothing: the kernel's garbage collector deletes
// neighbours that only XDP traffic uses (it never confirms them), and the
// slot keeps the last address known, the best guess while the kernel
// resolves again.
func (w *NextHopWatcher) onNeighbour(n netlink.Neigh, added bool) {
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok || !w.watched[n.LinkIndex] || n.Family != netlink.FAMILY_V4 {
		return
	}
	ip = ip.Unmap()
	key := neighKey{n.LinkIndex, ip}
	if added && n.State&netlink.NUD_FAILED != 0 && ip.Is4() && !ip.IsUnspecified() {
		w.onFailedNeighbour(key)
		return
	}
	if !added || len(n.HardwareAddr) != 6 || n.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) != 0 || !ip.Is4() || ip.IsUnspecified() {
		return
	}
	mac := n.HardwareAddr.String()
	if w.neigh[key] == mac {
		return
	}
	changed, err := w.dp.UpdateNeighbour(n.LinkIndex, ip, n.HardwareAddr)
	log := w.log.WithFields(logrus.Fields{"ifindex": n.LinkIndex, "neighbour": ip, "mac": mac})
	if err != nil {
		log.WithError(err).Error("cannot update the next hop's MAC")
		return
	}
	w.neigh[key] = mac
	if changed > 0 {
		log.WithField("slots", changed).Info("next hop moved to a new MAC")
	}
}

// onFailedNeighbour marks the slots of a FAILED neighbour stale.
func (w *NextHopWatcher) onFailedNeighbour(key neighKey) {
	delete(w.neigh, key) // its next answer is passed on whatever the MAC
	marked, err := w.dp.MarkNeighbourStale(key.ifindex, key.ip)
	log := w.log.WithFields(logrus.Fields{"ifindex": key.ifindex, "neighbour": key.ip})
	if err != nil {
		log.WithError(err).Error("cannot mark the failed neighbour's next hops stale")
		return
	}
	if marked > 0 {
		log.WithField("slots", marked).Info("neighbour failed: its pairs look their next hop up again")
	}
}

// syncRoutes reads every IPv4 route and marks stale the next hops the
// change since the last read moved destinations away from (movedHops).
// The first read only records the routes. When marking fails the routes
// are not recorded, so the next read compares with the same ones again.
func (w *NextHopWatcher) syncRoutes() {
	rs, err := w.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		w.log.WithError(err).Warn("cannot read the routes")
		return
	}
	now := newRouteTable(rs)
	w.keepGateways(now)
	if w.routes != nil {
		moved := movedHops(w.routes, now)
		if !moved.empty() {
			marked, err := w.dp.MarkNextHopsStale(moved.match)
			if err != nil {
				w.log.WithError(err).WithField("next_hops", moved.String()).Error("cannot mark the next hops of changed routes stale")
				return
			}
			if marked > 0 {
				w.log.WithFields(logrus.Fields{"next_hops": moved.String(), "slots": marked}).Info("routes changed: their pairs look their next hop up again")
			}
		}
	}
	w.routes = now
}

// keepGateways passes each gateway of a unicast route on a watched
// interface to w.keep, once (an error is logged, and not retried).
func (w *NextHopWatcher) keepGateways(t routeTable) {
	if w.keep == nil {
		return
	}
	for _, rs := range t {
		for _, r := range rs {
			if r.typ != unix.RTN_UNICAST {
				continue
			}
			for _, h := range r.hops {
				key := neighKey{h.ifindex, h.gw}
				if !h.gw.IsValid() || !w.watched[h.ifindex] || w.kept[key] {
					continue
				}
				w.kept[key] = true
				if err := w.keep(h.ifindex, h.gw); err != nil {
					w.log.WithError(err).WithFields(logrus.Fields{"ifindex": h.ifindex, "gateway": h.gw}).
						Warn("cannot keep the gateway's neighbour entry resolved; pairs move to it once the kernel resolves it")
				}
			}
		}
	}
}

// onLink passes an interface's address on when it changed.
func (w *NextHopWatcher) onLink(l netlink.Link) {
	a := l.Attrs()
	if a == nil || !w.watched[a.Index] || len(a.HardwareAddr) != 6 {
		return
	}
	mac := a.HardwareAddr.String()
	if w.links[a.Index] == mac {
		return
	}
	changed, err := w.dp.UpdateInterfaceMAC(a.Index, a.HardwareAddr)
	log := w.log.WithFields(logrus.Fields{"interface": a.Name, "ifindex": a.Index, "mac": mac})
	if err != nil {
		log.WithError(err).Error("cannot update the next hops' source MAC")
		return
	}
	w.links[a.Index] = mac
	if changed > 0 {
		log.WithField("slots", changed).Info("interface address changed: next hops updated")
	}
}
