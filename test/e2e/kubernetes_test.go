package e2e

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/xlbproject/xlb/internal/kubefake"
	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// The lab tests of the Kubernetes EndpointSlice provider (issue 14): the
// daemon reaches an internal/kubefake API server listening on 127.0.0.1
// inside the lab's XLB namespace, through a kubeconfig file.

// The Service the lab's kubefake serves.
const (
	kubeNamespace = "shop"
	kubeService   = "web"
	kubeSlice     = "web-1"
	kubePortName  = "http"
)

// publishedLine is what the backend manager logs once the data path has a
// new routable set (pkg/backend publish.go, after SetRoutable returned).
const publishedLine = "routable backend set published"

// publishedCount reads the routable field of publishedLine.
var publishedCount = regexp.MustCompile(`routable backend set published"?[^\n]* routable=(\d+)`)

// kubeLab is a greetedLab (backend N greets with byte N) whose backends
// come from a kubefake Service.
type kubeLab struct {
	*lab.Lab
	api        *kubefake.Server
	kubeconfig string
}

func newKubeLab(t *testing.T) *kubeLab {
	t.Helper()
	return kubeLabOn(t, greetedLab(t))
}

// kubeLabOn serves the Service from a kubefake API server in greeted lab
// gl's XLB namespace.
func kubeLabOn(t *testing.T, gl *lab.Lab) *kubeLab {
	t.Helper()
	l := &kubeLab{Lab: gl}
	srv, err := kubefake.Start(kubefake.Options{Listen: l.XLB.Listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	l.api = srv
	l.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := srv.WriteKubeconfig(l.kubeconfig, kubeNamespace); err != nil {
		t.Fatal(err)
	}
	return l
}

// config is labConfig with provider.kubernetes instead of the static
// list, and no remote_port: the backends' port comes from the slice's
// port named http (8080, where greetedLab's backends serve).
func (l *kubeLab) config(t *testing.T, extra string) string {
	t.Helper()
	cfg := labConfig(l.Lab, extra)
	static := regexp.MustCompile(`provider:\n  static:\n    backends:\n(      .*\n)+`)
	kube := fmt.Sprintf("provider:\n  kubernetes:\n    namespace: %s\n    service: %s\n    kubeconfig: %s\n    port_name: %s\n",
		kubeNamespace, kubeService, l.kubeconfig, kubePortName)
	out := static.ReplaceAllString(cfg, kube)
	out = strings.Replace(out, "    remote_port: 8080\n", "", 1)
	if out == cfg || strings.Contains(out, "static:") || strings.Contains(out, "remote_port") {
		t.Fatalf("labConfig changed its provider or ports block; kubeLab.config needs updating:\n%s", cfg)
	}
	return out
}

// slice is the Service's one EndpointSlice: the lab's backends as pods
// backend-1…, each with the conditions cond(i) gives (i from 0).
func (l *kubeLab) slice(cond func(i int) kubefake.Conditions) *discoveryv1.EndpointSlice {
	var eps []discoveryv1.Endpoint
	for i, b := range l.Backends {
		eps = append(eps, kubefake.Endpoint(b.IP().String(), fmt.Sprintf("backend-%d", i+1), cond(i)))
	}
	return kubefake.Slice(kubeNamespace, kubeService, kubeSlice, kubefake.Ports(kubefake.TCPPort(kubePortName, 8080)), eps...)
}

func (l *kubeLab) apply(t *testing.T, s *discoveryv1.EndpointSlice) {
	t.Helper()
	if _, err := l.api.Apply(s); err != nil {
		t.Fatal(err)
	}
}

// allReady is the conditions of a rollout at rest.
func allReady(int) kubefake.Conditions { return kubefake.Ready }

func backendNamed(d api.Document, name string) (api.Backend, bool) {
	i := slices.IndexFunc(d.Backends, func(b api.Backend) bool { return b.Name == name })
	if i < 0 {
		return api.Backend{}, false
	}
	return d.Backends[i], true
}

// routable says whether the document lists exactly names as routable.
func routable(d api.Document, names ...string) bool {
	var got []string
	for _, b := range d.Backends {
		if b.State == api.Routable {
			got = append(got, b.Name)
		}
	}
	slices.Sort(got)
	return slices.Equal(got, names)
}

// publications waits until the daemon logged publishedLine more than
// after times, polling every millisecond, and returns when it saw it, the
// new count and the routable count of the last line.
func publications(t *testing.T, p *xlbproc.Proc, after int, timeout time.Duration) (time.Time, int, string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if n := p.Count(publishedLine); n > after {
			seen := time.Now()
			m := publishedCount.FindAllStringSubmatch(p.Log(), -1)
			last := ""
			if len(m) > 0 {
				last = m[len(m)-1][1]
			}
			return seen, n, last
		}
		if time.Now().After(deadline) || p.Exited() {
			t.Fatalf("no %q within %v:\n%s", publishedLine, timeout, p.Log())
		}
		time.Sleep(time.Millisecond)
	}
}

// An endpoint turns terminating while 20 connections to it stream (issue
// 14, lab): they finish byte-exact, new connections avoid it, and the
// status shows it draining, then gone once its connections are.
func TestKubernetesTerminatingDrains(t *testing.T) {
	l := newKubeLab(t)
	l.apply(t, l.slice(allReady))
	p := startXLB(t, l.Lab, l.config(t, ""))
	d := waitStatus(t, l.Lab, "3 routable backends", func(d api.Document) bool {
		return routable(d, "backend-1", "backend-2", "backend-3")
	})
	if pr := d.Provider; pr.Name != "kubernetes" || !pr.Healthy || !pr.Synced {
		t.Errorf("provider %+v, want kubernetes, healthy, synced", pr)
	}
	if b, _ := backendNamed(d, "backend-2"); b.Port != 8080 {
		t.Errorf("backend-2 port %d, want 8080 from the slice", b.Port)
	}

	// 20 connections on backend 2 (greetedLab: it greets with 2).
	const onBackend, drained = 20, 2
	var streams []*stream
	for attempt := 0; len(streams) < onBackend; attempt++ {
		if attempt > 40*onBackend {
			t.Fatalf("only %d of %d connections reached backend %d in %d attempts", len(streams), onBackend, drained, attempt)
		}
		c, backend, err := greet(l.Client())
		if err != nil {
			t.Fatalf("connection %d: %v", attempt, err)
		}
		if backend != drained {
			c.Close()
			continue
		}
		t.Cleanup(func() { c.Close() })
		streams = append(streams, &stream{id: len(streams), c: c, backend: backend})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, s := range streams {
		for _, f := range []func() error{func() error { return s.write(stop) }, s.read} {
			wg.Go(func() {
				if err := f(); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("stream %d: %w", s.id, err))
					mu.Unlock()
				}
			})
		}
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
	})
	waitReceived := func(what string, than []int64) []int64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			now := make([]int64, len(streams))
			all := true
			for i, s := range streams {
				now[i] = s.recvd.Load()
				all = all && now[i] > than[i]
			}
			if all {
				return now
			}
			if time.Now().After(deadline) {
				t.Fatalf("streams not flowing %s: received %v, before %v", what, now, than)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	got := waitReceived("before the change", make([]int64, len(streams)))

	// backend-2's pod starts terminating.
	before := p.Count(publishedLine)
	l.apply(t, l.slice(func(i int) kubefake.Conditions {
		if i == drained-1 {
			return kubefake.Terminating
		}
		return kubefake.Ready
	}))
	if _, _, n := publications(t, p, before, 60*time.Second); n != "2" {
		t.Fatalf("published a routable set of %s backends, want 2", n)
	}
	d = waitStatus(t, l.Lab, "backend-2 draining", func(d api.Document) bool {
		b, ok := backendNamed(d, "backend-2")
		return ok && b.State == api.Draining && b.ActiveConnections >= onBackend && routable(d, "backend-1", "backend-3")
	})
	if b, _ := backendNamed(d, "backend-2"); b.AvailableForNewConnections {
		t.Errorf("draining backend-2 available for new connections: %+v", b)
	}
	if v, ok := waitCounter(t, l.Lab, "xlb_backends", map[string]string{"state": "draining"}, 30*time.Second, func(v float64) bool { return v == 1 }); !ok {
		t.Errorf("xlb_backends{state=draining} = %v, want 1", v)
	}

	// New connections avoid it.
	const fresh = 60
	for i := range fresh {
		c, backend, err := greet(l.Client())
		if err != nil {
			t.Fatalf("new connection %d: %v", i, err)
		}
		c.Close()
		if backend == drained {
			t.Fatalf("new connection %d reached draining backend %d", i, drained)
		}
	}

	// The streams keep flowing, then finish byte-exact.
	waitReceived("after the change", got)
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * ioTimeout):
		t.Fatal("streams did not finish")
	}
	if len(errs) > 0 {
		t.Fatalf("%d of %d stream errors, first: %v", len(errs), 2*onBackend, errs[0])
	}
	for _, s := range streams {
		if s.sent.Load() == 0 || s.recvd.Load() != s.sent.Load() {
			t.Fatalf("stream %d: %d bytes back of %d", s.id, s.recvd.Load(), s.sent.Load())
		}
		s.c.Close()
	}

	// Gone once its pairs are: a FIN-closed pair is kept for the 60 s of
	// TIME_WAIT, then removed by the maintenance loop.
	deadline := time.Now().Add(180 * time.Second)
	for {
		d = statusDoc(t, l.Lab)
		b, listed := backendNamed(d, "backend-2")
		if !listed && routable(d, "backend-1", "backend-3") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend-2 still listed 180 s after its connections closed: %+v", b)
		}
		time.Sleep(time.Second)
	}
	if v, ok := waitCounter(t, l.Lab, "xlb_backends", map[string]string{"state": "draining"}, 30*time.Second, func(v float64) bool { return v == 0 }); !ok {
		t.Errorf("xlb_backends{state=draining} = %v after it is gone, want 0", v)
	}
	stopXLB(t, l.Lab, p)
}

