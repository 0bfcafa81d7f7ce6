package dataplane_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/sched"
)

// The schedulers (issue 30; layout 10): a SYN's backend is the one the
// user-space table (pkg/sched) names for it, entry jhash % len for Maglev
// and xlb_rr % len for weighted round robin; a new table replaces the old
// one for new SYNs only; the SNAT fallback walks the set in order from
// the scheduled backend; without a table a SYN takes round robin and is
// counted.

// schedEnv is an Env of n one-arm backends (ids 0..n-1) whose service is
// configured with scheduler kind (Maglev: hash and table size
// sched.MinMaglevSize), published with weights (backend-<i> names).
type schedEnv struct {
	*dt.Env
	svc  uint16
	refs []dataplane.BackendRef
}

func newSchedEnv(t *testing.T, n int, kind, hash string, weights []uint16, portLo, portHi uint16) *schedEnv {
	t.Helper()
	var backends []netip.Addr
	for i := range n {
		backends = append(backends, testnet.OneArmBackendIP(i))
	}
	e := dt.NewEnv(t, dt.Options{Backends: backends, MaxConnections: 8192, SNATPortLo: portLo, SNATPortHi: portHi})
	s := &schedEnv{Env: e, svc: e.Services[0].ID}
	s.configure(t, kind, hash)
	refs := slices.Clone(e.Routable[0])
	for i := range refs {
		refs[i].Name = fmt.Sprintf("backend-%d", refs[i].ID)
		refs[i].Weight = weights[i]
	}
	s.publish(t, refs)
	return s
}

// configure sets the service's scheduler (and Maglev hash) and
// configures the data path.
func (s *schedEnv) configure(t *testing.T, kind, hash string) {
	t.Helper()
	svc := &s.Settings.Services[0]
	svc.Scheduler, svc.MaglevHash, svc.TableSize = kind, "", 0
	if kind == dataplane.SchedulerMaglev {
		svc.MaglevHash, svc.TableSize = hash, sched.MinMaglevSize
	}
	if _, err := s.DP.Configure(s.Settings); err != nil {
		t.Fatal(err)
	}
}

// publish publishes refs as the service's routable set.
func (s *schedEnv) publish(t *testing.T, refs []dataplane.BackendRef) {
	t.Helper()
	if err := s.DP.SetRoutable(s.svc, refs); err != nil {
		t.Fatal(err)
	}
	s.refs = refs
}

// table is pkg/sched's table of refs.
func (s *schedEnv) table(t *testing.T, kind sched.Kind) sched.Table {
	t.Helper()
	ms := make([]sched.Member, len(s.refs))
	for i, r := range s.refs {
		ms[i] = sched.Member{Name: r.Name, IP: r.IP, Weight: r.Weight}
	}
	tbl, err := sched.Build(kind, ms, sched.MinMaglevSize)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// listen is the service's address and first local port.
var schedListen = netip.AddrPortFrom(dt.ListenIP, 80)

// schedClient is the i-th client of the sweeps: 203.0.113.1..250, a port
// of its own.
func schedClient(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i%250)}), uint16(1024+i))
}

// syn sends c's SYN and returns the backend id of its pair.
func (s *schedEnv) syn(t *testing.T, c netip.AddrPort) int {
	t.Helper()
	seg := dt.Segment{SrcMAC: dt.MAC(dt.ClientIP), DstMAC: s.Front.MAC, Src: c, Dst: schedListen, Flags: dt.SYN,
		Seq: 1000, Options: mss, ID: 7, Window: 64240}
	act, _, err := s.Run(seg.Frame(), s.Front)
	if err != nil {
		t.Fatalf("SYN from %v: %v", c, err)
	}
	if act != dt.XDPTX {
		t.Fatalf("SYN from %v: action %s, want XDP_TX", c, dt.ActionName(act))
	}
	fwd, err := s.DP.LookupFlow(dataplane.NewFlowKey(c, schedListen, dataplane.DirClient))
	if err != nil {
		t.Fatalf("SYN from %v: forward entry: %v", c, err)
	}
	return int(fwd.BackendId)
}

// at is the backend id the table's entry pos names.
func (s *schedEnv) at(tbl sched.Table, pos uint64) int {
	return int(s.refs[tbl.Entries[pos%uint64(tbl.Len)]].ID)
}

