package bgp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// The bird lab: a real BGP router (birdtest) in a network namespace of
// the test's own, joined to the test process's namespace by a veth pair
// on a /30 of a documentation range. The speaker runs in the test process
// (GoBGP dials from its own goroutines, so it lives in the process's
// namespace) at labSelf; bird listens at labBird.
var (
	labSelf = netip.MustParseAddr("198.51.100.253")
	labBird = netip.MustParseAddr("198.51.100.254")
)

const (
	labBits = 30
	birdASN = 64513
	selfASN = 64512
	// birdPeer is the name of bird's BGP protocol with the speaker.
	birdPeer = "xlb"
)

// birdLab is the namespace and veth pair; bird instances come and go in it.
type birdLab struct {
	host *testnet.Host
}

// newBirdLab builds the lab, removed in t's cleanup, or fails t when bird
// is not installed.
func newBirdLab(t *testing.T) *birdLab {
	t.Helper()
	birdtest.Require(t)
	tn := testnet.NewForTest(t, "bgp")
	if hostnet.IsLocal(labSelf) {
		t.Fatalf("%s is already an address of this namespace: another run of this test?", labSelf)
	}
	h, err := tn.AddHost("bird")
	if err != nil {
		t.Fatal(err)
	}
	root, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	rootNL, err := netlink.NewHandleAt(root)
	if err != nil {
		t.Fatal(err)
	}
	defer rootNL.Close()
	// The namespace's removal takes the pair with it, but the kernel does
	// that asynchronously: remove the end in this namespace first (also
	// after a half-made pair).
	rootEnd := tn.LinkName("r")
	tn.OnClose(func() error {
		link, err := netlink.LinkByName(rootEnd)
		if err != nil {
			return nil // gone already
		}
		return netlink.LinkDel(link)
	})
	_, err = testnet.AddVeth(
		testnet.VethEnd{Netlink: h.Netlink(), Name: "eth0", Addr: netip.PrefixFrom(labBird, labBits)},
		testnet.VethEnd{Netlink: rootNL, Netns: root, Name: rootEnd, Addr: netip.PrefixFrom(labSelf, labBits)})
	if err != nil {
		t.Fatal(err)
	}
	return &birdLab{host: h}
}

// startBird runs bird in the lab, peering with labSelf, optionally with a
// TCP MD5 password.
func (l *birdLab) startBird(t *testing.T, password string) *birdtest.Bird {
	t.Helper()
	return birdtest.Start(t, l.host, birdtest.Config{
		Address: labBird, ASN: birdASN, HoldSecs: 9,
		Peers: []birdtest.Peer{{Name: birdPeer, Address: labSelf, ASN: selfASN, Password: password}},
	})
}

// labOptions are a speaker's options in the lab: one peer, bird, and the
// default next hop, HostAddress: labSelf.
func labOptions(holdSecs, restartSecs int) Options {
	o := options("")
	o.Config.HoldTime = time.Duration(holdSecs) * time.Second
	o.Config.GracefulRestart = time.Duration(restartSecs) * time.Second
	o.Config.Peers[0] = config.BGPPeer{Address: labBird, ASN: birdASN, Port: 179}
	o.NextHop = nil
	return o
}

// startSpeaker starts a speaker stopped (unplanned) in t's cleanup.
func startSpeaker(t *testing.T, o Options) *Speaker {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(false) })
	return s
}

// announcing starts bird and a speaker with o that announces, and waits
// until bird has the route.
func (l *birdLab) announcing(t *testing.T, password string, o Options) (*birdtest.Bird, *Speaker) {
	t.Helper()
	b := l.startBird(t, password)
	s := startSpeaker(t, o)
	setAnnounce(t, s, true)
	b.WaitRoute(t, vip, true)
	return b, s
}

// setAnnounce announces every prefix of s (on) or none.
func setAnnounce(t *testing.T, s *Speaker, on bool) {
	t.Helper()
	var prefixes []netip.Prefix
	if on {
		prefixes = s.o.Prefixes
	}
	if err := s.SetAnnounced(prefixes); err != nil {
		t.Fatal(err)
	}
}

// stopPlanned stops s as a hot upgrade does (Stop(true)) and waits until
// bird keeps the route as stale, waiting for a graceful restart.
func stopPlanned(t *testing.T, b *birdtest.Bird, s *Speaker) {
	t.Helper()
	if err := s.Stop(true); err != nil {
		t.Fatal(err)
	}
	b.WaitGracefulRestart(t, birdPeer, vip)
}