// kubeUpdates is how many EndpointSlice updates the latency test times.
const kubeUpdates = 100

// TestKubernetesUpdateLatency times EndpointSlice updates to the data
// path's routable set (the closing note): each update flips
// backend-3 between ready and terminating, and its time runs from the
// write into the API server to the daemon's "routable backend set
// published" line, which the manager logs right after SetRoutable
// returned. The test reads the line within a millisecond (it polls the
// daemon's log pipe every millisecond); updates are 100 ms apart, so no
// update waits behind the provider's 50 ms coalescing. It logs the
// median and the maximum; no bound is asserted.
func TestKubernetesUpdateLatency(t *testing.T) {
	l := newKubeLab(t)
	l.apply(t, l.slice(allReady))
	p := startXLB(t, l.Lab, l.config(t, ""))
	waitStatus(t, l.Lab, "3 routable backends", func(d api.Document) bool {
		return routable(d, "backend-1", "backend-2", "backend-3")
	})
	terminating3 := func(i int) kubefake.Conditions {
		if i == 2 {
			return kubefake.Terminating
		}
		return kubefake.Ready
	}
	var took []time.Duration
	for u := range kubeUpdates {
		cond, want := terminating3, "2"
		if u%2 == 1 {
			cond, want = allReady, "3"
		}
		time.Sleep(100 * time.Millisecond)
		before := p.Count(publishedLine)
		start := time.Now()
		l.apply(t, l.slice(cond))
		seen, _, n := publications(t, p, before, 30*time.Second)
		if n != want {
			t.Fatalf("update %d: published %s routable backends, want %s", u, n, want)
		}
		took = append(took, seen.Sub(start))
	}
	t.Logf("EndpointSlice update -> data path routable set, %d single updates: %s", len(took), spread(took))

	// Bursts, as a rollout writes them: kubeBurst updates back to back.
	// Each intermediate one has one endpoint terminating (2 routable), the
	// last leaves 3 or 1 routable, alternately. The provider coalesces what
	// comes within 50 ms of its last set: the time runs from the burst's
	// last write to the publication of its final set.
	var burstTook []time.Duration
	published := 0
	for k := range kubeBursts {
		final, want := allReady, "3"
		if k%2 == 0 {
			final, want = func(i int) kubefake.Conditions {
				if i == 0 {
					return kubefake.Ready
				}
				return kubefake.Terminating
			}, "1"
		}
		time.Sleep(200 * time.Millisecond)
		start := p.Count(publishedLine)
		before := start
		for j := range kubeBurst - 1 {
			l.apply(t, l.slice(func(i int) kubefake.Conditions {
				if i == j%3 {
					return kubefake.Terminating
				}
				return kubefake.Ready
			}))
		}
		last := time.Now()
		l.apply(t, l.slice(final))
		deadline := time.Now().Add(30 * time.Second)
		for {
			seen, _, n := publications(t, p, before, 30*time.Second)
			if n == want {
				burstTook = append(burstTook, seen.Sub(last))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("burst %d: last publication %s routable, want %s", k, n, want)
			}
			before = p.Count(publishedLine)
		}
		time.Sleep(200 * time.Millisecond)
		published += p.Count(publishedLine) - start
	}
	t.Logf("bursts of %d updates -> final routable set, %d bursts: %s; %.1f routable sets published per burst",
		kubeBurst, kubeBursts, spread(burstTook), float64(published)/kubeBursts)
	stopXLB(t, l.Lab, p)
}