func TestSchedMaglevPickMatchesTable(t *testing.T) {
	for _, hash := range []string{dataplane.MaglevHashFiveTuple, dataplane.MaglevHashClientIP} {
		t.Run(hash, func(t *testing.T) {
			s := newSchedEnv(t, 7, dataplane.SchedulerMaglev, hash, []uint16{1, 2, 3, 4, 1, 2, 3}, 20000, 29999)
			tbl := s.table(t, sched.Maglev)
			for i := range 2000 {
				c := schedClient(i)
				h := sched.HashFiveTuple(c.Addr(), schedListen.Addr(), c.Port(), schedListen.Port(), 6)
				if hash == dataplane.MaglevHashClientIP {
					h = sched.HashClientIP(c.Addr())
				}
				got, want := s.syn(t, c), s.at(tbl, uint64(h))
				if got != want {
					t.Fatalf("SYN %d from %v (hash %#x): backend id %d, the table names %d", i, c, h, got, want)
				}
				if i%50 == 0 {
					hs, err := s.DP.FixtureSchedHashes()
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Contains(hs, h) {
						t.Fatalf("SYN %d from %v: the scratch's hashes are %#x, want %#x among them", i, c, hs, h)
					}
				}
			}
			got, ok := s.DP.Schedule(s.svc)
			if !ok || got.Len != tbl.Len || got.Rebuilds != 1 || got.Hash != hash || got.Scheduler != dataplane.SchedulerMaglev {
				t.Fatalf("Schedule: %+v, %v; want maglev %s of %d entries, 1 rebuild", got, ok, hash, tbl.Len)
			}
			for i, r := range s.refs {
				if got.Slots[r.Member] != tbl.Slots[i] {
					t.Fatalf("Schedule: member %d has %d slots, the table %d", r.Member, got.Slots[r.Member], tbl.Slots[i])
				}
			}
			if c := s.Counters(t); c.SchedFallbacks != 0 {
				t.Fatalf("%d SYNs fell back to round robin", c.SchedFallbacks)
			}
		})
	}
}

func TestSchedWRRSequence(t *testing.T) {
	s := newSchedEnv(t, 3, dataplane.SchedulerWeightedRR, "", []uint16{3, 1, 1}, 20000, 29999)
	tbl := s.table(t, sched.WeightedRoundRobin)
	if tbl.Len != 5 {
		t.Fatalf("3,1,1: a cycle of %d, want 5", tbl.Len)
	}
	rr0, err := s.DP.FixtureRR(s.svc)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []int
	for k := range 25 {
		got = append(got, s.syn(t, schedClient(k)))
		want = append(want, s.at(tbl, rr0+uint64(k)))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("backend ids %v, want %v (entries from position %d)", got, want, rr0)
	}
	counts := map[int]int{}
	for _, b := range got {
		counts[b]++
	}
	if counts[0] != 15 || counts[1] != 5 || counts[2] != 5 {
		t.Fatalf("25 SYNs by backend id: %v, want 15/5/5", counts)
	}
	if sc, ok := s.DP.Schedule(s.svc); !ok || sc.Len != 5 || sc.Scheduler != dataplane.SchedulerWeightedRR || sc.Hash != "" {
		t.Fatalf("Schedule: %+v, %v", sc, ok)
	}
}

func TestSchedTableSwap(t *testing.T) {
	s := newSchedEnv(t, 3, dataplane.SchedulerMaglev, dataplane.MaglevHashFiveTuple, []uint16{1, 1, 1}, 20000, 29999)
	old, oldRefs := s.table(t, sched.Maglev), s.refs
	live := map[netip.AddrPort]int{}
	for i := range 60 {
		c := schedClient(i)
		live[c] = s.syn(t, c)
	}
	s.publish(t, s.refs[:2]) // backend id 2 leaves the set
	tbl := s.table(t, sched.Maglev)
	moved := 0
	for i := range 60 {
		c := schedClient(i)
		if got := s.syn(t, c); got != live[c] { // a retransmitted SYN reuses its live pair
			t.Fatalf("retransmitted SYN from %v: backend id %d, its pair's is %d", c, got, live[c])
		}
	}
	for i := 60; i < 600; i++ {
		c := schedClient(i)
		h := sched.HashFiveTuple(c.Addr(), schedListen.Addr(), c.Port(), schedListen.Port(), 6)
		got := s.syn(t, c)
		if want := s.at(tbl, uint64(h)); got != want {
			t.Fatalf("SYN from %v after the swap: backend id %d, the new table names %d", c, got, want)
		}
		if before := int(oldRefs[old.Entries[uint64(h)%uint64(old.Len)]].ID); before != 2 && before != got {
			moved++
		}
	}
	if moved > 540/100*2 { // collateral: the 1 % and then some, of 540 tuples
		t.Fatalf("%d of 540 tuples not on the removed backend moved", moved)
	}
	if sc, ok := s.DP.Schedule(s.svc); !ok || sc.Rebuilds != 2 {
		t.Fatalf("Schedule after the swap: %+v, %v; want 2 rebuilds", sc, ok)
	}
}

