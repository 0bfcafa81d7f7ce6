package backend

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/pkg/sched"
)

// staticSet is the first (and only) set a static provider sends.
func staticSet(t *testing.T, bs []config.Backend) []Backend {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updates := make(chan []Backend, 1)
	go NewStatic(bs).Run(ctx, updates)
	return <-updates
}

// resolveAs marks every discovered backend of m resolved, as a
// successful resolution does (no resolver: no lab), and publishes.
func resolveAs(m *Manager) {
	for _, s := range m.Snapshot() {
		if s.Discovered {
			m.record(s.IP, hostnet.Route{Interface: "eth0", NextHop: s.IP}, nil)
		}
	}
	m.publish()
}

// TestManagerPublishesWeights (issue 30): the static provider gives each
// backend its configured weight (none configured: 1), the published refs
// carry each backend's name and weight, which the table schedulers build
// from, and a change of a weight or a name publishes the set again (the
// data path then rebuilds the table), while an unchanged set is not
// written again.
func TestManagerPublishesWeights(t *testing.T) {
	ip := func(i byte) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, i}) }
	set := staticSet(t, []config.Backend{{Name: "web-a", IP: ip(1), Weight: 3}, {Name: "web-b", IP: ip(2)}, {Name: "web-c", IP: ip(3), Weight: 256}})
	if got := []uint16{set[0].Weight, set[1].Weight, set[2].Weight}; !slices.Equal(got, []uint16{3, 1, 256}) {
		t.Fatalf("static weights %v, want [3 1 256] (weight not given: 1)", got)
	}
	pub := &recorder{}
	m := NewManager(NewStatic(nil), nil, pub, Options{ServiceID: 4})
	m.apply(set)
	resolveAs(m)
	want := []Ref{
		{ID: 0, Member: 0, IP: ip(1), Name: "web-a", Weight: 3},
		{ID: 1, Member: 1, IP: ip(2), Name: "web-b", Weight: 1},
		{ID: 2, Member: 2, IP: ip(3), Name: "web-c", Weight: 256},
	}
	if got := pub.last(); !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	for i, s := range m.Snapshot() {
		if s.Weight != want[i].Weight || s.State != Routable {
			t.Errorf("status %+v, want routable with weight %d", s, want[i].Weight)
		}
	}

	steps := []struct {
		name string
		set  []Backend
		want []Ref // nil: nothing published
	}{
		{"unchanged", slices.Clone(set), nil},
		{"web-b weight 1 → 5", []Backend{set[0], {Name: "web-b", IP: ip(2), Weight: 5}, set[2]},
			[]Ref{want[0], {ID: 1, Member: 1, IP: ip(2), Name: "web-b", Weight: 5}, want[2]}},
		{"web-a renamed", []Backend{{Name: "web-a2", IP: ip(1), Weight: 3}, {Name: "web-b", IP: ip(2), Weight: 5}, set[2]},
			[]Ref{{ID: 0, Member: 0, IP: ip(1), Name: "web-a2", Weight: 3}, {ID: 1, Member: 1, IP: ip(2), Name: "web-b", Weight: 5}, want[2]}},
	}
	for _, st := range steps {
		before := len(pub.sets)
		m.apply(st.set)
		resolveAs(m)
		switch {
		case st.want == nil && len(pub.sets) != before:
			t.Errorf("%s: published %v, want nothing written", st.name, pub.last())
		case st.want != nil && (len(pub.sets) != before+1 || !slices.Equal(pub.last(), st.want)):
			t.Errorf("%s: %d sets published, the last %v; want one, %v", st.name, len(pub.sets)-before, pub.last(), st.want)
		}
	}
	for _, svc := range pub.svcs {
		if svc != 4 {
			t.Fatalf("published to service %d, want 4", svc)
		}
	}
}

// TestManagerWeightZeroQuiesced (issue 30): a discovered, resolved backend
// with weight 0 (a Kubernetes weight annotation) is quiesced: never
// published, listed with reason "weight 0"; a routable backend whose
// weight turns 0 leaves the published set, and one whose weight turns
// non-zero again joins it.
func TestManagerWeightZeroQuiesced(t *testing.T) {
	ip := func(i byte) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, i}) }
	pub := &recorder{}
	m := NewManager(NewStatic(nil), nil, pub, Options{})
	m.apply([]Backend{{Name: "pod-a", IP: ip(1), Weight: 2}, {Name: "pod-b", IP: ip(2), Weight: 0}})
	resolveAs(m)
	a := Ref{ID: 0, Member: 0, IP: ip(1), Name: "pod-a", Weight: 2}
	if got := pub.last(); !slices.Equal(got, []Ref{a}) {
		t.Fatalf("published %v, want only pod-a (pod-b has weight 0)", got)
	}
	quiesced := func(s Status) bool {
		return s.State == Quiesced && s.Reason == ReasonWeightZero && s.Discovered && s.Weight == 0
	}
	if s := m.Snapshot()[1]; !quiesced(s) {
		t.Fatalf("pod-b %+v, want quiesced, discovered, reason %q", s, ReasonWeightZero)
	}

	m.apply([]Backend{{Name: "pod-a", IP: ip(1), Weight: 0}, {Name: "pod-b", IP: ip(2), Weight: 0}})
	resolveAs(m)
	if got := pub.last(); len(got) != 0 {
		t.Fatalf("published %v after both weights turned 0, want an empty set", got)
	}
	for _, s := range m.Snapshot() {
		if !quiesced(s) {
			t.Errorf("%+v, want quiesced", s)
		}
	}

	m.apply([]Backend{{Name: "pod-a", IP: ip(1), Weight: 0}, {Name: "pod-b", IP: ip(2), Weight: 7}})
	resolveAs(m)
	if got, want := pub.last(), []Ref{{ID: 1, Member: 1, IP: ip(2), Name: "pod-b", Weight: 7}}; !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	if s := m.Snapshot()[1]; s.State != Routable || s.Reason != "" {
		t.Fatalf("pod-b %+v, want routable again", s)
	}
}