// Bursts of the latency test: how many, and updates in each.
const (
	kubeBursts = 20
	kubeBurst  = 10
)

// spread describes durations: median, max, min and 90th percentile.
func spread(ds []time.Duration) string {
	ds = slices.Sorted(slices.Values(ds))
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return fmt.Sprintf("median %v, max %v (min %v, p90 %v)", r(ds[len(ds)/2]), r(ds[len(ds)-1]), r(ds[0]), r(ds[len(ds)*9/10]))
}

// TestKubernetesNamedPortWithoutPortName (issue 28): a one-port Service
// whose port is named "http" supplies its backends without port_name
// (its only TCP port); a backend that leaves the slice is listed only
// while pairs reference it (none: gone at once; one closed connection:
// listed with it in time-wait, then gone, never listed without a pair);
// a slice with two named ports supplies none, and the log says once
// which ports it has and what to set.
func TestKubernetesNamedPortWithoutPortName(t *testing.T) {
	l := newKubeLab(t)
	l.apply(t, l.slice(allReady))
	cfg := l.config(t, "")
	noName := strings.Replace(cfg, "    port_name: "+kubePortName+"\n", "", 1)
	if noName == cfg {
		t.Fatalf("kubeLab.config sets no port_name:\n%s", cfg)
	}
	p := startXLB(t, l.Lab, noName)
	d := waitStatus(t, l.Lab, "3 routable backends on the slice's only port", func(d api.Document) bool {
		return routable(d, "backend-1", "backend-2", "backend-3")
	})
	for _, b := range d.Backends {
		if b.Port != 8080 {
			t.Errorf("%s: port %d, want 8080, the slice's only TCP port", b.Name, b.Port)
		}
	}

	// backend-3 leaves before any connection: no pair, not listed.
	l.apply(t, l.slice(func(i int) kubefake.Conditions {
		if i == 2 {
			return kubefake.Terminating
		}
		return kubefake.Ready
	}))
	waitStatus(t, l.Lab, "backend-3 gone (it owns no pair)", func(d api.Document) bool {
		_, listed := backendNamed(d, "backend-3")
		return !listed && routable(d, "backend-1", "backend-2")
	})

	// One connection to backend-1, closed by the client; then backend-1
	// leaves: listed draining while its pair is in time-wait, then gone.
	var c *net.TCPConn
	for attempt := 0; c == nil; attempt++ {
		conn, backend, err := greet(l.Client())
		if err != nil {
			t.Fatalf("connection %d: %v", attempt, err)
		}
		if backend == 1 {
			c = conn
			continue
		}
		conn.Close()
		if attempt > 100 {
			t.Fatal("no connection reached backend-1 in 100 attempts")
		}
	}
	if err := roundTrip(c, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	l.apply(t, l.slice(func(i int) kubefake.Conditions {
		if i == 1 {
			return kubefake.Ready
		}
		return kubefake.Terminating
	}))
	waitStatus(t, l.Lab, "backend-1 draining with its pair", func(d api.Document) bool {
		b, listed := backendNamed(d, "backend-1")
		return listed && b.State == api.Draining && routable(d, "backend-2")
	})
	// Gone once the pair is (time-wait: 60 s), well before the id may be
	// reused (backend.IDReuseQuiet, 2 min later).
	for deadline := time.Now().Add(150 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		d := statusDoc(t, l.Lab)
		b, listed := backendNamed(d, "backend-1")
		if !listed {
			break
		}
		if b.ActiveConnections+b.TimeWaitConnections == 0 {
			t.Fatalf("backend-1 listed %s without a pair: %+v", b.State, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend-1 still listed after its pair's time-wait: %+v", b)
		}
	}

	// Two named ports and no port_name: no backend, one warning that
	// names the ports, however often the slice changes.
	const told = `EndpointSlice supplies no backend: provider.kubernetes.port_name is not set and its ports (\"http\" 8080/TCP, \"metrics\" 9090/TCP)`
	twoPorts := func(cond func(int) kubefake.Conditions) *discoveryv1.EndpointSlice {
		s := l.slice(cond)
		s.Ports = kubefake.Ports(kubefake.TCPPort(kubePortName, 8080), kubefake.TCPPort("metrics", 9090))
		return s
	}
	l.apply(t, twoPorts(allReady))
	waitStatus(t, l.Lab, "no routable backend", func(d api.Document) bool { return routable(d) })
	if err := p.WaitLog(told, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	l.apply(t, twoPorts(func(i int) kubefake.Conditions {
		if i == 0 {
			return kubefake.Terminating
		}
		return kubefake.Ready
	}))
	l.apply(t, l.slice(allReady))
	waitStatus(t, l.Lab, "3 routable backends again", func(d api.Document) bool {
		return routable(d, "backend-1", "backend-2", "backend-3")
	})
	if n := p.Count(told); n != 1 {
		t.Errorf("the warning about the slice's ports was logged %d times, want once:\n%s", n, p.Log())
	}
	stopXLB(t, l.Lab, p)
}

// TestKubernetesAPIDownReload (issue 28): a reload and then a
// crash-restart while the Kubernetes API is down keep the route in the
// router (bird2) at every sample: the handed-over, then the adopted,
// routable set counts as synced, readiness stays ready, and the provider
// is stale in status and metrics until the API answers again.
func TestKubernetesAPIDownReload(t *testing.T) {
	gl, b := bgpLab(t)
	l := kubeLabOn(t, gl)
	l.apply(t, l.slice(allReady))
	cfg := l.config(t, bgpBlock(gl, ""))
	p := startPinned(t, gl, xlbBinary, cfg)
	w := startWorkload(t, gl)
	waitReadyz(t, gl, http.StatusOK, "ready")
	b.WaitRoute(t, bgpVIP, true)
	all := func(d api.Document) bool { return routable(d, "backend-1", "backend-2", "backend-3") }
	waitStatus(t, gl, "3 routable backends, the provider synced", func(d api.Document) bool {
		return all(d) && d.Provider.Synced && !d.Provider.Stale
	})

	l.api.Stop()
	sampler := b.SampleRoute(bgpVIP)
	// After a crash the names are gone with the process (the pins hold
	// ids and addresses): the adopted backends are named by address.
	threeRoutable := func(d api.Document) bool {
		n := 0
		for _, b := range d.Backends {
			if b.State == api.Routable {
				n++
			}
		}
		return n == 3
	}
	stale := func(what string) {
		t.Helper()
		d := waitStatus(t, gl, what+": the provider stale, 3 routable backends", func(d api.Document) bool {
			return threeRoutable(d) && d.Provider.Stale && !d.Provider.Synced
		})
		if d.Provider.Healthy || d.Provider.Error == "" {
			t.Errorf("%s: provider %+v, want unhealthy with the API's error", what, d.Provider)
		}
		waitReadyz(t, gl, http.StatusOK, "ready")
		if v, ok := waitCounter(t, gl, "xlb_backend_provider_stale", nil, 30*time.Second, func(v float64) bool { return v == 1 }); !ok {
			t.Errorf("%s: xlb_backend_provider_stale %v, want 1", what, v)
		}
	}
	refreshed := func(what string, before int) {
		t.Helper()
		birdtest.WaitFor(t, what+": the new process's session refreshed the route", func() (bool, string) {
			ss := b.Session(bgpRouter)
			return ss.State == birdtest.Established && !ss.GracefulRestart && ss.ImportUpdates > before, ss.Out
		})
	}

	// Reload (hot upgrade) with the API down.
	before := b.Session(bgpRouter).ImportUpdates
	s := handOff(t, gl, p, w)
	checkSwap(t, "hand-off with the Kubernetes API down", s)
	stale("after the reload")
	refreshed("after the reload", before)
	w.check(t, "the hand-off with the Kubernetes API down")
	t.Log(w.finish(t))

	// Crash and restart with the API still down.
	before = b.Session(bgpRouter).ImportUpdates
	p.Kill()
	b.WaitGracefulRestart(t, bgpRouter, bgpVIP)
	p = startPinned(t, gl, xlbBinary, cfg)
	stale("after the crash-restart")
	refreshed("after the crash-restart", before)
	if n, missing := sampler.Stop(); missing > 0 || n == 0 {
		t.Errorf("the route was missing from the router in %d of %d samples across the reload and the crash-restart", missing, n)
	}

	// The API answers again: synced, not stale.
	if err := l.api.Start(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, gl, "the provider synced again", func(d api.Document) bool {
		return all(d) && d.Provider.Synced && !d.Provider.Stale && d.Provider.Healthy
	})
	if v, ok := waitCounter(t, gl, "xlb_backend_provider_stale", nil, 30*time.Second, func(v float64) bool { return v == 0 }); !ok {
		t.Errorf("xlb_backend_provider_stale %v once synced, want 0", v)
	}
	b.WaitRoute(t, bgpVIP, true)
	stopXLB(t, gl, p)
}