func TestSchedFallbackSNATExhausted(t *testing.T) {
	// 10 SNAT ports per backend
	s := newSchedEnv(t, 3, dataplane.SchedulerMaglev, dataplane.MaglevHashFiveTuple, []uint16{1, 1, 1}, 40000, 40009)
	tbl := s.table(t, sched.Maglev)
	on0 := 0
	for i := 0; on0 <= 10; i++ {
		c := schedClient(i)
		h := sched.HashFiveTuple(c.Addr(), schedListen.Addr(), c.Port(), schedListen.Port(), 6)
		if s.at(tbl, uint64(h)) != 0 {
			continue
		}
		before := s.Counters(t)
		got := s.syn(t, c)
		after := s.Counters(t)
		on0++
		if on0 <= 10 {
			if got != 0 || after.SNATFallbacks != before.SNATFallbacks {
				t.Fatalf("SYN %d for backend id 0: backend id %d, SNAT fallbacks %d -> %d", on0, got, before.SNATFallbacks, after.SNATFallbacks)
			}
			continue
		}
		// backend id 0's ports are all taken: the next in set order
		if got != 1 || after.SNATFallbacks != before.SNATFallbacks+1 {
			t.Fatalf("SYN for the exhausted backend id 0: backend id %d (want 1), SNAT fallbacks %d -> %d", got, before.SNATFallbacks, after.SNATFallbacks)
		}
	}
}

func TestSchedNoTableRoundRobin(t *testing.T) {
	s := newSchedEnv(t, 3, dataplane.SchedulerMaglev, dataplane.MaglevHashClientIP, []uint16{1, 1, 1}, 20000, 29999)
	if err := s.DP.FixtureDropSchedules(s.svc); err != nil {
		t.Fatal(err)
	}
	rr0, err := s.DP.FixtureRR(s.svc)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 6 {
		before := s.Counters(t)
		got := s.syn(t, schedClient(k))
		after := s.Counters(t)
		if want := int(s.refs[(rr0+uint64(k))%3].ID); got != want {
			t.Fatalf("SYN %d without a table: backend id %d, round robin's %d", k, got, want)
		}
		if after.SchedFallbacks != before.SchedFallbacks+1 {
			t.Fatalf("SYN %d without a table: sched fallbacks %d -> %d", k, before.SchedFallbacks, after.SchedFallbacks)
		}
	}
}

func TestConfigureSchedulerChange(t *testing.T) {
	s := newSchedEnv(t, 3, dataplane.SchedulerWeightedRR, "", []uint16{3, 1, 1}, 20000, 29999)
	held := func(want bool) {
		t.Helper()
		h, err := s.DP.FixtureScheduleSlots(s.svc)
		if err != nil {
			t.Fatal(err)
		}
		if (h[0] || h[1]) != want {
			t.Fatalf("schedules held at the service's slots: %v, want some: %v", h, want)
		}
	}
	held(true)
	s.configure(t, dataplane.SchedulerRoundRobin, "")
	held(false)
	if sc, ok := s.DP.Schedule(s.svc); ok {
		t.Fatalf("round robin: Schedule %+v", sc)
	}
	// back to a table scheduler: rebuilt from the set last published
	s.configure(t, dataplane.SchedulerMaglev, dataplane.MaglevHashClientIP)
	held(true)
	sc, ok := s.DP.Schedule(s.svc)
	if !ok || sc.Scheduler != dataplane.SchedulerMaglev || sc.Len != sched.MinMaglevSize || sc.Hash != dataplane.MaglevHashClientIP {
		t.Fatalf("maglev again: Schedule %+v, %v", sc, ok)
	}
	tbl := s.table(t, sched.Maglev)
	c := schedClient(7)
	if got, want := s.syn(t, c), s.at(tbl, uint64(sched.HashClientIP(c.Addr()))); got != want {
		t.Fatalf("SYN from %v: backend id %d, the table names %d", c, got, want)
	}
}

func TestFreeServiceDropsTables(t *testing.T) {
	s := newSchedEnv(t, 3, dataplane.SchedulerMaglev, dataplane.MaglevHashFiveTuple, []uint16{1, 1, 1}, 20000, 29999)
	second := dataplane.ServiceSettings{Name: "svc1", Listen: secondListen, Proto: dataplane.ProtoTCP,
		Ports: s.Settings.Services[0].Ports, Scheduler: dataplane.SchedulerMaglev, TableSize: sched.MinMaglevSize}
	settings := s.Settings
	settings.Services = append(slices.Clone(settings.Services), second)
	refs, err := s.DP.Configure(settings)
	if err != nil {
		t.Fatal(err)
	}
	id := refs[1].ID
	if err := s.DP.SetRoutable(id, s.refs); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.DP.FixtureScheduleSlots(id); !h[0] && !h[1] {
		t.Fatalf("service %d: no schedule after SetRoutable", id)
	}
	if _, err := s.DP.Configure(s.Settings); err != nil { // svc1 drains
		t.Fatal(err)
	}
	if err := s.DP.FreeService(id); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.DP.FixtureScheduleSlots(id); h[0] || h[1] {
		t.Fatalf("service %d freed: schedules still held at %v", id, h)
	}
}
