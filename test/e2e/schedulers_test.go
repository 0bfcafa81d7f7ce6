package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// The schedulers in the lab (issue 30, "Tests that must exist"): weighted
// round robin's proportions and smoothness, Maglev's stability when a
// backend leaves, client affinity, and two instances that agree without
// sharing any state. One greeted one-arm lab (each backend answers a
// connection with its number) goes through three hot reloads; a second
// lab, built meanwhile, runs the last config with its backends listed in
// reverse order. Every connection is closed with a RST (SO_LINGER 0), so
// neither side keeps a TIME_WAIT and a 4-tuple can be used again at once.

// schedBackend is one static backend of schedConfig: the lab's backend
// number (1…) and its weight (0: the default, left out).
type schedBackend struct {
	n      int
	weight int
}

// schedConfig is a services-form xlb.yaml for a greeted lab: one service,
// web, on 192.0.2.10:80 → the backends given (in that order) on 8080, with
// the scheduler and, when not empty, its maglev section ("{hash:
// client_ip}").
func schedConfig(l *lab.Lab, scheduler, maglev string, backends ...schedBackend) string {
	var entries []string
	for _, b := range backends {
		e := fmt.Sprintf("{name: backend-%d, ip: %s", b.n, l.Backends[b.n-1].IP())
		if b.weight != 0 {
			e += fmt.Sprintf(", weight: %d", b.weight)
		}
		entries = append(entries, e+"}")
	}
	var c strings.Builder
	c.WriteString("name: e2e\nservices:\n")
	c.WriteString("  - name: web\n    listen: {ip: 192.0.2.10}\n    ports: [{local_port: 80, remote_port: 8080}]\n")
	fmt.Fprintf(&c, "    scheduler: %s\n", scheduler)
	if maglev != "" {
		fmt.Fprintf(&c, "    maglev: %s\n", maglev)
	}
	fmt.Fprintf(&c, "    provider: {static: {backends: [%s]}}\n", strings.Join(entries, ", "))
	c.WriteString("interfaces: [eth0]\nsnat:\n  ip: 192.0.2.10\n  port_range: \"40000-59999\"\nxdp_mode: native\nflow_table:\n  max_connections: 65536\n")
	fmt.Fprintf(&c, "state_dir: %s\nshutdown_timeout: 1\nadmin:\n  socket: %s\n", stateDir(l), adminSocket(l))
	return c.String()
}

// greetFrom opens a connection from src (the zero Addr: the client's own
// address; port 0: ephemeral) to listen:80, reads the backend's number
// and returns the connection open.
func greetFrom(client *lab.Host, src netip.AddrPort) (*net.TCPConn, byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.DialFromAddr(ctx, src, listenAddr)
	if err != nil {
		return nil, 0, err
	}
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		closeRST(c)
		return nil, 0, fmt.Errorf("greeting to %v: %w", src, err)
	}
	c.SetReadDeadline(time.Time{})
	return c, b[0], nil
}

// closeRST closes c with a RST (SO_LINGER 0): no TIME_WAIT on either side,
// so its 4-tuple is free again at once; XLB replaces the pair on the next
// SYN.
func closeRST(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// answers opens one connection from each of srcs (workers at a time),
// each closed with a RST after its greeting, and returns the backend
// number that answered each.
func answers(client *lab.Host, srcs []netip.AddrPort, workers int) ([]byte, error) {
	out := make([]byte, len(srcs))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c, b, err := greetFrom(client, srcs[i])
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				closeRST(c)
				out[i] = b
			}
		}()
	}
	for i := range srcs {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("%d of %d connections failed, first: %w", len(errs), len(srcs), errs[0])
	}
	return out, nil
}

// webService is the status document's service web; ok false when absent.
func webService(d api.Document) (api.Service, bool) {
	for _, s := range d.Services {
		if s.Name == "web" {
			return s, true
		}
	}
	return api.Service{}, false
}

