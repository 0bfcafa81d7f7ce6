package backend

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/test/lab"
)

// recorder is a Publisher that keeps every published set.
type recorder struct {
	mu           sync.Mutex
	svcs         []uint16 // the service of each set
	sets         [][]Ref
	resets       []uint32 // ResetBackend calls
	memberResets []uint32 // ResetMember calls
}

func (r *recorder) SetRoutable(svc uint16, refs []Ref) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.svcs = append(r.svcs, svc)
	r.sets = append(r.sets, slices.Clone(refs))
	return nil
}

func (r *recorder) ResetBackend(id uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resets = append(r.resets, id)
	return nil
}

func (r *recorder) ResetMember(id uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.memberResets = append(r.memberResets, id)
	return nil
}

func (r *recorder) last() []Ref {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return nil
	}
	return r.sets[len(r.sets)-1]
}

func TestManagerResolvesAndPublishes(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	h := l.XLB.Netlink()
	res := hostnet.NewResolver(h, l.XLB.IP(), map[int]string{l.XLB.Ifindex(): "eth0"})
	missing := netip.MustParseAddr("192.0.2.99") // on-link, but nobody answers ARP
	cfg := []config.Backend{}
	for i, b := range l.Backends {
		cfg = append(cfg, config.Backend{Name: "backend-" + string(rune('1'+i)), IP: b.IP()})
	}
	cfg = append(cfg, config.Backend{Name: "ghost", IP: missing})
	pub := &recorder{}
	m := NewManager(NewStatic(cfg), res, pub, Options{RetryInterval: 50 * time.Millisecond, PendingWait: 3 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-m.Synced():
	case <-time.After(30 * time.Second):
		t.Fatal("manager never synced")
	}
	want := []Ref{}
	for i, b := range l.Backends {
		want = append(want, Ref{ID: uint32(i), Member: uint32(i), IP: b.IP(), Name: "backend-" + string(rune('1'+i)), Weight: 1})
	}
	if got := pub.last(); !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	snap := m.Snapshot()
	if len(snap) != 4 {
		t.Fatalf("snapshot %+v", snap)
	}
	for _, s := range snap[:3] {
		if s.State != Routable || s.Route.Interface != "eth0" || s.Route.NextHop != s.IP {
			t.Fatalf("backend %+v, want routable via eth0", s)
		}
	}
	if g := snap[3]; g.State != Unreachable || g.Reason == "" || g.Name != "ghost" || g.ID != 3 {
		t.Fatalf("ghost %+v, want unreachable with a reason", g)
	}
	// once the kernel gives up on ARP, the reason names the silent next hop
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(m.Snapshot()[3].Reason, "does not answer ARP") {
		if time.Now().After(deadline) {
			t.Fatalf("ghost reason %q never reported the ARP failure", m.Snapshot()[3].Reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// the data path's FIB lookup needs valid, kernel-managed neighbours
	neighs, err := h.NeighList(l.XLB.Ifindex(), netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	managed := 0
	for _, n := range neighs {
		if n.FlagsExt&netlink.NTF_EXT_MANAGED != 0 && n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE) != 0 {
			managed++
		}
	}
	if managed != 3 {
		t.Fatalf("%d valid managed neighbours, want 3: %+v", managed, neighs)
	}
	cancel()
	<-done
	if err := res.Cleanup(); err != nil {
		t.Fatal(err)
	}
	neighs, _ = h.NeighList(l.XLB.Ifindex(), netlink.FAMILY_V4)
	for _, n := range neighs {
		if n.FlagsExt&netlink.NTF_EXT_MANAGED != 0 {
			t.Fatalf("managed neighbour %s left after cleanup", n.IP)
		}
	}
}

func TestRegistryReusesOnlyFreeIDs(t *testing.T) {
	inUse := map[uint32]bool{}
	r := newRegistry[netip.Addr]("backend", dataplane.MaxBackends, func(id uint32) bool { return inUse[id] })
	cur := func(netip.Addr) bool { return false }
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) }
	first := func(i uint32) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }
	for i := uint32(0); i < dataplane.MaxBackends; i++ {
		if id, _, reused, err := r.id(first(i), cur); err != nil || id != i || reused {
			t.Fatalf("id %d reused %v err %v", id, reused, err)
		}
	}
	inUse[0] = true
	id, old, reused, err := r.id(ip(1), cur)
	if err != nil || id != 1 || !reused || old != first(1) {
		t.Fatalf("reused id %d (of %v, reused %v) err %v, want 1 of %v (0 still owns flows)", id, old, reused, err, first(1))
	}
	r.undoReuse(ip(1), old)
	if got, _, _, _ := r.id(first(1), cur); got != 1 {
		t.Fatalf("after undoReuse %v has id %d, want 1 back", first(1), got)
	}
	for i := uint32(0); i < dataplane.MaxBackends; i++ {
		inUse[i] = true
	}
	if _, _, _, err := r.id(ip(2), cur); err == nil {
		t.Fatal("want an error when every id owns flows")
	}
}

// fakeClock is a Clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Issue 14: ids of departed backends are reused once the samples show no
// pair for IDReuseQuiet after both the departure and the last pair, and a
// reused id is reset in the data path first. Before, the 1,025th distinct
// address was skipped for good.
func TestManagerReusesIDsOfDepartedBackends(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_000_000, 0)}
	pub := &recorder{}
	m := NewManager(NewStatic(nil), nil, pub, Options{Clock: clk})
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}) }
	set := func(from, n int) []Backend {
		var bs []Backend
		for i := from; i < from+n; i++ {
			bs = append(bs, Backend{Name: addr(i).String(), IP: addr(i)})
		}
		return bs
	}
	n := int(dataplane.MaxBackends)
	m.apply(set(0, n))   // every id handed out
	m.apply(set(1, n-1)) // addr(0) departs; its id 0 still has pairs
	m.NotePairs(clk.add(90*time.Second), []uint32{0})
	lastBusy := clk.Now()

	newcomer := addr(n)
	ids := func() map[netip.Addr]uint32 {
		out := map[netip.Addr]uint32{}
		for _, s := range m.Snapshot() {
			out[s.IP] = s.ID
		}
		return out
	}
	m.apply(append(set(1, n-1), Backend{Name: "new", IP: newcomer}))
	if _, ok := ids()[newcomer]; ok {
		t.Fatalf("%v got an id while every id still owns pairs or was busy less than %v ago", newcomer, IDReuseQuiet)
	}
	// Samples keep coming, without pairs for id 0, but not yet long enough.
	clk.now = lastBusy.Add(IDReuseQuiet - time.Second)
	m.NotePairs(clk.Now(), nil)
	m.apply(append(set(1, n-1), Backend{Name: "new", IP: newcomer}))
	if _, ok := ids()[newcomer]; ok {
		t.Fatal("id reused before IDReuseQuiet after its last busy sample")
	}
	clk.now = lastBusy.Add(IDReuseQuiet)
	m.NotePairs(clk.Now(), nil)
	m.apply(append(set(1, n-1), Backend{Name: "new", IP: newcomer}))
	got := ids()
	if id, ok := got[newcomer]; !ok || id != 0 {
		t.Fatalf("%v: id %d (listed %v), want the departed backend's id 0", newcomer, id, ok)
	}
	if _, ok := got[addr(0)]; ok {
		t.Fatalf("the departed backend whose id was reused is still listed")
	}
	if !slices.Equal(pub.memberResets, []uint32{0}) || !slices.Equal(pub.resets, []uint32{0}) {
		t.Fatalf("ResetMember calls %v, ResetBackend calls %v, want [0] and [0] before the reuse", pub.memberResets, pub.resets)
	}
}

