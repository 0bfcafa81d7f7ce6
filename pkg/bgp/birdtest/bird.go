// Package birdtest runs a real BGP router for tests: BIRD 2 (Debian
// package bird2) in a network namespace of a test's topology (a
// testnet.Host), in the foreground as the test's child, with its control
// socket queried through birdc. pkg/bgp's tests and the lab tests of
// test/e2e peer XLB's speaker with it, and the fleet lab (test/fleet)
// runs its router with it (issue 15).
//
// The router peers passively (it never connects: XLB's speaker opens every
// session), with graceful restart on, importing every route and exporting
// none to its peers. With Config.Kernel it also installs the routes it
// learned into its namespace's main table, equal-cost paths merged into
// one multipath route: the namespace forwards like an ECMP router. Start
// ties bird's lifetime to a test; StartProcess and Close leave it to the
// caller. Every wait polls with a generous bound; nothing asserts a
// duration.
package birdtest

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// Wait bounds every wait for bird to show a state.
const Wait = 60 * time.Second

// Config is one bird instance.
type Config struct {
	// Address is bird's own address (its router id and the session's
	// local address); ASN its AS number.
	Address netip.Addr
	ASN     uint32
	// HoldSecs is the hold time bird proposes (the smaller side's wins).
	HoldSecs int
	// Kernel adds a kernel protocol exporting every route to the
	// namespace's main table with `merge paths on`: the best route and
	// every route equal to it in BGP's comparison (RFC 4271 §9.1.2.2,
	// down to the IGP metric: here the same AS path length, origin and
	// MED) become one RTA_MULTIPATH route, next hops weight 1, which the
	// kernel spreads by hash-threshold (net.ipv4.fib_multipath_hash_policy
	// chooses the hash). bird 2.0 writes routes with their next hops
	// inline, never nexthop objects, so it cannot use a resilient nexthop
	// group. Routes are removed from the kernel when bird stops.
	Kernel bool
	// ErrorWaitSecs is bird's "error wait time" (its minimum and maximum
	// alike): how long a BGP protocol stays down, refusing the peer's
	// connections, after an error such as an expired hold timer. 0 keeps
	// bird's default (60 s, doubling up to 300 s).
	ErrorWaitSecs int
	// Peers are the XLB speakers bird accepts sessions from.
	Peers []Peer
}

// Peer is one neighbour of bird.
type Peer struct {
	// Name is the BGP protocol's name in bird ([a-z0-9_]).
	Name    string
	Address netip.Addr
	ASN     uint32
	// Password is the TCP MD5 password; "" for none. bird's strings
	// have no escapes: it holds no '"' and no newline.
	Password string
}

// Bird is one running bird process.
type Bird struct {
	dir  string // configuration and control socket; removed by Close
	sock string
	cmd  *exec.Cmd
	log  *Buffer
	done chan struct{}
}

// tools are the programs a Bird needs.
var tools = []string{"bird", "birdc", "nsenter"}

// Installed returns an error naming the first of bird, birdc and nsenter
// that is not installed.
func Installed() error {
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (Debian packages bird2 and util-linux; `make deps` installs them): %w", tool, err)
		}
	}
	return nil
}

// Require fails t when bird, birdc or nsenter is not installed.
func Require(t testing.TB) {
	t.Helper()
	if err := Installed(); err != nil {
		t.Fatal(err)
	}
}

// Start runs bird with c in h's network namespace (StartProcess) and
// fails t on an error. It is closed in t's cleanup (register it after the
// topology, so that it stops first); its log is printed when t fails.
func Start(t testing.TB, h *testnet.Host, c Config) *Bird {
	t.Helper()
	b, err := StartProcess(h, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("bird: %v", err)
		}
		if t.Failed() {
			t.Logf("bird log:\n%s", b.Log())
		}
	})
	return b
}

