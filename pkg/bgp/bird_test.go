package bgp

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"reflect"
	"syscall"
	"testing"

	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
)

// TestBird peers the speaker with a real router, BIRD 2, in a network
// namespace (issue 15): announce while the verdict is on, withdraw on
// drain and shutdown, keep the route across a planned stop and a crash
// (graceful restart), TCP MD5. Needs root and bird2. Every wait polls with
// a generous bound; no duration is asserted.
func TestBird(t *testing.T) {
	lab := newBirdLab(t)

	// announce → the route, next hop this host's address toward the
	// peer, hold time as configured; drain → gone; undrain → back;
	// Withdraw → gone for good; an unplanned Stop sends a Cease, so bird
	// keeps nothing stale.
	t.Run("announce and withdraw", func(t *testing.T) {
		b, s := lab.announcing(t, "", labOptions(6, 120))
		if r := b.Route(vip); r.NextHop != labSelf.String() {
			t.Errorf("next hop %q, want this host's address toward bird %s:\n%s", r.NextHop, labSelf, r.Out)
		}
		if ss := b.Session(birdPeer); ss.State != birdtest.Established || ss.HoldSecs != 6 {
			t.Errorf("session %s, hold time %d s; want Established with the configured 6 s:\n%s", ss.State, ss.HoldSecs, ss.Out)
		}
		st := s.Status()
		if len(st.Peers) != 1 || st.Peers[0].State != Established || st.Peers[0].Uptime <= 0 || !reflect.DeepEqual(st.Announced, []netip.Prefix{vip}) {
			t.Errorf("Status = %+v, want bird established and %s announced", st, vip)
		}

		setAnnounce(t, s, false) // drained, or not ready
		b.WaitRoute(t, vip, false)
		if ss := b.Session(birdPeer); ss.State != birdtest.Established {
			t.Errorf("the session went down with the withdrawal: %s", ss.Out)
		}
		if st := s.Status(); len(st.Announced) != 0 || st.Peers[0].State != Established {
			t.Errorf("Status after announcing nothing = %+v, want established and nothing announced", st)
		}

		setAnnounce(t, s, true) // undrained
		b.WaitRoute(t, vip, true)

		if err := s.Withdraw(); err != nil { // shutdown, before the RST window
			t.Fatal(err)
		}
		b.WaitRoute(t, vip, false)
		setAnnounce(t, s, true)
		if st := s.Status(); len(st.Announced) != 0 {
			t.Errorf("Status after Withdraw and announcing everything = %+v, want nothing announced", st)
		}

		if err := s.Stop(false); err != nil {
			t.Fatal(err)
		}
		birdtest.WaitFor(t, "bird's session is down without graceful restart (a Cease)", func() (bool, string) {
			ss := b.Session(birdPeer)
			return ss.State != birdtest.Established && !ss.GracefulRestart, ss.Out
		})
	})

	// Two services' addresses (issue 29 item 5): the verdict withdraws
	// one, bird drops that /32 only and keeps the other on the same
	// session; announcing it again brings it back.
	t.Run("one of two addresses withdrawn", func(t *testing.T) {
		o := labOptions(9, 120)
		o.Prefixes = []netip.Prefix{vip, vip2}
		b, s := lab.announcing(t, "", o)
		b.WaitRoute(t, vip2, true)
		if err := s.SetAnnounced([]netip.Prefix{vip2}); err != nil {
			t.Fatal(err)
		}
		b.WaitRoute(t, vip, false)
		if r := b.Route(vip2); !r.Present || r.NextHop != labSelf.String() {
			t.Errorf("%s left bird's table with %s:\n%s", vip2, vip, r.Out)
		}
		if ss := b.Session(birdPeer); ss.State != birdtest.Established {
			t.Errorf("the session went down with the withdrawal: %s", ss.Out)
		}
		if st := s.Status(); !reflect.DeepEqual(st.Announced, []netip.Prefix{vip2}) || !s.WithdrawnAt().IsZero() {
			t.Errorf("Status %+v, WithdrawnAt %v; want %s announced and no withdrawal time", st, s.WithdrawnAt(), vip2)
		}
		if err := s.SetAnnounced([]netip.Prefix{vip2, vip}); err != nil {
			t.Fatal(err)
		}
		b.WaitRoute(t, vip, true)
		if st := s.Status(); !reflect.DeepEqual(st.Announced, []netip.Prefix{vip, vip2}) {
			t.Errorf("Status %+v, want both announced in Options.Prefixes' order", st)
		}
	})

	// An unplanned Stop with the route announced: bird drops it at once
	// (withdrawn, then a Cease), never keeping it as stale.
	t.Run("unplanned stop", func(t *testing.T) {
		b, s := lab.announcing(t, "", labOptions(9, 120))
		if err := s.Stop(false); err != nil {
			t.Fatal(err)
		}
		b.WaitRoute(t, vip, false)
		if ss := b.Session(birdPeer); ss.GracefulRestart {
			t.Errorf("bird waits for a graceful restart after an unplanned stop:\n%s", ss.Out)
		}
	})

	// A planned Stop (hot upgrade, restart) sends no NOTIFICATION: bird
	// keeps the route as stale; the successor's session (Restart State
	// bit) refreshes it and bird ends the graceful restart with the route
	// in place.
	t.Run("planned stop and successor", func(t *testing.T) {
		b, old := lab.announcing(t, "", labOptions(9, 120))
		before := b.Session(birdPeer).ImportUpdates
		stopPlanned(t, b, old)
		successor := startSpeaker(t, labOptions(9, 120))
		setAnnounce(t, successor, true)
		waitRefreshed(t, b, before)
	})

	// A hot upgrade starts the successor while its predecessor still
	// holds the session: bird takes the successor's connection as the
	// predecessor's restart, keeps the route as stale and takes the
	// successor's; the predecessor's planned Stop changes nothing. The
	// route is in bird's table at every sample taken meanwhile.
	t.Run("successor before the planned stop", func(t *testing.T) {
		b, old := lab.announcing(t, "", labOptions(9, 120))
		before := b.Session(birdPeer).ImportUpdates
		sampler := b.SampleRoute(vip)
		successor := startSpeaker(t, labOptions(9, 120))
		setAnnounce(t, successor, true)
		waitRefreshed(t, b, before)
		if err := old.Stop(true); err != nil {
			t.Fatal(err)
		}
		if st := successor.Status(); st.Peers[0].State != Established {
			t.Errorf("successor's session after the predecessor's stop: %+v", st)
		}
		if n, missing := sampler.Stop(); missing > 0 || n == 0 {
			t.Errorf("the route was missing from bird's table in %d of %d samples", missing, n)
		}
		b.WaitRoute(t, vip, true)
	})

	// A successor that starts drained (the drain survives a hot upgrade)
	// ends the graceful restart with nothing: bird drops the stale route.
	t.Run("planned stop and drained successor", func(t *testing.T) {
		b, old := lab.announcing(t, "", labOptions(9, 120))
		stopPlanned(t, b, old)
		successor := startSpeaker(t, labOptions(9, 120))
		setAnnounce(t, successor, false)
		b.WaitRoute(t, vip, false)
		if ss := b.Session(birdPeer); ss.State != birdtest.Established {
			t.Errorf("session %s, want Established:\n%s", ss.State, ss.Out)
		}
	})

	// A crash (the speaker's process SIGKILLed: the kernel closes the
	// socket, no NOTIFICATION): bird keeps the route as stale for the
	// restart time (graceful_restart_secs, 5 s here), then drops it.
	t.Run("crash", func(t *testing.T) {
		const restartSecs = 5
		b := lab.startBird(t, "")
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		helper := exec.Command(exe)
		helper.Env = append(os.Environ(), fmt.Sprintf("%s=%d", crashHelperEnv, restartSecs))
		out := &birdtest.Buffer{}
		helper.Stdout, helper.Stderr = out, out
		if err := helper.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = helper.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = helper.Process.Kill()
			<-exited
			if t.Failed() {
				t.Logf("speaker process output:\n%s", out.String())
			}
		})
		b.WaitRoute(t, vip, true)
		if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
		b.WaitGracefulRestart(t, birdPeer, vip)
		b.WaitRoute(t, vip, false) // after the restart time
		if ss := b.Session(birdPeer); ss.State == birdtest.Established {
			t.Errorf("session Established with the speaker dead:\n%s", ss.Out)
		}
	})

	// TCP MD5 (RFC 2385): the password from the environment variable
	// password_env names; bird requires it.
	t.Run("tcp md5", func(t *testing.T) {
		const env = "XLB_TEST_BGP_PASSWORD"
		t.Setenv(env, "lab-secret")
		o := labOptions(9, 120)
		o.Config.Peers[0].PasswordEnv = env
		o.Password = nil // os.Getenv
		lab.announcing(t, "lab-secret", o)
	})

	// A peer that restarts (the router) gets the routes again once the
	// speaker reconnects.
	t.Run("peer restart", func(t *testing.T) {
		b, s := lab.announcing(t, "", labOptions(9, 120))
		b.Stop()
		birdtest.WaitFor(t, "the speaker sees the session down", func() (bool, string) {
			st := s.Status()
			return st.Peers[0].State != Established && len(st.Announced) == 0, fmt.Sprintf("%+v", st)
		})
		b = lab.startBird(t, "")
		b.WaitRoute(t, vip, true)
	})
}

// waitRefreshed waits until bird has received the route again (more than
// before updates), its session is established and its graceful restart
// over, and checks the route is there with this host's next hop.
func waitRefreshed(t *testing.T, b *birdtest.Bird, before int) {
	t.Helper()
	birdtest.WaitFor(t, "the successor's session is established, graceful restart over, the route received again", func() (bool, string) {
		ss := b.Session(birdPeer)
		return ss.State == birdtest.Established && !ss.GracefulRestart && ss.ImportUpdates > before, ss.Out
	})
	if r := b.Route(vip); !r.Present || r.NextHop != labSelf.String() {
		t.Errorf("after the successor's End-of-RIB the route is missing or changed:\n%s", r.Out)
	}
}
