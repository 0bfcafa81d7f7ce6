package kubernetes

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"

	"github.com/xlbproject/xlb/internal/kubefake"
	"github.com/xlbproject/xlb/pkg/backend"
)

// fakeAPI is client-go's fake clientset as the provider's Client, with a
// switch that makes the API unreachable: while down, every list and watch
// fails and the open watches end.
type fakeAPI struct {
	cs    *fake.Clientset
	inner discoveryv1client.EndpointSliceInterface

	mu       sync.Mutex
	down     error
	failures int
	watches  []watch.Interface
}

func newFakeAPI(objs ...*discoveryv1.EndpointSlice) *fakeAPI {
	cs := fake.NewClientset()
	f := &fakeAPI{cs: cs, inner: cs.DiscoveryV1().EndpointSlices(ns)}
	for _, o := range objs {
		f.apply(o)
	}
	return f
}

func (f *fakeAPI) List(ctx context.Context, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, o)
}

func (f *fakeAPI) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	w, err := f.inner.Watch(ctx, o)
	if err == nil {
		f.mu.Lock()
		f.watches = append(f.watches, w)
		f.mu.Unlock()
	}
	return w, err
}

// IsWatchListSemanticsUnSupported is the fake clientset's: it has no
// watch-list, so informers list and watch.
func (f *fakeAPI) IsWatchListSemanticsUnSupported() bool {
	return f.cs.IsWatchListSemanticsUnSupported()
}

func (f *fakeAPI) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		f.failures++
	}
	return f.down
}

// setDown makes the API fail with err (nil: reachable again).
func (f *fakeAPI) setDown(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down, f.failures = err, 0
	if err != nil {
		for _, w := range f.watches {
			w.Stop()
		}
		f.watches = nil
	}
}

func (f *fakeAPI) failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failures
}

// apply creates or replaces a slice in the fake's store (never failing:
// the store is the cluster, not the API the provider reaches).
func (f *fakeAPI) apply(s *discoveryv1.EndpointSlice) {
	ctx := context.Background()
	c := f.cs.DiscoveryV1().EndpointSlices(s.Namespace)
	if _, err := c.Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
		_, err = c.Update(ctx, s.DeepCopy(), metav1.UpdateOptions{})
		must(err)
		return
	}
	_, err := c.Create(ctx, s.DeepCopy(), metav1.CreateOptions{})
	must(err)
}