// StartProcess runs bird with c in h's network namespace, in the
// foreground as this process's child, with its configuration and control
// socket (Sock) in a new directory under os.TempDir, and waits up to Wait
// until it answers. The caller owns it: Close stops it and removes the
// directory. On an error nothing is left running; the error carries
// bird's log.
func StartProcess(h *testnet.Host, c Config) (*Bird, error) {
	if err := Installed(); err != nil {
		return nil, err
	}
	for _, p := range c.Peers {
		if strings.ContainsAny(p.Password, "\"\n") {
			return nil, fmt.Errorf("birdtest: peer %s: a password with '\"' or a newline cannot be written in bird's config", p.Name)
		}
	}
	dir, err := os.MkdirTemp("", "birdtest-")
	if err != nil {
		return nil, err
	}
	b := &Bird{dir: dir, sock: filepath.Join(dir, "bird.ctl"), log: &Buffer{}, done: make(chan struct{})}
	path := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(path, []byte(c.conf()), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b.cmd = h.Command(context.Background(), "bird", "-f", "-c", path, "-s", b.sock)
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bird: %w", err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	var out string
	for deadline := time.Now().Add(Wait); ; time.Sleep(100 * time.Millisecond) {
		var err error
		out, err = b.Birdc("show", "status")
		if err == nil && strings.Contains(out, "Daemon is up and running") {
			return b, nil
		}
		select {
		case <-b.done:
		default:
			if time.Now().Before(deadline) {
				continue
			}
		}
		b.Close()
		return nil, fmt.Errorf("bird in %s does not answer on %s (last: %s); its log:\n%s", h.NS, b.sock, strings.TrimSpace(out), b.Log())
	}
}

// Sock is bird's control socket, for `birdc -s SOCK`. It lives in the
// mount namespace of this process: any process sharing it (not only those
// in bird's network namespace) can use it.
func (b *Bird) Sock() string { return b.sock }

// Log returns bird's output so far (it logs to stderr, every category).
func (b *Bird) Log() string { return b.log.String() }

// Close stops bird (Stop) and removes its directory; closing twice is
// harmless.
func (b *Bird) Close() error {
	b.Stop()
	return os.RemoveAll(b.dir)
}

// conf is bird's configuration file for c.
func (c Config) conf() string {
	var b strings.Builder
	fmt.Fprintf(&b, "router id %s;\nlog stderr all;\nprotocol device {}\n", c.Address)
	if c.Kernel {
		b.WriteString("protocol kernel {\n  ipv4 { export all; };\n  merge paths on;\n}\n")
	}
	for _, p := range c.Peers {
		fmt.Fprintf(&b, "protocol bgp %s {\n  local %s as %d;\n  neighbor %s as %d;\n", p.Name, c.Address, c.ASN, p.Address, p.ASN)
		fmt.Fprintf(&b, "  passive on;\n  hold time %d;\n  graceful restart on;\n", c.HoldSecs)
		if c.ErrorWaitSecs > 0 {
			fmt.Fprintf(&b, "  error wait time %d, %d;\n", c.ErrorWaitSecs, c.ErrorWaitSecs)
		}
		if p.Password != "" {
			fmt.Fprintf(&b, "  password \"%s\";\n", p.Password)
		}
		b.WriteString("  ipv4 { import all; export none; };\n}\n")
	}
	return b.String()
}

// Stop kills bird and waits for it; stopping twice is harmless.
func (b *Bird) Stop() {
	select {
	case <-b.done:
		return
	default:
	}
	_ = b.cmd.Process.Kill()
	<-b.done
}

// Birdc runs birdc on b's control socket.
func (b *Bird) Birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", b.sock}, args...)...).CombinedOutput()
	return string(out), err
}

// Route is what bird's table holds for one prefix.
type Route struct {
	Present bool
	// NextHop is the BGP next hop of the route bird prefers ("" without
	// the route); NextHops those of every route bird holds for the prefix
	// (one per peer that announces it), the preferred one first.
	NextHop  string
	NextHops []string
	// Out is birdc's answer, for messages.
	Out string
}

var nextHopLine = regexp.MustCompile(`BGP\.next_hop: (\S+)`)

