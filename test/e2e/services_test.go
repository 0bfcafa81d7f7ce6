package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// servicesConfig is a services-form config (DESIGN §9) for a greeted
// lab: each service "name=ip:port->backend numbers" on remote port 8080,
// SNAT through the lab's listen address.
func servicesConfig(l *lab.Lab, services ...string) string {
	var c strings.Builder
	c.WriteString("name: e2e\nservices:\n")
	for _, s := range services {
		name, rest, _ := strings.Cut(s, "=")
		addr, backends, _ := strings.Cut(rest, "->")
		ap := netip.MustParseAddrPort(addr)
		var entries []string
		for _, n := range strings.Split(backends, ",") {
			var i int
			fmt.Sscanf(n, "%d", &i)
			entries = append(entries, fmt.Sprintf("{name: backend-%d, ip: %s}", i, l.Backends[i-1].IP()))
		}
		fmt.Fprintf(&c, "  - name: %s\n    listen: {ip: %s}\n    ports: [{local_port: %d, remote_port: 8080}]\n    provider: {static: {backends: [%s]}}\n",
			name, ap.Addr(), ap.Port(), strings.Join(entries, ", "))
	}
	c.WriteString("interfaces: [eth0]\nsnat:\n  ip: 192.0.2.10\n  port_range: \"40000-59999\"\nxdp_mode: native\nflow_table:\n  max_connections: 65536\n")
	fmt.Fprintf(&c, "state_dir: %s\nshutdown_timeout: 1\nadmin:\n  socket: %s\n", stateDir(l), adminSocket(l))
	return c.String()
}

// greetAt dials addr from client and reads the backend's number.
func greetAt(client *lab.Host, addr string) (*net.TCPConn, byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.DialFrom(ctx, 0, addr)
	if err != nil {
		return nil, 0, err
	}
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("greeting: %w", err)
	}
	c.SetReadDeadline(time.Time{})
	return c, b[0], nil
}

// answeredBy opens n connections to addr, each closed after its greeting,
// and fails t unless every one was answered by one of backends.
func answeredBy(t *testing.T, l *lab.Lab, addr string, n int, backends ...byte) {
	t.Helper()
	seen := map[byte]int{}
	for i := range n {
		c, b, err := greetAt(l.Client(), addr)
		if err != nil {
			t.Fatalf("%s: connection %d: %v", addr, i, err)
		}
		c.Close()
		if !slices.Contains(backends, b) {
			t.Fatalf("%s: connection %d answered by backend-%d, want one of %v", addr, i, b, backends)
		}
		seen[b]++
	}
	if len(seen) != len(backends) {
		t.Fatalf("%s: %d connections went to %v, want every one of backends %v", addr, n, seen, backends)
	}
	t.Logf("%s: %d connections, by backend: %v", addr, n, seen)
}

// serviceStreams are streams through one service, each checking every
// byte, run until stopped.
type serviceStreams struct {
	addr    string
	streams []*stream
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
}

func startServiceStreams(t *testing.T, l *lab.Lab, addr string, n, firstID int, backends ...byte) *serviceStreams {
	t.Helper()
	ss := &serviceStreams{addr: addr, stop: make(chan struct{})}
	for i := range n {
		c, b, err := greetAt(l.Client(), addr)
		if err != nil {
			t.Fatalf("%s: stream %d: %v", addr, i, err)
		}
		t.Cleanup(func() { c.Close() })
		if !slices.Contains(backends, b) {
			t.Fatalf("%s: stream %d answered by backend-%d, want one of %v", addr, i, b, backends)
		}
		s := &stream{id: firstID + i, c: c, backend: b}
		ss.streams = append(ss.streams, s)
		for _, f := range []func() error{func() error { return s.write(ss.stop) }, s.read} {
			ss.wg.Add(1)
			go func() {
				defer ss.wg.Done()
				if err := f(); err != nil {
					ss.mu.Lock()
					ss.errs = append(ss.errs, fmt.Errorf("%s stream %d (backend-%d): %w", addr, s.id, s.backend, err))
					ss.mu.Unlock()
				}
			}()
		}
	}
	t.Cleanup(ss.halt)
	return ss
}

func (ss *serviceStreams) halt() {
	select {
	case <-ss.stop:
	default:
		close(ss.stop)
	}
}

func (ss *serviceStreams) failures() []error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Clone(ss.errs)
}

func (ss *serviceStreams) check(t *testing.T, when string) {
	t.Helper()
	if errs := ss.failures(); len(errs) > 0 {
		t.Fatalf("%s: %d stream failures (%d resets), first: %v", when, len(errs), countResets(errs), errs[0])
	}
}

func (ss *serviceStreams) received() []int64 {
	out := make([]int64, len(ss.streams))
	for i, s := range ss.streams {
		out[i] = s.recvd.Load()
	}
	return out
}

// waitFlowing waits until every stream got more back than in before.
func (ss *serviceStreams) waitFlowing(t *testing.T, before []int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		stuck := 0
		for i, s := range ss.streams {
			if s.recvd.Load() <= before[i] {
				stuck++
			}
		}
		if stuck == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d streams got nothing back within %v", ss.addr, stuck, len(ss.streams), timeout)
		}
		ss.check(t, "while waiting for "+ss.addr)
		time.Sleep(20 * time.Millisecond)
	}
}

