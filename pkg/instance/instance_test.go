package instance

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/test/lab"
)

const reservedPorts = "/proc/sys/net/ipv4/ip_local_reserved_ports"

// labConfig is a one-arm config for l: listen on XLB's address, the lab's
// backends plus extra in a static provider.
func labConfig(l *lab.Lab, extra ...config.Backend) *config.Config {
	c := config.Default()
	c.Listen = config.Listen{IP: l.XLB.IP()}
	c.SNAT = config.SNAT{IPs: []netip.Addr{l.XLB.IP()}, PortLo: 40000, PortHi: 40999}
	c.Interfaces = []string{"eth0"}
	c.FlowTable.MaxConnections = 4096
	c.Ports = []config.PortMapping{{LocalPort: 80, RemotePort: 8080}}
	static := &config.StaticProvider{}
	for i, b := range l.Backends {
		static.Backends = append(static.Backends, config.Backend{Name: fmt.Sprintf("backend-%d", i+1), IP: b.IP()})
	}
	static.Backends = append(static.Backends, extra...)
	c.Provider = config.Provider{Static: static}
	return c
}

// hostState is what an instance changes in its namespace.
type hostState struct {
	sysctls  map[string]string
	managed  int // kernel-managed neighbour entries on eth0
	attached bool
}

func readHost(t *testing.T, l *lab.Lab) hostState {
	t.Helper()
	st := hostState{sysctls: map[string]string{}}
	err := l.XLB.Do(func() error {
		for _, p := range []string{reservedPorts, hostnet.FIBLookupSysctl} {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			st.sysctls[p] = strings.TrimSpace(string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	neighs, err := l.XLB.Netlink().NeighList(l.XLB.Ifindex(), netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range neighs {
		if n.FlagsExt&netlink.NTF_EXT_MANAGED != 0 {
			st.managed++
		}
	}
	link, err := l.XLB.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	st.attached = link.Attrs().Xdp != nil && link.Attrs().Xdp.Attached
	return st
}

func quietLog() *logrus.Logger {
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	return log
}

func start(l *lab.Lab, ctx context.Context, c *config.Config, dir string) (*Instance, error) {
	var in *Instance
	err := l.XLB.Do(func() error {
		var err error
		in, err = Start(ctx, c, Options{Log: quietLog(), JournalDir: dir, Unpinned: true})
		return err
	})
	return in, err
}

// Start changes the host as DESIGN §1 says (SNAT range reserved, FIB
// lookups on, backend neighbours managed, program attached, every backend
// routable); Stop puts every setting back and removes what it added.
func TestStartAndStopRestoreTheHost(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	before := readHost(t, l)
	in, err := start(l, context.Background(), labConfig(l), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	running := readHost(t, l)
	if !strings.Contains(running.sysctls[reservedPorts], "40000-40999") {
		t.Errorf("ip_local_reserved_ports = %q while running, want it to hold 40000-40999", running.sysctls[reservedPorts])
	}
	if running.sysctls[hostnet.FIBLookupSysctl] != "1" {
		t.Errorf("lo forwarding = %q while running, want 1", running.sysctls[hostnet.FIBLookupSysctl])
	}
	if running.managed < len(l.Backends) || !running.attached {
		t.Errorf("while running: %d managed neighbours (want ≥ %d), attached %v", running.managed, len(l.Backends), running.attached)
	}
	for _, b := range in.Backends.Snapshot() {
		if b.State != backend.Routable {
			t.Errorf("backend %s is %s (%s) once Start returned", b.IP, b.State, b.Reason)
		}
	}
	if err := l.XLB.Do(in.Stop); err != nil {
		t.Fatal(err)
	}
	after := readHost(t, l)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("after Stop the host is %+v, want it as before Start: %+v", after, before)
	}
	if err := l.XLB.Do(in.Stop); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

// One instance per network namespace: a second Start fails naming the
// lock and changes nothing; once the first stops, a new one starts.
func TestOneInstancePerNamespace(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	dir := t.TempDir()
	first, err := start(l, context.Background(), labConfig(l), dir)
	if err != nil {
		t.Fatal(err)
	}
	running := readHost(t, l)
	if _, err := start(l, context.Background(), labConfig(l), dir); err == nil || !strings.Contains(err.Error(), "another xlb is running in this network namespace") {
		t.Fatalf("second Start: %v, want the instance lock error", err)
	}
	if got := readHost(t, l); fmt.Sprint(got) != fmt.Sprint(running) {
		t.Fatalf("the refused Start changed the host: %+v, was %+v", got, running)
	}
	if err := l.XLB.Do(first.Stop); err != nil {
		t.Fatal(err)
	}
	again, err := start(l, context.Background(), labConfig(l), dir)
	if err != nil {
		t.Fatalf("Start after the first instance stopped: %v", err)
	}
	if err := l.XLB.Do(again.Stop); err != nil {
		t.Fatal(err)
	}
}

// A Start that ends early (its context cancelled while a backend's
// neighbour is still pending) returns the context's error and undoes
// everything it had done, lock included.
func TestCancelledStartUndoesEverything(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	before := readHost(t, l)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// 192.0.2.99 is on-link but nobody answers ARP: the first sync waits
	ghost := config.Backend{Name: "ghost", IP: netip.MustParseAddr("192.0.2.99")}
	if _, err := start(l, ctx, labConfig(l, ghost), dir); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a cancelled context: %v, want context.Canceled", err)
	}
	if after := readHost(t, l); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("after the cancelled Start the host is %+v, want %+v", after, before)
	}
	in, err := start(l, context.Background(), labConfig(l), dir)
	if err != nil {
		t.Fatalf("Start after a cancelled one (the lock must be free): %v", err)
	}
	if err := l.XLB.Do(in.Stop); err != nil {
		t.Fatal(err)
	}
}