// TestManagerAdoptedTableUnchanged (issue 30): after a crash the adopted
// routable set names its backends by address only, so a table built from
// it would differ from the predecessor's and move connections. Nothing is
// published from it (Republish included) until the provider's first set,
// whose names and weights rebuild exactly the predecessor's table.
func TestManagerAdoptedTableUnchanged(t *testing.T) {
	ip := func(i byte) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, i}) }
	// What the predecessor published, and the data path's table of it.
	before := []Ref{
		{ID: 2, Member: 5, IP: ip(1), Name: "web-a", Weight: 3},
		{ID: 3, Member: 6, IP: ip(2), Name: "web-b", Weight: 1},
		{ID: 4, Member: 7, IP: ip(3), Name: "web-c", Weight: 2},
	}
	table := func(refs []Ref) []uint16 {
		t.Helper()
		ms := make([]sched.Member, len(refs))
		for i, r := range refs {
			ms[i] = sched.Member{Name: r.Name, IP: r.IP, Weight: r.Weight}
		}
		tb, err := sched.Build(sched.Maglev, ms, sched.MaglevSizes[0])
		if err != nil {
			t.Fatal(err)
		}
		return tb.Entries
	}
	// After a crash: the pairs and the routable set give ids and
	// addresses, no names, no weights.
	var known []Known
	inherited := make([]Ref, len(before))
	for i, r := range before {
		known = append(known, Known{ID: r.Member, Backend: r.ID, IP: r.IP})
		inherited[i] = Ref{ID: r.ID, Member: r.Member, IP: r.IP}
	}
	pub := &recorder{}
	m := NewManager(NewStatic(nil), nil, pub, Options{Known: known, Inherited: inherited})
	m.publish()
	m.Republish()
	if len(pub.sets) != 0 {
		t.Fatalf("published %v before the provider's first set, want nothing: the data path's table stays the predecessor's", pub.sets)
	}
	var fromAddresses []Ref
	for _, s := range m.Snapshot() {
		if s.State != Routable || s.Name != s.IP.String() {
			t.Fatalf("inherited %+v, want routable and named by its address", s)
		}
		fromAddresses = append(fromAddresses, Ref{ID: s.Backend, Member: s.ID, IP: s.IP, Name: s.Name, Weight: s.Weight})
	}
	if slices.Equal(table(fromAddresses), table(before)) {
		t.Fatal("a table of the address-named set equals the predecessor's: the test shows nothing")
	}

	m.apply([]Backend{
		{Name: "web-a", IP: ip(1), Weight: 3},
		{Name: "web-b", IP: ip(2), Weight: 1},
		{Name: "web-c", IP: ip(3), Weight: 2},
	})
	resolveAs(m)
	if len(pub.sets) != 1 || !slices.Equal(pub.last(), before) {
		t.Fatalf("published %v after the provider's first set, want once %v", pub.sets, before)
	}
	if !slices.Equal(table(pub.last()), table(before)) {
		t.Fatal("the rebuilt table differs from the predecessor's")
	}
}

// TestManagerOverfullWarnsOnce (issue 30): a Maglev service whose routable
// set outgrows its table (more than MaglevTableSize/100 members, possible
// with Kubernetes) is still published, with one warning per overfull
// spell.
func TestManagerOverfullWarnsOnce(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	size := uint32(sched.MaglevSizes[0])
	limit := int(size / sched.MinSlotsPerMember)
	set := func(n int) []Backend {
		var bs []Backend
		for i := range n {
			ip := netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)})
			bs = append(bs, Backend{Name: ip.String(), IP: ip, Weight: 1})
		}
		return bs
	}
	pub := &recorder{}
	m := NewManager(NewStatic(nil), nil, pub, Options{MaglevTableSize: size, Log: log})
	warnings := func() int {
		n := 0
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "overfull") {
				n++
			}
		}
		return n
	}
	for _, step := range []struct {
		n, warnings int
	}{{limit, 0}, {limit + 1, 1}, {limit + 2, 1}, {limit, 1}, {limit + 1, 2}} {
		m.apply(set(step.n))
		resolveAs(m)
		if got := len(pub.last()); got != step.n {
			t.Fatalf("%d routable: published %d", step.n, got)
		}
		if got := warnings(); got != step.warnings {
			t.Errorf("%d routable for %d slots: %d warnings, want %d", step.n, size, got, step.warnings)
		}
	}
}
