package backend

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// Issue 29: one pool for every service. A backend address that serves two
// services has one backend id (one SNAT port space) and a member id in
// each; each manager publishes its own service's set under its service id.
func TestPoolSharesBackendIDsAcrossServices(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_000_000, 0)}
	pool := NewPool(clk)
	pub := &recorder{}
	web := NewManager(NewStatic(nil), nil, pub, Options{Service: "web", ServiceID: 3, Pool: pool, Clock: clk})
	api := NewManager(NewStatic(nil), nil, pub, Options{Service: "api", ServiceID: 7, Pool: pool, Clock: clk})
	a, b, c := netip.MustParseAddr("192.0.2.31"), netip.MustParseAddr("192.0.2.32"), netip.MustParseAddr("192.0.2.33")
	web.apply([]Backend{{Name: "a", IP: a, Weight: 1}, {Name: "b", IP: b, Weight: 1}})
	api.apply([]Backend{{Name: "b", IP: b, Weight: 1}, {Name: "c", IP: c, Weight: 2}})
	ids := func(m *Manager) map[netip.Addr][2]uint32 {
		out := map[netip.Addr][2]uint32{}
		for _, s := range m.Snapshot() {
			out[s.IP] = [2]uint32{s.ID, s.Backend}
			if s.Service != m.Service() {
				t.Errorf("status %+v of %s names service %q", s, m.Service(), s.Service)
			}
		}
		return out
	}
	w, p := ids(web), ids(api)
	if w[b][1] != p[b][1] {
		t.Fatalf("the shared backend %v has backend ids %d (web) and %d (api), want one", b, w[b][1], p[b][1])
	}
	members := []uint32{w[a][0], w[b][0], p[b][0], p[c][0]}
	slices.Sort(members)
	if !slices.Equal(members, []uint32{0, 1, 2, 3}) {
		t.Fatalf("member ids %v, want 0..3, one per (service, address)", members)
	}
	backends := []uint32{w[a][1], w[b][1], p[c][1]}
	slices.Sort(backends)
	if !slices.Equal(backends, []uint32{0, 1, 2}) {
		t.Fatalf("backend ids %v, want 0..2, one per address", backends)
	}
	// Each manager publishes its own set under its own service id.
	for i := range pub.sets {
		pub.sets[i] = nil
	}
	api.mu.Lock()
	for _, s := range api.backends {
		s.State, s.resolved = Routable, true
	}
	api.mu.Unlock()
	api.publish()
	if got := pub.svcs[len(pub.svcs)-1]; got != 7 {
		t.Fatalf("api published under service %d, want 7", got)
	}
	want := []Ref{{ID: p[b][1], Member: p[b][0], IP: b, Name: "b", Weight: 1}, {ID: p[c][1], Member: p[c][0], IP: c, Name: "c", Weight: 2}}
	slices.SortFunc(want, compareRefs)
	if got := pub.last(); !slices.Equal(got, want) {
		t.Fatalf("api published %v, want %v", got, want)
	}

	// api is removed (a draining service: an empty provider); its members
	// depart. Until they are quiet the service is not.
	api.apply(nil)
	pool.NotePairs(clk.add(time.Second), []uint32{p[c][0]})
	if pool.Quiet("api") {
		t.Fatal("api quiet while a sample counts pairs toward its member")
	}
	pool.NotePairs(clk.add(IDReuseQuiet-time.Second), nil)
	if pool.Quiet("api") {
		t.Fatal("api quiet before IDReuseQuiet after its last busy sample")
	}
	pool.NotePairs(clk.add(2*time.Second), nil)
	if !pool.Quiet("api") || pool.Quiet("web") {
		t.Fatalf("quiet: api %v web %v; want api only", pool.Quiet("api"), pool.Quiet("web"))
	}
}

// Member ids are reused across services once quiet, and a backend id only
// once no member holds its address: the shared address keeps its id while
// the other service still has it.
func TestPoolReusesMemberIDsAcrossServices(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_000_000, 0)}
	pool := NewPool(clk)
	pub := &recorder{}
	web := NewManager(NewStatic(nil), nil, pub, Options{Service: "web", Pool: pool, Clock: clk})
	api := NewManager(NewStatic(nil), nil, pub, Options{Service: "api", ServiceID: 1, Pool: pool, Clock: clk})
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}) }
	set := func(from, n int) []Backend {
		var bs []Backend
		for i := from; i < from+n; i++ {
			bs = append(bs, Backend{Name: addr(i).String(), IP: addr(i)})
		}
		return bs
	}
	n := dataplane.MaxMembers
	shared := addr(0)
	api.apply(set(0, 2))                                                // api: members 0 (shared) and 1 (addr 1)
	web.apply(set(2, n-3))                                              // web: members 2..n-2
	web.apply(set(2, n-3))                                              // nothing new
	web.apply(append(set(2, n-3), Backend{Name: "shared", IP: shared})) // member n-1, shared's backend id
	if len(web.Snapshot()) != n-2 {
		t.Fatalf("web has %d members, want %d", len(web.Snapshot()), n-2)
	}
	api.apply(nil) // both of api's members depart
	pool.NotePairs(clk.add(IDReuseQuiet), nil)
	pool.NotePairs(clk.add(time.Second), nil)
	newcomer := addr(n + 5)
	web.apply(append(append(set(2, n-3), Backend{Name: "shared", IP: shared}), Backend{Name: "new", IP: newcomer}))
	var got *Status
	for _, s := range web.Snapshot() {
		if s.IP == newcomer {
			got = &s
		}
	}
	if got == nil || got.ID != 0 {
		t.Fatalf("newcomer %+v, want api's quiet member id 0", got)
	}
	sharedStatus := web.Snapshot()
	var sharedID uint32
	for _, s := range sharedStatus {
		if s.IP == shared {
			sharedID = s.Backend
		}
	}
	if got.Backend == sharedID {
		t.Fatalf("newcomer took backend id %d, which web's member at %v still holds", got.Backend, shared)
	}
	if !slices.Equal(pub.memberResets, []uint32{0}) {
		t.Fatalf("ResetMember calls %v, want [0]", pub.memberResets)
	}
	if len(api.Snapshot()) != 1 || api.Snapshot()[0].IP != addr(1) {
		t.Fatalf("api lists %+v, want only its member whose id was not reused", api.Snapshot())
	}
}