func (f *fakeAPI) remove(name string) {
	must(f.cs.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// step is one transition: what changes, then the provider's eligible set
// (the routable set) and what left it (departed: draining while pairs
// reference it).
type step struct {
	name string
	do   func(t *testing.T, f *fakeAPI, r *recorder)
	want []backend.Backend
	left []string
}

var (
	a  = kubefake.Endpoint("10.1.0.1", "web-a", kubefake.Ready)
	b  = kubefake.Endpoint("10.1.0.2", "web-b", kubefake.Ready)
	c  = kubefake.Endpoint("10.1.0.3", "web-c", kubefake.Ready)
	d  = kubefake.Endpoint("10.1.0.4", "web-d", kubefake.Ready)
	ba = be("web-a", "10.1.0.1", 8080)
	bb = be("web-b", "10.1.0.2", 8080)
	bc = be("web-c", "10.1.0.3", 8080)
	bd = be("web-d", "10.1.0.4", 8080)
)

// with returns ep with conditions cd.
func with(ep discoveryv1.Endpoint, cd kubefake.Conditions) discoveryv1.Endpoint {
	ep.Conditions = cd
	return ep
}

func web(name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return kubefake.Slice(ns, svc, name, ports, eps...)
}

func update(s *discoveryv1.EndpointSlice) func(*testing.T, *fakeAPI, *recorder) {
	return func(_ *testing.T, f *fakeAPI, _ *recorder) { f.apply(s) }
}

var errUnreachable = apierrors.NewServiceUnavailable("kube-apiserver is unreachable")

// TestTransitions drives the provider with client-go's fake clientset
// through the EndpointSlice transitions of issue 14; each step waits for
// the expected eligible set.
func TestTransitions(t *testing.T) {
	tests := []struct {
		name    string
		initial []*discoveryv1.EndpointSlice
		want    []backend.Backend // the initial sync
		steps   []step
	}{
		{"ready → terminating", []*discoveryv1.EndpointSlice{web("web-1", http8080, a, b, c)}, []backend.Backend{ba, bb, bc}, []step{
			{"b terminating", update(web("web-1", http8080, a, with(b, kubefake.Terminating), c)), []backend.Backend{ba, bc}, []string{"web-b"}},
			{"b gone, d ready", update(web("web-1", http8080, a, c, d)), []backend.Backend{ba, bc, bd}, nil},
		}},
		{"serving false", []*discoveryv1.EndpointSlice{web("web-1", http8080, a, b)}, []backend.Backend{ba, bb}, []step{
			{"a ready but not serving", update(web("web-1", http8080, with(a, cond(yes, no, no)), b)), []backend.Backend{bb}, []string{"web-a"}},
			{"a serving again", update(web("web-1", http8080, a, b)), []backend.Backend{ba, bb}, nil},
		}},
		{"null conditions", []*discoveryv1.EndpointSlice{web("web-1", http8080,
			with(a, cond(nil, nil, nil)), with(b, cond(nil, nil, yes)), with(c, cond(no, nil, nil)), with(d, cond(nil, yes, nil)))},
			[]backend.Backend{ba, bd}, []step{
				{"c's ready becomes null: ready, and serving takes it", update(web("web-1", http8080,
					with(a, cond(nil, nil, nil)), with(b, cond(nil, nil, yes)), with(c, cond(nil, nil, nil)), with(d, cond(nil, yes, nil)))),
					[]backend.Backend{ba, bc, bd}, nil},
				{"a's serving false with ready null", update(web("web-1", http8080,
					with(a, cond(nil, no, nil)), with(b, cond(nil, nil, yes)), with(c, cond(nil, nil, nil)), with(d, cond(nil, yes, nil)))),
					[]backend.Backend{bc, bd}, []string{"web-a"}},
			}},
		{"port-name mismatch", []*discoveryv1.EndpointSlice{web("web-1", kubefake.Ports(kubefake.TCPPort("metrics", 9090), kubefake.TCPPort("http", 8080)), a, b)},
			[]backend.Backend{ba, bb}, []step{
				{"port renamed", update(web("web-1", kubefake.Ports(kubefake.TCPPort("metrics", 9090), kubefake.TCPPort("web", 8080)), a, b)), nil, []string{"web-a", "web-b"}},
				{"named again, new number", update(web("web-1", kubefake.Ports(kubefake.TCPPort("http", 8081)), a, b)),
					[]backend.Backend{be("web-a", "10.1.0.1", 8081), be("web-b", "10.1.0.2", 8081)}, nil},
			}},
		{"IPv6 endpoints ignored", []*discoveryv1.EndpointSlice{web("web-4", http8080, a), v6(web("web-6", http8080, kubefake.Endpoint("2001:db8::1", "web-a", kubefake.Ready)))},
			[]backend.Backend{ba}, []step{
				{"IPv6 endpoint added, IPv4 endpoint added", func(_ *testing.T, f *fakeAPI, _ *recorder) {
					f.apply(v6(web("web-6", http8080, kubefake.Endpoint("2001:db8::1", "web-a", kubefake.Ready), kubefake.Endpoint("2001:db8::2", "web-b", kubefake.Ready))))
					f.apply(web("web-4", http8080, a, b))
				}, []backend.Backend{ba, bb}, nil},
			}},
		{"slice deleted", []*discoveryv1.EndpointSlice{web("web-1", http8080, a, b), web("web-2", http8080, c)}, []backend.Backend{ba, bb, bc}, []step{
			{"web-1 deleted", func(_ *testing.T, f *fakeAPI, _ *recorder) { f.remove("web-1") }, []backend.Backend{bc}, []string{"web-a", "web-b"}},
			{"web-2 deleted", func(_ *testing.T, f *fakeAPI, _ *recorder) { f.remove("web-2") }, nil, []string{"web-c"}},
			{"web-1 back", update(web("web-1", http8080, a)), []backend.Backend{ba}, nil},
		}},
		{"two slices for one Service", []*discoveryv1.EndpointSlice{
			web("web-1", http8080, a, with(b, kubefake.Terminating)),
			web("web-2", http8080, b, c),
			kubefake.Slice(ns, "other", "other-1", http8080, d),
		}, []backend.Backend{ba, bb, bc}, []step{
			{"b terminating in web-2 too", update(web("web-2", http8080, with(b, kubefake.Terminating), c)), []backend.Backend{ba, bc}, []string{"web-b"}},
			{"d joins web-1; the other Service's d never counted", update(web("web-1", http8080, a, d)), []backend.Backend{ba, bc, bd}, nil},
		}},
		{"API errors then recovery", []*discoveryv1.EndpointSlice{web("web-1", http8080, a, b)}, []backend.Backend{ba, bb}, []step{
			{"API unreachable: b leaves meanwhile; the set is kept", func(t *testing.T, f *fakeAPI, r *recorder) {
				sent := r.count()
				f.setDown(errUnreachable)
				f.apply(web("web-1", http8080, a))
				waitFor(t, "LastError and two failed requests", func() bool { return r.p.LastError() != nil && f.failed() >= 2 })
				if !apierrors.IsServiceUnavailable(errors.Unwrap(r.p.LastError())) {
					t.Errorf("LastError = %v, want the API's 503", r.p.LastError())
				}
				if r.count() != sent {
					t.Errorf("the provider sent a set while the API was unreachable")
				}
			}, []backend.Backend{ba, bb}, nil},
			{"API back: relist applies the change", func(_ *testing.T, f *fakeAPI, _ *recorder) { f.setDown(nil) }, []backend.Backend{ba}, []string{"web-b"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(tt.initial...)
			p, _ := newProvider(t, "http", f, 0)
			r := run(t, p)
			r.wait(t, tt.want)
			prev := tt.want
			for _, s := range tt.steps {
				s.do(t, f, r)
				r.wait(t, s.want)
				if got := left(prev, s.want); !reflect.DeepEqual(got, s.left) {
					t.Errorf("%s: left %v, want %v", s.name, got, s.left)
				}
				prev = s.want
			}
			if err := p.LastError(); err != nil {
				t.Errorf("LastError = %v after the last step, want nil", err)
			}
		})
	}
}

// The first sync waits for the API: nothing is sent while it is
// unreachable (the manager bounds that wait), LastError says why, and the
// set comes once it answers.
func TestUnreachableAtStart(t *testing.T) {
	f := newFakeAPI(web("web-1", http8080, a))
	f.setDown(errUnreachable)
	p, hook := newProvider(t, "http", f, 0)
	r := run(t, p)
	waitFor(t, "two failed requests", func() bool { return f.failed() >= 2 })
	if _, ok := r.last(); ok {
		t.Fatal("a set was sent before the first sync")
	}
	if p.LastError() == nil {
		t.Fatal("LastError is nil while the API is unreachable")
	}
	warnings := 0
	for _, e := range hook.AllEntries() {
		if e.Message == "Kubernetes API request failed; keeping the last set of backends while client-go retries" {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings for one repeated error, want 1 (logged on change only)", warnings)
	}
	f.setDown(nil)
	r.wait(t, []backend.Backend{ba})
	waitFor(t, "LastError cleared", func() bool { return p.LastError() == nil })
}

// An empty Service still syncs: the first set is empty, not absent.
func TestEmptyFirstSync(t *testing.T) {
	p, _ := newProvider(t, "http", newFakeAPI(), 0)
	r := run(t, p)
	waitFor(t, "the first set", func() bool { _, ok := r.last(); return ok })
	if got, _ := r.last(); len(got) != 0 {
		t.Fatalf("first set %v, want empty", names(got))
	}
}

// A burst of changes is coalesced: with a 5 s debounce, three updates
// made right after the first sync arrive as one set.
func TestDebounceCoalesces(t *testing.T) {
	f := newFakeAPI(web("web-1", http8080, a))
	p, _ := newProvider(t, "http", f, 5*time.Second)
	r := run(t, p)
	r.wait(t, []backend.Backend{ba})
	eps := []discoveryv1.Endpoint{a}
	for _, e := range []discoveryv1.Endpoint{b, c, d} {
		eps = append(eps, e)
		f.apply(web("web-1", http8080, eps...))
	}
	r.wait(t, []backend.Backend{ba, bb, bc, bd})
	if n := r.count(); n != 2 {
		t.Errorf("%d sets sent, want 2 (the first sync, then the burst as one)", n)
	}
}