// A next hop that never answers flips between "pending" and "failed" while
// the kernel retries ARP; that is logged once, and again only after the
// backend was routable in between.
func TestUnreachableLoggedOnce(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	m := NewManager(NewStatic(nil), nil, &recorder{}, Options{Log: log})
	ip := netip.MustParseAddr("192.0.2.99")
	m.apply([]Backend{{Name: "ghost", IP: ip}})
	failed := errors.New("next hop 192.0.2.99 on eth0 does not answer ARP")
	for i := 0; i < 5; i++ {
		m.record(ip, hostnet.Route{}, hostnet.ErrNeighbourPending)
		m.record(ip, hostnet.Route{}, failed)
	}
	warnings := func() int {
		n := 0
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel {
				n++
			}
		}
		return n
	}
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings for one unreachable spell, want 1", n)
	}
	if s := m.Snapshot()[0]; s.State != Unreachable || s.Reason != failed.Error() {
		t.Fatalf("status %+v", s)
	}
	m.record(ip, hostnet.Route{Interface: "eth0", NextHop: ip}, nil)
	m.record(ip, hostnet.Route{}, failed)
	if n := warnings(); n != 2 {
		t.Fatalf("%d warnings after routable and unreachable again, want 2", n)
	}
}

// Backends a predecessor knew (hot upgrade, crash adoption) keep their ids:
// the adopted pairs reference them. One the provider still lists becomes
// routable under its id; one it no longer lists is departed (shown draining
// while pairs reference it); a new one gets an id above every adopted one.
func TestManagerKeepsAdoptedIDs(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	res := hostnet.NewResolver(l.XLB.Netlink(), l.XLB.IP(), map[int]string{l.XLB.Ifindex(): "eth0"})
	kept, gone, added := l.Backends[0].IP(), netip.MustParseAddr("192.0.2.98"), l.Backends[1].IP()
	known := []Known{{ID: 7, Backend: 7, IP: kept, Name: "kept"}, {ID: 3, Backend: 3, IP: gone}}
	cfg := []config.Backend{{Name: "kept", IP: kept}, {Name: "added", IP: added}}
	pub := &recorder{}
	m := NewManager(NewStatic(cfg), res, pub, Options{Known: known, RetryInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	select {
	case <-m.Synced():
	case <-time.After(30 * time.Second):
		t.Fatal("manager never synced")
	}
	want := []Ref{{ID: 7, Member: 7, IP: kept, Name: "kept", Weight: 1}, {ID: 8, Member: 8, IP: added, Name: "added", Weight: 1}}
	if got := pub.last(); !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	var departed *Status
	for _, s := range m.Snapshot() {
		if s.IP == gone {
			departed = &s
		}
	}
	if departed == nil || departed.ID != 3 || departed.State != Departed || departed.Discovered || departed.Name != gone.String() {
		t.Fatalf("the adopted backend the provider no longer lists: %+v, want departed with id 3, named by its address", departed)
	}
}

// With health_check, a backend whose server stops is unhealthy within a
// few intervals and left out of the published set (its route untouched);
// once the server is back it is published again (DESIGN §6b).
func TestManagerHealthChecks(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	res := hostnet.NewResolver(l.XLB.Netlink(), l.XLB.IP(), map[int]string{l.XLB.Ifindex(): "eth0"})
	var cfg []config.Backend
	for i, b := range l.Backends {
		cfg = append(cfg, config.Backend{Name: "backend-" + string(rune('1'+i)), IP: b.IP()})
	}
	echo := netip.MustParseAddrPort(l.EchoAddr(0))
	hc := &config.HealthCheck{Type: config.HealthCheckTCP, Interval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond, Rise: 2, Fall: 2}
	pub := &recorder{}
	m := NewManager(NewStatic(cfg), res, pub, Options{RetryInterval: 50 * time.Millisecond,
		HealthCheck: hc, HealthPort: echo.Port(), HealthSource: l.XLB.IP(),
		HealthNetns: func(f func()) { _ = l.XLB.Do(func() error { f(); return nil }) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-m.Synced():
	case <-time.After(30 * time.Second):
		t.Fatal("manager never synced")
	}
	all := func() []Ref {
		var want []Ref
		for i, b := range l.Backends {
			want = append(want, Ref{ID: uint32(i), Member: uint32(i), IP: b.IP(), Name: "backend-" + string(rune('1'+i)), Weight: 1})
		}
		return want
	}
	if got := pub.last(); !slices.Equal(got, all()) {
		t.Fatalf("first published set %v, want every backend (their first checks passed) %v", got, all())
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30 s; published %v, status %+v", what, pub.last(), m.Snapshot())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := l.Backends[0].Echo.Close(); err != nil {
		t.Fatal(err)
	}
	wait("backend-1 unhealthy and unpublished", func() bool {
		s := m.Snapshot()[0]
		return s.State == Unhealthy && !slices.Contains(pub.last(), all()[0])
	})
	s := m.Snapshot()[0]
	if s.Health == nil || s.Health.Healthy || s.Health.Failed < uint64(hc.Fall) || s.Health.Last.OK || !strings.HasPrefix(s.Reason, "health check failing") {
		t.Fatalf("unhealthy backend's status %+v health %+v", s, s.Health)
	}
	if s.Route.Interface != "eth0" {
		t.Fatalf("unhealthy backend lost its route: %+v", s.Route)
	}
	srv, err := l.Backends[0].Serve(echo.String(), testnet.Echo)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	wait("backend-1 routable and published again", func() bool {
		return m.Snapshot()[0].State == Routable && slices.Equal(pub.last(), all())
	})
}

// A provider that offers this instance's own listen or SNAT address gets
// that backend skipped, with one warning however often it is offered.
func TestManagerSkipsReservedAddresses(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	vip, snat := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.100")
	m := NewManager(NewStatic(nil), nil, &recorder{}, Options{Log: log, Reserved: []netip.Addr{vip, snat}})
	good := netip.MustParseAddr("192.0.2.31")
	set := []Backend{{Name: "pod-a", IP: good}, {Name: "pod-vip", IP: vip}, {Name: "pod-snat", IP: snat}}
	m.apply(set)
	m.apply(set)
	var listed []netip.Addr
	for _, s := range m.Snapshot() {
		listed = append(listed, s.IP)
	}
	if !slices.Equal(listed, []netip.Addr{good}) {
		t.Fatalf("listed %v, want only %v", listed, good)
	}
	warnings := 0
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "listen or SNAT address") {
			warnings++
		}
	}
	if warnings != 2 {
		t.Fatalf("%d warnings, want one per reserved address (2)", warnings)
	}
}

// gatedProvider sends the sets given to its channel, nothing before: a
// provider whose source is unreachable until the test says otherwise.
type gatedProvider struct{ sets chan []Backend }

func (p gatedProvider) Name() string { return "gated" }

func (p gatedProvider) Run(ctx context.Context, updates chan<- []Backend) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case set := <-p.sets:
			select {
			case updates <- set:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// TestManagerInheritedSet (issue 28): the routable set a predecessor left
// in the data path stays routable, as discovered, while the provider has
// not synced (the Kubernetes API down during a reload or a crash-restart):
// nothing is published (the data path has it), and the manager says
// stale; the provider's
// first set replaces it (a backend it no longer lists departs) and ends
// the staleness.
func TestManagerInheritedSet(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	res := hostnet.NewResolver(l.XLB.Netlink(), l.XLB.IP(), map[int]string{l.XLB.Ifindex(): "eth0"})
	t.Cleanup(func() { res.Cleanup() })
	a, b := l.Backends[0].IP(), l.Backends[1].IP()
	inherited := []Ref{{ID: 3, Member: 3, IP: a, Port: 8080}, {ID: 5, Member: 5, IP: b, Port: 8081}}
	prov := gatedProvider{sets: make(chan []Backend)}
	pub := &recorder{}
	m := NewManager(prov, res, pub, Options{RetryInterval: 20 * time.Millisecond, RecheckInterval: 20 * time.Millisecond,
		Known: []Known{{ID: 3, Backend: 3, IP: a, Name: "web-a"}, {ID: 5, Backend: 5, IP: b, Name: "web-b"}}, Inherited: inherited})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	time.Sleep(200 * time.Millisecond) // retry passes run meanwhile
	if !m.Stale() || m.EverSynced() {
		t.Errorf("before the provider's first set: stale %v, synced %v; want stale, not synced", m.Stale(), m.EverSynced())
	}
	snap := m.Snapshot()
	if len(snap) != 2 {
		t.Fatalf("snapshot %+v, want the two inherited backends", snap)
	}
	for i, s := range snap {
		if s.State != Routable || !s.Discovered || s.ID != inherited[i].Member || s.Backend != inherited[i].ID || s.Port != inherited[i].Port || s.Name != []string{"web-a", "web-b"}[i] {
			t.Errorf("inherited backend %+v, want routable and discovered as %+v", s, inherited[i])
		}
	}
	pub.mu.Lock()
	early := slices.Clone(pub.sets)
	pub.mu.Unlock()
	if len(early) != 0 {
		t.Fatalf("published %v before the provider's first set, want nothing: the data path holds the inherited set", early)
	}

	prov.sets <- []Backend{{Name: "web-a", IP: a, Port: 8080, Weight: 1}}
	select {
	case <-m.Synced():
	case <-time.After(30 * time.Second):
		t.Fatal("manager never synced")
	}
	if m.Stale() {
		t.Error("stale after the provider's first set")
	}
	want := []Ref{{ID: 3, Member: 3, IP: a, Port: 8080, Name: "web-a", Weight: 1}}
	if got := pub.last(); !slices.Equal(got, want) {
		t.Errorf("published %v after the provider's first set, want %v", got, want)
	}
	snap = m.Snapshot()
	if len(snap) != 2 || snap[0].State != Routable || snap[0].Route.Interface != "eth0" || snap[1].State != Departed || snap[1].Discovered {
		t.Errorf("snapshot %+v, want web-a routable (resolved) and web-b departed", snap)
	}
}