// finish half-closes every stream and waits until each got all its bytes
// back and the backend's FIN: each ran to its end. It returns the bytes
// streamed and the resets seen.
func (ss *serviceStreams) finish(t *testing.T) (int64, int) {
	t.Helper()
	ss.halt()
	ss.wg.Wait()
	var bytes int64
	for _, s := range ss.streams {
		bytes += s.sent.Load()
		s.c.Close()
	}
	errs := ss.failures()
	for _, err := range errs[:min(len(errs), 10)] {
		t.Error(err)
	}
	return bytes, countResets(errs)
}

// statusService is the service called name in the status document.
func statusService(d api.Document, name string) (api.Service, bool) {
	for _, s := range d.Services {
		if s.Name == name {
			return s, true
		}
	}
	return api.Service{}, false
}

// TestServices (issue 29, DESIGN §9): two services on two addresses, each
// answered only by its own backends; then, with streams through both, a
// hot reload (`xlb reload`) to a config that removes the second and adds
// a third (on the first's address, another port, with a backend the first
// service has too): no stream is reset, the removed service's streams run
// to their end, a new connection to it gets the kernel's answer (no
// listener: refused), the third serves, and the status shows the removed
// one draining with its backend draining.
func TestServices(t *testing.T) {
	l := greetedLab(t)
	extra, err := l.AddXLBAddresses(1)
	if err != nil {
		t.Fatal(err)
	}
	webAddr, apiAddr, thirdAddr := "192.0.2.10:80", netip.AddrPortFrom(extra[0], 80).String(), "192.0.2.10:8081"
	web, api2, third := "web="+webAddr+"->1,2", "api="+apiAddr+"->3", "extra="+thirdAddr+"->2"
	bin := installBinary(t, xlbBinary)
	p := startPinned(t, l, bin, servicesConfig(l, web, api2))

	answeredBy(t, l, webAddr, 60, 1, 2)
	answeredBy(t, l, apiAddr, 60, 3)
	d := statusDoc(t, l)
	if len(d.Services) != 2 || d.Services[0].Name != "web" || d.Services[1].Name != "api" {
		t.Fatalf("status services %+v, want web and api", d.Services)
	}

	const perService = 20
	webStreams := startServiceStreams(t, l, webAddr, perService, 0, 1, 2)
	apiStreams := startServiceStreams(t, l, apiAddr, perService, perService, 3)
	webStreams.waitFlowing(t, make([]int64, perService), 30*time.Second)
	apiStreams.waitFlowing(t, make([]int64, perService), 30*time.Second)

	if err := os.WriteFile(p.Config, []byte(servicesConfig(l, web, third)), 0o644); err != nil {
		t.Fatal(err)
	}
	from := p.Pid()
	if code, stderr := reload(t, bin, from); code != 0 {
		t.Fatalf("reload: exit %d, stderr %q; want 0\n%s", code, stderr, p.Log())
	}
	if _, err := p.WaitHandOff(from, swapTimeout); err != nil {
		t.Fatal(err)
	}
	webStreams.check(t, "after the reload")
	apiStreams.check(t, "after the reload")
	webStreams.waitFlowing(t, webStreams.received(), 30*time.Second)
	apiStreams.waitFlowing(t, apiStreams.received(), 30*time.Second)

	// The removed service: new connections pass to the kernel, which has
	// no listener there.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	c, err := l.Client().DialFrom(ctx, 0, apiAddr)
	cancel()
	if err == nil {
		c.Close()
		t.Fatalf("a new connection to the removed service %s was accepted; want the kernel's refusal", apiAddr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a new connection to the removed service %s: %v, want connection refused (the kernel's RST)", apiAddr, err)
	}
	answeredBy(t, l, thirdAddr, 30, 2)
	answeredBy(t, l, webAddr, 30, 1, 2)

	d = statusDoc(t, l)
	var names []string
	for _, s := range d.Services {
		names = append(names, s.Name+":"+string(s.State))
	}
	if want := []string{"web:serving", "extra:serving", "api:draining"}; !slices.Equal(names, want) {
		t.Fatalf("status services %v, want %v", names, want)
	}
	removed, _ := statusService(d, "api")
	if len(removed.Backends) != 1 || removed.Backends[0].Name != "backend-3" || removed.Backends[0].State != api.Draining {
		t.Fatalf("the removed service's backends %+v, want backend-3 draining", removed.Backends)
	}
	if removed.Connections.Active != perService {
		t.Errorf("the removed service has %d active connections, want its %d streams", removed.Connections.Active, perService)
	}

	webBytes, webResets := webStreams.finish(t)
	apiBytes, apiResets := apiStreams.finish(t)
	t.Logf("web: %d bytes both ways, api (removed): %d bytes both ways", webBytes, apiBytes)
	if webResets+apiResets != 0 {
		t.Fatalf("%d resets (web %d, removed api %d), want 0", webResets+apiResets, webResets, apiResets)
	}
	stopXLB(t, l, p)
}
