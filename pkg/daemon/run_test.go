package daemon

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// patience bounds every wait: generous, the machine is shared and noisy.
const patience = 60 * time.Second

// notes records what the daemon tells systemd.
type notes struct {
	mu   sync.Mutex
	sent []string
}

func (n *notes) send(state string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, state)
	return nil
}

func (n *notes) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.sent)
}

// index is the position of the first message starting with prefix, or -1.
func (n *notes) index(prefix string) int {
	return slices.IndexFunc(n.all(), func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// proc is a daemon run in the lab's XLB namespace.
type proc struct {
	store *snapshot.Store
	notes *notes
	sigs  chan os.Signal
	done  chan error
}

func labConfig(t *testing.T, l *lab.Lab) *config.Config {
	c := config.Default()
	c.Listen = config.Listen{IP: l.XLB.IP()}
	c.SNAT = config.SNAT{IPs: []netip.Addr{l.XLB.IP()}, PortLo: 40000, PortHi: 40999}
	c.Interfaces = []string{"eth0"}
	c.XDPMode = config.XDPModeNative
	c.FlowTable.MaxConnections = 4096
	c.Ports = []config.PortMapping{{LocalPort: 80, RemotePort: 8080}}
	c.ShutdownTimeout = time.Hour // only a second stop signal ends it
	c.Admin = config.Admin{Address: netip.MustParseAddr("127.0.0.1"), Port: 19090, Socket: filepath.Join(t.TempDir(), "admin.sock")}
	c.Metrics.Listener = config.Listener{Address: netip.MustParseAddr("127.0.0.1"), Port: 19642}
	static := &config.StaticProvider{}
	for i, b := range l.Backends {
		static.Backends = append(static.Backends, config.Backend{Name: fmt.Sprintf("backend-%d", i+1), IP: b.IP()})
	}
	c.Provider = config.Provider{Static: static}
	c.StateDir = testnet.StateDir(t)
	return c
}

// run starts Run in l's XLB namespace with the given signals already
// queued. The test must make it return (a stop signal) before it ends.
func run(t *testing.T, l *lab.Lab, c *config.Config, queued ...os.Signal) *proc {
	t.Helper()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	p := &proc{store: &snapshot.Store{}, notes: &notes{}, sigs: make(chan os.Signal, 8), done: make(chan error, 1)}
	for _, s := range queued {
		p.sigs <- s
	}
	o := Options{Log: log, Signals: p.sigs, Store: p.store, Notifier: &Notifier{send: p.notes.send}, MaintenanceInterval: 50 * time.Millisecond}
	go func() {
		p.done <- l.XLB.Do(func() error { return Run(context.Background(), c, o) })
	}()
	return p
}

// waitFor polls the published snapshot until ok holds.
func (p *proc) waitFor(t *testing.T, what string, ok func(*snapshot.Snapshot) bool) *snapshot.Snapshot {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		if s := p.store.Load(); s != nil && ok(s) {
			return s
		}
		select {
		case err := <-p.done:
			t.Fatalf("waiting for %s: Run returned %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s: not within %v; systemd was told %q", what, patience, p.notes.all())
	return nil
}

// wait waits for Run to return and gives its error.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(patience):
		t.Fatalf("Run did not return within %v; systemd was told %q", patience, p.notes.all())
		return nil
	}
}

func xdpAttached(t *testing.T, l *lab.Lab) bool {
	t.Helper()
	link, err := l.XLB.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	return link.Attrs().Xdp != nil && link.Attrs().Xdp.Attached
}

// The process walks starting → running → shutting_down → stopped, tells
// systemd at each step, ignores SIGHUP, refuses SIGUSR2 (a hot upgrade)
// while shutting down with a result `xlb reload` reads, holds the
// shutdown window until a second stop signal, and leaves nothing attached
// and nothing pinned. (A hand-off starts the binary on disk: the e2e
// tests drive it with the real one.)
func TestStatesAndSignals(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	c := labConfig(t, l)
	p := run(t, l, c)

	s := p.waitFor(t, "running", func(s *snapshot.Snapshot) bool { return s.Lifecycle == api.Running })
	if s.Sample == nil {
		t.Fatal("running without a maintenance sample")
	}
	starting, ready := p.notes.index("STATUS=starting"), p.notes.index("READY=1\nSTATUS=running: XDP eth0 native; 3/3 backends routable")
	if starting < 0 || ready < starting {
		t.Fatalf("systemd was told %q; want STATUS=starting, then READY=1 with the running line", p.notes.all())
	}

	// SIGHUP changes nothing: maintenance goes on, still running
	p.sigs <- syscall.SIGHUP
	cycle := s.Sample.Cycle
	p.waitFor(t, "two more cycles after SIGHUP", func(s *snapshot.Snapshot) bool {
		return s.Sample != nil && s.Sample.Cycle >= cycle+2
	})
	if got := p.store.Load().Lifecycle; got != api.Running {
		t.Fatalf("lifecycle %s after SIGHUP, want running", got)
	}
	if s := p.store.Load(); s.Upgrades.Start != api.StartFresh {
		t.Errorf("upgrades.start %q, want %q", s.Upgrades.Start, api.StartFresh)
	}

	// the first stop signal opens the window: the program stays attached
	p.sigs <- syscall.SIGTERM
	s = p.waitFor(t, "shutting down", func(s *snapshot.Snapshot) bool { return s.Lifecycle == api.ShuttingDown })
	if left := time.Until(s.ShutdownDeadline); left < 50*time.Minute {
		t.Fatalf("shutdown deadline %v away, want the configured hour", left)
	}
	stopping := fmt.Sprintf("STOPPING=1\nEXTEND_TIMEOUT_USEC=%d\n", (time.Hour + cleanupMargin).Microseconds())
	deadline := time.Now().Add(patience)
	for p.notes.index(stopping) < 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p.notes.index(stopping) < 0 {
		t.Fatalf("systemd was told %q; want %q", p.notes.all(), stopping)
	}
	if !xdpAttached(t, l) {
		t.Fatal("XDP detached at the start of the shutdown window; it answers with RSTs until the window ends")
	}
	if _, err := os.Stat(filepath.Join(c.StateDir, "meta")); err != nil {
		t.Fatalf("pinned state while running: %v", err)
	}

	// SIGUSR2 in the window: refused, with a result for `xlb reload`
	result := upgradeResultPath(os.Getpid())
	defer os.Remove(result)
	p.sigs <- syscall.SIGUSR2
	deadline = time.Now().Add(patience)
	var b []byte
	for err := error(nil); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err = os.ReadFile(result); err == nil {
			break
		}
	}
	if !strings.Contains(string(b), `"result":"failed"`) || !strings.Contains(string(b), "shutting_down") {
		t.Fatalf("hot upgrade result during the shutdown window: %q, want failed while shutting_down", b)
	}

	// the second one ends it
	p.sigs <- syscall.SIGINT
	if err := p.wait(t); err != nil {
		t.Fatalf("Run after the second stop signal: %v", err)
	}
	if xdpAttached(t, l) {
		t.Fatal("XDP still attached after Run returned")
	}
	if _, err := os.Stat(c.StateDir); !os.IsNotExist(err) {
		t.Fatalf("state_dir after the stop: %v, want it removed with the pins", err)
	}
}

