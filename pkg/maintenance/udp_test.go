package maintenance_test

import (
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// udpPair is a UDP pair written into the map (issue 31): both keys of
// proto UDP, FlagUDP (and flags) on both entries, both last seen at seen.
type udpPair struct{ fk, rk dataplane.FlowKey }

// forgeUDP writes a UDP pair from client port port, modelled on the
// established TCP pair p (its addresses, backend, next hop and service),
// with SNAT port snat and generation gen.
func (r *rig) forgeUDP(p dt.Pair, port, snat uint16, gen, flags uint32, seen dataplane.Jiffies) udpPair {
	r.t.Helper()
	fk, fv, rk, rv := p.FwdKey, p.Fwd, p.RevKey, p.Rev
	fk.Proto, rk.Proto = syscall.IPPROTO_UDP, syscall.IPPROTO_UDP
	fk.SportBe = be16(port)
	rv.DportBe = fk.SportBe
	rk.DportBe = be16(snat)
	fv.SportBe = rk.DportBe
	fv.Generation, rv.Generation = gen, gen
	fv.Flags, rv.Flags = dataplane.FlagUDP|flags, dataplane.FlagUDP|flags
	fv.LastSeen, rv.LastSeen = seen.Low32(), seen.Low32()
	for _, e := range []struct {
		k dataplane.FlowKey
		v dataplane.FlowValue
	}{{fk, fv}, {rk, rv}} {
		if err := r.e.DP.PutFlow(e.k, e.v); err != nil {
			r.t.Fatal(err)
		}
	}
	return udpPair{fk, rk}
}

// gone says whether both entries of u have left the map.
func (r *rig) udpGone(u udpPair) bool {
	r.t.Helper()
	flows := r.e.Flows(r.t)
	_, fwd := flows[u.fk]
	_, rev := flows[u.rk]
	return !fwd && !rev
}

// restart replaces the rig's loop by a new one over the same data path,
// as a hot upgrade or a restart does: the schedules start empty.
func (r *rig) restart(fo maintenance.Options) {
	r.t.Helper()
	r.loop.Close()
	var log *logrus.Logger
	log, r.logs = logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	fo.Clock, fo.Log = r.clk, log
	fo.OnSample = r.recorder(fo.OnSample)
	l, err := maintenance.New(r.e.DP, fo)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { l.Close() })
	r.loop = l
}

// adopted builds a rig whose UDP pairs were in the map before its loop
// started: an unreplied and a replied pair (their last datagram at the
// returned time) beside the TCP pair they are modelled on. The first
// cycle's walk pass adopts them.
func adopted(t *testing.T, o dt.Options, fo maintenance.Options) (r *rig, unreplied, replied udpPair, at dataplane.Jiffies) {
	r = newRig(t, o, fo)
	tmpl := r.open(33000).pair()
	at = r.e.Now(t)
	r.clk.Set(at)
	unreplied = r.forgeUDP(tmpl, 41000, 50001, tmpl.Fwd.Generation+1, 0, at)
	replied = r.forgeUDP(tmpl, 41001, 50002, tmpl.Fwd.Generation+2, dataplane.FlagUDPReplied, at)
	r.restart(fo)
	return r, unreplied, replied, at
}

// Adoption (issue 31): the UDP pairs a new loop finds in the map are
// scheduled by its first walk pass, once each (the TCP pair is not), and
// stay scheduled once each while they live: each re-check that keeps a
// pair puts it back.
func TestUDPAdoption(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		r, _, _, at := adopted(t, o, maintenance.Options{})
		for i := range 5 {
			r.clk.Set(at + dataplane.Jiffies(i))
			s := r.cycle()
			if s.CloseEvents.UDPScheduled != 2 || s.Removed != (maintenance.Removed{}) {
				t.Fatalf("cycle %d: %d UDP pairs scheduled, removed %+v; want 2, nothing removed", i+1, s.CloseEvents.UDPScheduled, s.Removed)
			}
		}
		r.wantEntries(6)
	})
}