// Route returns bird's routes for p.
func (b *Bird) Route(p netip.Prefix) Route {
	out, err := b.Birdc("show", "route", p.String(), "all")
	r := Route{Out: out}
	if err != nil {
		return r
	}
	r.Present = strings.Contains(out, p.String()+" ")
	for _, m := range nextHopLine.FindAllStringSubmatch(out, -1) {
		r.NextHops = append(r.NextHops, m[1])
	}
	if len(r.NextHops) > 0 {
		r.NextHop = r.NextHops[0]
	}
	return r
}

// Session is bird's view of the BGP session with one peer.
type Session struct {
	// State is the BGP state: "Established", "Active", ...
	State string
	// GracefulRestart: bird keeps the peer's routes as stale, waiting for
	// it to come back (the receiving speaker of RFC 4724).
	GracefulRestart bool
	// HoldSecs is the negotiated hold time (0 while not established);
	// ImportUpdates counts the route updates bird received from the peer.
	HoldSecs, ImportUpdates int
	// NeighborID is the peer's BGP router id as bird saw it in the
	// peer's OPEN ("" while not established).
	NeighborID string
	// Out is birdc's answer, for messages.
	Out string
}

// Established is Session.State of an up session.
const Established = "Established"

var (
	stateLine   = regexp.MustCompile(`BGP state:\s+(\S+)`)
	holdLine    = regexp.MustCompile(`Hold timer:\s+[\d.]+/(\d+)`)
	importsLine = regexp.MustCompile(`Import updates:\s+(\d+)`)
	idLine      = regexp.MustCompile(`Neighbor ID:\s+(\S+)`)
)

// Session returns bird's session with the peer named peer.
func (b *Bird) Session(peer string) Session {
	out, _ := b.Birdc("show", "protocols", "all", peer)
	s := Session{Out: out, GracefulRestart: strings.Contains(out, "Neighbor graceful restart active")}
	if m := stateLine.FindStringSubmatch(out); m != nil {
		s.State = m[1]
	}
	if m := idLine.FindStringSubmatch(out); m != nil {
		s.NeighborID = m[1]
	}
	if m := holdLine.FindStringSubmatch(out); m != nil {
		s.HoldSecs, _ = strconv.Atoi(m[1])
	}
	if m := importsLine.FindStringSubmatch(out); m != nil {
		s.ImportUpdates, _ = strconv.Atoi(m[1])
	}
	return s
}

// WaitRoute waits until bird's table holds p, or no longer does.
func (b *Bird) WaitRoute(t testing.TB, p netip.Prefix, present bool) {
	t.Helper()
	what := "bird has the route " + p.String()
	if !present {
		what = "bird has no route " + p.String()
	}
	WaitFor(t, what, func() (bool, string) {
		r := b.Route(p)
		return r.Present == present, r.Out
	})
}

// WaitGracefulRestart waits until bird's session with peer is down and
// bird keeps p as stale, waiting for the speaker to come back.
func (b *Bird) WaitGracefulRestart(t testing.TB, peer string, p netip.Prefix) {
	t.Helper()
	WaitFor(t, "bird keeps "+p.String()+", waiting for a graceful restart", func() (bool, string) {
		s, r := b.Session(peer), b.Route(p)
		return s.GracefulRestart && s.State != Established && r.Present, s.Out + r.Out
	})
}

// Sampler checks bird's table for one prefix over and over until stopped.
type Sampler struct {
	quit, done chan struct{}
	n, missing int
}

// SampleRoute starts checking for p every 20 ms.
func (b *Bird) SampleRoute(p netip.Prefix) *Sampler {
	s := &Sampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.quit:
				return
			default:
			}
			s.n++
			if !b.Route(p).Present {
				s.missing++
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return s
}

// Stop ends the sampling and returns the number of samples and of those
// without the route.
func (s *Sampler) Stop() (n, missing int) {
	close(s.quit)
	<-s.done
	return s.n, s.missing
}

// WaitFor polls cond every 100 ms until it holds, or fails t after Wait
// with cond's last detail.
func WaitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s; last:\n%s", what, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Buffer collects a process's output; it can be read while written.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