// A stop signal during starting undoes the bring-up; Run returns nil
// without ever telling systemd READY=1.
func TestStopDuringStartup(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	p := run(t, l, labConfig(t, l), syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Fatalf("Run stopped during startup: %v, want nil", err)
	}
	if p.notes.index("READY=1") >= 0 {
		t.Fatalf("systemd was told %q; want no READY=1", p.notes.all())
	}
	if got := p.store.Load().Lifecycle; got != api.Starting {
		t.Fatalf("lifecycle %s, want it still starting", got)
	}
	if xdpAttached(t, l) {
		t.Fatal("XDP still attached after a stop during startup")
	}
}

// A bring-up that fails returns its error, never READY=1, and frees the
// listeners.
func TestFailedStartReturnsTheError(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	c := labConfig(t, l)
	c.Interfaces = []string{"eth9"} // no such interface
	p := run(t, l, c)
	err := p.wait(t)
	if err == nil || !strings.Contains(err.Error(), `interfaces[0]: no interface named "eth9"`) {
		t.Fatalf("Run: %v, want the interfaces error", err)
	}
	if p.notes.index("READY=1") >= 0 {
		t.Fatalf("systemd was told %q; want no READY=1", p.notes.all())
	}
	err = l.XLB.Do(func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:19090")
		if err == nil {
			ln.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("the admin port is still bound after Run returned: %v", err)
	}
}