// The UDP timeouts (issue 31; needs the reaper's XLB_REAP_UDP): a pair
// without a reply is kept at UDPTimeout−1 after its last datagram and
// removed at UDPTimeout; a replied pair goes UDPStreamTimeout after the
// later of its entries' last datagrams, its request rescheduled at the
// deadline the reaper answers, so one request per pair waits throughout
// and a kept re-check is no refusal (Removed.Kept).
func TestUDPTimeouts(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		r, unreplied, replied, at := adopted(t, o, maintenance.Options{})
		uttl, ustl := r.ticks(maintenance.DefaultUDPTimeout), r.ticks(maintenance.DefaultUDPStreamTimeout)
		r.stamp(replied.rk, at+50) // the backend's last datagram, later than the client's

		r.clk.Set(at + uttl - 1)
		if s := r.cycle(); s.CloseEvents.UDPScheduled != 2 || s.Removed != (maintenance.Removed{}) || r.udpGone(unreplied) {
			t.Fatalf("at UDPTimeout-1: scheduled %d, removed %+v", s.CloseEvents.UDPScheduled, s.Removed)
		}
		r.clk.Set(at + uttl)
		s := r.cycle()
		if !r.udpGone(unreplied) || r.udpGone(replied) || s.Removed != (maintenance.Removed{UDP: 1}) || s.CloseEvents.UDPScheduled != 1 {
			t.Fatalf("at UDPTimeout: unreplied gone %v, replied gone %v, removed %+v, scheduled %d",
				r.udpGone(unreplied), r.udpGone(replied), s.Removed, s.CloseEvents.UDPScheduled)
		}
		// The replied pair's request was kept at at+UDPStreamTimeout (its
		// forward entry's deadline) and waits for the reverse entry's.
		r.clk.Set(at + ustl)
		if s = r.cycle(); r.udpGone(replied) || s.Removed != (maintenance.Removed{}) || s.CloseEvents.UDPScheduled != 1 {
			t.Fatalf("at the forward entry's stream deadline: gone %v, removed %+v, scheduled %d", r.udpGone(replied), s.Removed, s.CloseEvents.UDPScheduled)
		}
		r.clk.Set(at + 50 + ustl - 1)
		if s = r.cycle(); r.udpGone(replied) || s.Removed != (maintenance.Removed{}) {
			t.Fatalf("a tick before the reverse entry's deadline: gone %v, removed %+v", r.udpGone(replied), s.Removed)
		}
		r.clk.Set(at + 50 + ustl)
		if s = r.cycle(); !r.udpGone(replied) || s.Removed != (maintenance.Removed{UDP: 1}) || s.CloseEvents.UDPScheduled != 0 {
			t.Fatalf("at the reverse entry's deadline: gone %v, removed %+v, scheduled %d", r.udpGone(replied), s.Removed, s.CloseEvents.UDPScheduled)
		}
		r.wantEntries(2) // the TCP pair
	})
}

// A datagram just before the deadline (issue 31; needs the reaper's
// XLB_REAP_UDP): the re-check keeps the pair and its request comes back
// at the new deadline, still one per pair.
func TestUDPRefreshReschedules(t *testing.T) {
	r, unreplied, _, at := adopted(t, dt.Options{}, maintenance.Options{})
	uttl := r.ticks(maintenance.DefaultUDPTimeout)
	r.stamp(unreplied.fk, at+uttl-1)
	r.clk.Set(at + uttl)
	if s := r.cycle(); r.udpGone(unreplied) || s.Removed.UDP != 0 || s.Removed.Kept != 0 || s.CloseEvents.UDPScheduled != 2 {
		t.Fatalf("refreshed pair at its old deadline: gone %v, removed %+v, scheduled %d", r.udpGone(unreplied), s.Removed, s.CloseEvents.UDPScheduled)
	}
	r.clk.Set(at + 2*uttl - 2)
	if s := r.cycle(); r.udpGone(unreplied) || s.CloseEvents.UDPScheduled != 2 {
		t.Fatalf("a tick before the new deadline: gone %v, scheduled %d", r.udpGone(unreplied), s.CloseEvents.UDPScheduled)
	}
	r.clk.Set(at + 2*uttl - 1)
	if s := r.cycle(); !r.udpGone(unreplied) || s.Removed.UDP != 1 {
		t.Fatalf("at the new deadline: gone %v, removed %+v", r.udpGone(unreplied), s.Removed)
	}
}

// The walk is the net (issue 31; needs the reaper's XLB_REAP_UDP): a UDP
// pair no event scheduled (its event lost, or written after adoption
// ended) is removed by the walk once idle for its timeout, within a pass.
func TestUDPWalkNet(t *testing.T) {
	r := newRig(t, dt.Options{}, maintenance.Options{})
	tmpl := r.open(33000).pair()
	now := r.e.Now(t)
	r.clk.Set(now)
	for range 3 { // the first pass and adoption's extra cycle
		r.cycle()
		r.clk.Add(1)
	}
	at, _ := r.clk.Now()
	u := r.forgeUDP(tmpl, 41000, 50001, tmpl.Fwd.Generation+1, 0, at)
	uttl := r.ticks(maintenance.DefaultUDPTimeout)
	r.clk.Set(at + uttl - 1)
	if s := r.cycle(); r.udpGone(u) || s.CloseEvents.UDPScheduled != 0 {
		t.Fatalf("before the timeout: gone %v, scheduled %d; want kept, not scheduled", r.udpGone(u), s.CloseEvents.UDPScheduled)
	}
	r.clk.Set(at + uttl)
	s := r.cycle() // a small table is walked whole every cycle
	if !r.udpGone(u) || s.Removed.UDP != 1 || s.CloseEvents.UDPScheduled != 0 {
		t.Fatalf("at the timeout: gone %v, removed %+v, scheduled %d", r.udpGone(u), s.Removed, s.CloseEvents.UDPScheduled)
	}
}