// shareOf is the table share of the backend named name in svc (0 when
// it is not listed).
func shareOf(svc api.Service, name string) float64 {
	var share float64
	for _, b := range svc.Backends {
		if b.Name == name {
			share += b.TableShare
		}
	}
	return share
}

// waitTable polls the status API until web runs scheduler with a table
// built and ready(web) holds, and returns web. The table comes after the
// provider's first set (a reload's successor first serves the inherited
// one), so tests wait for the one they configured.
func waitTable(t *testing.T, l *lab.Lab, scheduler string, ready func(api.Service) bool) api.Service {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last api.Service
	for {
		svc, ok := webService(statusDoc(t, l))
		if ok && svc.Scheduler == scheduler && svc.Table != nil && svc.Table.Size > 0 && ready(svc) {
			return svc
		}
		last = svc
		if time.Now().After(deadline) {
			t.Fatalf("web: no %s table as configured within 60s; last: scheduler %q, table %+v, backends %+v", scheduler, last.Scheduler, last.Table, last.Backends)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// allShared: every backend named has a share of the table.
func allShared(names ...string) func(api.Service) bool {
	return func(svc api.Service) bool {
		for _, n := range names {
			if shareOf(svc, n) == 0 {
				return false
			}
		}
		return true
	}
}

// fallbacks reads xlb_scheduler_fallbacks_total: SYNs of a table
// scheduler's service that found no table and were picked round robin.
func fallbacks(t *testing.T, l *lab.Lab) float64 {
	t.Helper()
	return metricValue(t, scrape(t, l), "xlb_scheduler_fallbacks_total", nil)
}

// byBackend counts answers by backend number.
func byBackend(answers []byte) map[byte]int {
	m := map[byte]int{}
	for _, b := range answers {
		m[b]++
	}
	return m
}

// longestRun is the longest run of one value in seq.
func longestRun(seq []byte) int {
	best, run := 0, 0
	for i := range seq {
		if i > 0 && seq[i] == seq[i-1] {
			run++
		} else {
			run = 1
		}
		best = max(best, run)
	}
	return best
}

// TestSchedulers (issue 30): weighted round robin, Maglev on the
// five-tuple and on the client's address, and two instances that agree.
//   - wrr_3_1_1: weights 3, 1, 1 give 300/100/100 (±10 %) of 500
//     sequential connections, never more than 3 in a row on one backend.
//   - maglev_removal: after a reload to maglev five_tuple, 600 fixed
//     tuples (100 client addresses × 6 ports); a reload drops backend-3;
//     replayed, at least 97 % of the tuples that were on backend-1 and
//     backend-2 stay there, and a connection held across the reload keeps
//     working (an established pair never changes backend).
//   - client_ip: a reload to maglev client_ip; each of 100 client
//     addresses sends 3 connections, all to one backend.
//   - two_instances: a second lab with the same config, its backends
//     listed in reverse order and a fresh state_dir, gives each of the 100
//     client addresses the backend the first gave it.
func TestSchedulers(t *testing.T) {
	start := time.Now()
	// The second instance's lab is built while the first one works.
	type built struct {
		l   *lab.Lab
		err error
	}
	second := make(chan built, 1)
	go func() {
		l, err := lab.Start(lab.Options{Topology: lab.OneArm, EchoPort: -1, SinkPort: -1})
		if err == nil {
			for i, b := range l.Backends {
				if _, err = b.Serve(":8080", identEcho(byte(i+1))); err != nil {
					break
				}
			}
			if err == nil {
				_, err = l.AddClientAddresses(100)
			}
		}
		second <- built{l, err}
	}()
	var lB *lab.Lab
	t.Cleanup(func() {
		if lB == nil {
			if b := <-second; b.l != nil {
				b.l.Close()
			}
			return
		}
		if err := lB.Close(); err != nil {
			t.Errorf("second lab: close: %v", err)
		}
	})

	l := greetedLab(t)
	clients, err := l.AddClientAddresses(100)
	if err != nil {
		t.Fatal(err)
	}
	client := l.Client()
	bin := installBinary(t, xlbBinary)
	p := startPinned(t, l, bin, schedConfig(l, "weighted_round_robin", "", schedBackend{1, 3}, schedBackend{2, 1}, schedBackend{3, 1}))

	// The second instance: client_ip, backends in reverse order, its own
	// state_dir; it starts now and is asked last.
	b := <-second
	if b.err != nil {
		if b.l != nil {
			b.l.Close()
		}
		t.Fatalf("second lab: %v", b.err)
	}
	lB = b.l
	maglevClientIP := func(l *lab.Lab, order ...int) string {
		var bs []schedBackend
		for _, n := range order {
			bs = append(bs, schedBackend{n: n})
		}
		return schedConfig(l, "maglev", "{hash: client_ip}", bs...)
	}
	pB, err := startXLBEnv(t, lB, maglevClientIP(lB, 3, 2, 1), nil)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("wrr_3_1_1", func(t *testing.T) {
		svc := waitTable(t, l, "weighted_round_robin", func(s api.Service) bool { return s.Table.Size == 5 })
		if got := shareOf(svc, "backend-1"); got != 0.6 {
			t.Errorf("status: backend-1's table share %v, want 0.6", got)
		}
		fams := scrape(t, l)
		if got := metricValue(t, fams, "xlb_backend_table_share", map[string]string{"service": "web", "backend": "backend-1"}); got != 0.6 {
			t.Errorf("xlb_backend_table_share of backend-1 %v, want 0.6", got)
		}
		if got := metricValue(t, fams, "xlb_backend_weight", map[string]string{"service": "web", "backend": "backend-1"}); got != 3 {
			t.Errorf("xlb_backend_weight of backend-1 %v, want 3", got)
		}
		// Sequential connections: each SYN takes the next entry of the
		// cycle (a b a c a).
		seq := make([]byte, 500)
		count := map[byte]int{}
		for i := range seq {
			c, n, err := greetFrom(client, netip.AddrPort{})
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			closeRST(c)
			seq[i] = n
			count[n]++
		}
		t.Logf("500 connections by backend: %v; longest run on one backend %d", count, longestRun(seq))
		for n, want := range map[byte]int{1: 300, 2: 100, 3: 100} {
			if got := count[n]; got < want*9/10 || got > want*11/10 {
				t.Errorf("backend-%d: %d connections, want %d ±10 %%", n, got, want)
			}
		}
		if run := longestRun(seq); run > 3 {
			t.Errorf("%d connections in a row on one backend, want at most 3", run)
		}
	})

	var sources []netip.AddrPort // 100 client addresses × 6 fixed ports
	for port := range 6 {
		for _, a := range clients {
			sources = append(sources, netip.AddrPortFrom(a, uint16(31000+port)))
		}
	}
	t.Run("maglev_removal", func(t *testing.T) {
		reloadTo(t, bin, p, schedConfig(l, "maglev", "{hash: five_tuple}", schedBackend{n: 1}, schedBackend{n: 2}, schedBackend{n: 3}))
		svc := waitTable(t, l, "maglev", allShared("backend-1", "backend-2", "backend-3"))
		if svc.Maglev == nil || svc.Maglev.Hash != "five_tuple" || svc.Maglev.TableSize != svc.Table.Size {
			t.Fatalf("web's maglev %+v, table %+v; want five_tuple at the table's size", svc.Maglev, svc.Table)
		}
		held, heldOn, err := greetFrom(client, netip.AddrPort{})
		if err != nil {
			t.Fatal(err)
		}
		defer closeRST(held)
		fb := fallbacks(t, l)
		before, err := answers(client, sources, 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("600 tuples by backend: %v", byBackend(before))

		reloadTo(t, bin, p, schedConfig(l, "maglev", "{hash: five_tuple}", schedBackend{n: 1}, schedBackend{n: 2}))
		waitTable(t, l, "maglev", func(s api.Service) bool {
			return shareOf(s, "backend-3") == 0 && allShared("backend-1", "backend-2")(s)
		})
		after, err := answers(client, sources, 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("replayed, by backend: %v", byBackend(after))
		// Every pick came from a table, none from the round robin
		// fallback (the counter continues across the hot upgrade).
		if got := fallbacks(t, l); got != fb {
			t.Errorf("xlb_scheduler_fallbacks_total went from %v to %v while the tables were in place", fb, got)
		}
		var kept, others, moved3 int
		for i := range sources {
			switch {
			case after[i] == 3:
				t.Errorf("%v: answered by the removed backend-3", sources[i])
			case before[i] == 3:
				moved3++
			case after[i] == before[i]:
				kept++
				others++
			default:
				others++
			}
		}
		t.Logf("%d tuples were on backend-1 and backend-2, %d stayed (%.2f %%); %d moved off backend-3", others, kept, 100*float64(kept)/float64(max(others, 1)), moved3)
		if others == 0 || kept*100 < others*97 {
			t.Errorf("%d of %d tuples on backend-1 and backend-2 stayed, want at least 97 %%", kept, others)
		}
		// The held connection's pair never changed backend: it still echoes.
		if err := roundTrip(held, []byte("held across the removal")); err != nil {
			t.Errorf("the connection held on backend-%d: %v", heldOn, err)
		}
	})

	var affinity map[netip.Addr]byte // client address → its backend (client_ip)
	t.Run("client_ip", func(t *testing.T) {
		reloadTo(t, bin, p, maglevClientIP(l, 1, 2, 3))
		waitTable(t, l, "maglev", func(s api.Service) bool {
			return s.Maglev != nil && s.Maglev.Hash == "client_ip" && allShared("backend-1", "backend-2", "backend-3")(s)
		})
		var srcs []netip.AddrPort // 3 connections per client, ephemeral ports
		for range 3 {
			for _, a := range clients {
				srcs = append(srcs, netip.AddrPortFrom(a, 0))
			}
		}
		got, err := answers(client, srcs, 4)
		if err != nil {
			t.Fatal(err)
		}
		m := map[netip.Addr]byte{}
		spread := map[byte]int{}
		for i, src := range srcs {
			a := src.Addr()
			if first, seen := m[a]; !seen {
				m[a] = got[i]
				spread[got[i]]++
			} else if got[i] != first {
				t.Errorf("client %v: connections on backend-%d and backend-%d, want one backend", a, first, got[i])
			}
		}
		t.Logf("100 clients by backend: %v", spread)
		affinity = m
	})

	t.Run("two_instances", func(t *testing.T) {
		if len(affinity) != len(clients) {
			t.Fatal("client_ip did not record the first instance's backends")
		}
		if err := pB.WaitLog("xlb running", 60*time.Second); err != nil {
			t.Fatal(err)
		}
		waitTable(t, lB, "maglev", allShared("backend-1", "backend-2", "backend-3"))
		var srcs []netip.AddrPort
		for _, a := range clients {
			srcs = append(srcs, netip.AddrPortFrom(a, 0))
		}
		got, err := answers(lB.Client(), srcs, 4)
		if err != nil {
			t.Fatal(err)
		}
		differ := 0
		for i, src := range srcs {
			if want := affinity[src.Addr()]; got[i] != want {
				differ++
				if differ <= 5 {
					t.Errorf("client %v: backend-%d on the second instance, backend-%d on the first", src.Addr(), got[i], want)
				}
			}
		}
		if differ > 0 {
			t.Errorf("%d of %d clients got another backend from the second instance", differ, len(srcs))
		}
	})
	t.Logf("TestSchedulers took %v", time.Since(start).Round(time.Millisecond))
}
