package kubernetes

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/xlbproject/xlb/internal/kubefake"
	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
)

// fakeServices is the Services of the fake clientset as a ServiceClient,
// with a switch that makes every request fail (a forbidden list).
type fakeServices struct {
	cs *fake.Clientset

	mu       sync.Mutex
	down     error
	requests int
	failures int
}

func (f *fakeServices) List(ctx context.Context, o metav1.ListOptions) (*corev1.ServiceList, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.cs.CoreV1().Services(ns).List(ctx, o)
}

func (f *fakeServices) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.cs.CoreV1().Services(ns).Watch(ctx, o)
}

// IsWatchListSemanticsUnSupported: the fake has no watch-list.
func (f *fakeServices) IsWatchListSemanticsUnSupported() bool {
	return f.cs.IsWatchListSemanticsUnSupported()
}

func (f *fakeServices) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if f.down != nil {
		f.failures++
	}
	return f.down
}

func (f *fakeServices) setDown(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = err
}

func (f *fakeServices) counts() (requests, failures int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests, f.failures
}

// annotate creates or updates the provider's Service with the weight
// annotation value.
func annotate(f *fakeAPI, value string) {
	ctx := context.Background()
	c := f.cs.CoreV1().Services(ns)
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc, Annotations: map[string]string{WeightsAnnotation: value}}}
	if _, err := c.Get(ctx, svc, metav1.GetOptions{}); err == nil {
		_, err = c.Update(ctx, s, metav1.UpdateOptions{})
		must(err)
		return
	}
	_, err := c.Create(ctx, s, metav1.CreateOptions{})
	must(err)
}

// newWeighted is a provider that reads weights (weights: Options.Weights)
// through the fake API f and its Services sf.
func newWeighted(t *testing.T, f *fakeAPI, sf *fakeServices, weights bool) (*Provider, *test.Hook) {
	t.Helper()
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	p, err := New(config.KubernetesProvider{Namespace: ns, Service: svc, PortName: "http"},
		Options{Log: log, Client: f, ServiceClient: sf, Weights: weights})
	if err != nil {
		t.Fatal(err)
	}
	return p, hook
}

// weighted is b with weight w.
func weighted(b backend.Backend, w uint16) backend.Backend {
	b.Weight = w
	return b
}

// messages are the hook's entries at level that contain text.
func messages(hook *test.Hook, level logrus.Level, text string) []string {
	var out []string
	for _, e := range hook.AllEntries() {
		if e.Level == level && strings.Contains(e.Message, text) {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestWeightsAnnotation (issue 30): a weighted service's endpoints take
// the weights of the Service's xlbproject.github.io/weights annotation
// (1 without an entry); a bad entry leaves its endpoint at 1 with one
// warning per annotation value, however often the set is recomputed;
// weight 0 is listed; addresses of no endpoint are ignored at debug level;
// a round_robin service never reads Services.
func TestWeightsAnnotation(t *testing.T) {
	slice := web("web-1", http8080, a, b, c, d)
	t.Run("valid", func(t *testing.T) {
		f := newFakeAPI(slice)
		annotate(f, "10.1.0.1=3, 10.1.0.2 = 256,10.1.0.4=1")
		sf := &fakeServices{cs: f.cs}
		p, hook := newWeighted(t, f, sf, true)
		r := run(t, p)
		r.wait(t, []backend.Backend{weighted(ba, 3), weighted(bb, 256), bc, bd})
		annotate(f, "10.1.0.3=7")
		r.wait(t, []backend.Backend{ba, bb, weighted(bc, 7), bd})
		if w := messages(hook, logrus.WarnLevel, ""); len(w) != 0 {
			t.Errorf("warnings %q, want none", w)
		}
	})
	t.Run("bad_entry_warns_once", func(t *testing.T) {
		f := newFakeAPI(slice)
		bad := "10.1.0.1=x, 10.1.0.2=257, 10.1.0.x=2, 10.1.0.3=2, 10.1.0.3=4, garbage, 10.1.0.4=5"
		annotate(f, bad)
		p, hook := newWeighted(t, f, &fakeServices{cs: f.cs}, true)
		r := run(t, p)
		r.wait(t, []backend.Backend{ba, bb, bc, weighted(bd, 5)})
		warned := messages(hook, logrus.WarnLevel, "weight annotation")
		if len(warned) != 1 {
			t.Fatalf("warnings %q, want one", warned)
		}
		for _, want := range []string{`"10.1.0.1=x"`, `"10.1.0.2=257"`, `"10.1.0.x"`, "10.1.0.3 is given more than once", `"garbage"`} {
			if !strings.Contains(warned[0], want) {
				t.Errorf("warning %q does not name %s", warned[0], want)
			}
		}
		// The set is recomputed (an endpoint leaves, then comes back):
		// the same annotation value is not warned about again.
		f.apply(web("web-1", http8080, a, b, c))
		r.wait(t, []backend.Backend{ba, bb, bc})
		f.apply(slice)
		r.wait(t, []backend.Backend{ba, bb, bc, weighted(bd, 5)})
		if n := len(messages(hook, logrus.WarnLevel, "weight annotation")); n != 1 {
			t.Errorf("%d warnings after the set was recomputed, want still 1", n)
		}
		// Another bad value is another warning.
		annotate(f, "10.1.0.4=6, 10.1.0.1=-1")
		r.wait(t, []backend.Backend{ba, bb, bc, weighted(bd, 6)})
		if n := len(messages(hook, logrus.WarnLevel, "weight annotation")); n != 2 {
			t.Errorf("%d warnings after the value changed, want 2", n)
		}
	})
	t.Run("zero", func(t *testing.T) {
		f := newFakeAPI(slice)
		annotate(f, "10.1.0.2=0")
		p, _ := newWeighted(t, f, &fakeServices{cs: f.cs}, true)
		r := run(t, p)
		r.wait(t, []backend.Backend{ba, weighted(bb, 0), bc, bd})
	})
	t.Run("unknown_address", func(t *testing.T) {
		f := newFakeAPI(slice)
		annotate(f, "10.9.9.9=5, 10.1.0.1=2")
		p, hook := newWeighted(t, f, &fakeServices{cs: f.cs}, true)
		r := run(t, p)
		r.wait(t, []backend.Backend{weighted(ba, 2), bb, bc, bd})
		if w := messages(hook, logrus.WarnLevel, ""); len(w) != 0 {
			t.Errorf("warnings %q, want none", w)
		}
		found := false
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.DebugLevel && strings.Contains(e.Message, "no eligible endpoint") && slices.Equal(e.Data["addresses"].([]string), []string{"10.9.9.9"}) {
				found = true
			}
		}
		if !found {
			t.Error("no debug line names the unknown address 10.9.9.9")
		}
	})
	t.Run("round_robin_reads_no_services", func(t *testing.T) {
		f := newFakeAPI(slice)
		annotate(f, "10.1.0.1=3")
		sf := &fakeServices{cs: f.cs}
		p, _ := newWeighted(t, f, sf, false)
		r := run(t, p)
		r.wait(t, []backend.Backend{ba, bb, bc, bd})
		if n, _ := sf.counts(); n != 0 || p.sh.svcs != nil {
			t.Errorf("%d Services requests without Options.Weights (informer %v), want none", n, p.sh.svcs)
		}
	})
}

// TestParseWeights: the annotation's grammar, entry by entry.
func TestParseWeights(t *testing.T) {
	ip := netip.MustParseAddr
	w := ParseWeights(" 10.0.0.5=3,10.0.0.6=0 , 10.0.0.7 = 256, ,10.0.0.8=01, 10.0.0.9=3, 10.0.0.9=3, 10.0.0.10=1.5")
	want := map[netip.Addr]uint16{ip("10.0.0.5"): 3, ip("10.0.0.6"): 0, ip("10.0.0.7"): 256, ip("10.0.0.8"): 1}
	if len(w.ByAddr) != len(want) {
		t.Errorf("weights %v, want %v", w.ByAddr, want)
	}
	for a, n := range want {
		if got, ok := w.ByAddr[a]; !ok || got != n {
			t.Errorf("%s: weight %d (%v), want %d", a, got, ok, n)
		}
	}
	if len(w.Problems) != 2 || !strings.Contains(w.Problems[0], "10.0.0.9 is given more than once") || !strings.Contains(w.Problems[1], `"1.5"`) {
		t.Errorf("problems %q, want 10.0.0.9 twice and the weight 1.5", w.Problems)
	}
	if w := ParseWeights(""); len(w.ByAddr) != 0 || len(w.Problems) != 0 {
		t.Errorf("empty value: %+v, want nothing", w)
	}
}

// TestServiceWatchForbidden (issue 30): when the Services cannot be read
// (RBAC without services), a weighted service's provider still sends its
// set, every weight 1, after one warning however often client-go retries,
// and LastError stays nil (readiness does not depend on weights); once
// the Services can be read, the annotation applies.
func TestServiceWatchForbidden(t *testing.T) {
	f := newFakeAPI(web("web-1", http8080, a, b))
	annotate(f, "10.1.0.1=4")
	sf := &fakeServices{cs: f.cs}
	sf.setDown(apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "", errors.New(`User "system:serviceaccount:shop:xlb" cannot list resource "services" in API group "" in the namespace "shop"`)))
	p, hook := newWeighted(t, f, sf, true)
	r := run(t, p)
	r.wait(t, []backend.Backend{ba, bb})
	waitFor(t, "two failed Services requests", func() bool { _, n := sf.counts(); return n >= 2 })
	warned := messages(hook, logrus.WarnLevel, WeightsAnnotation)
	if len(warned) != 1 {
		t.Fatalf("warnings %q, want one", warned)
	}
	if e := hook.AllEntries(); !slices.ContainsFunc(e, func(e *logrus.Entry) bool {
		err, _ := e.Data[logrus.ErrorKey].(error)
		return e.Level == logrus.WarnLevel && err != nil && apierrors.IsForbidden(rootCause(err))
	}) {
		t.Error("the warning does not carry the forbidden error")
	}
	if err := p.LastError(); err != nil {
		t.Errorf("LastError = %v, want nil: the Services are not the provider's source", err)
	}
	if got, _ := r.last(); !sameSet(got, []backend.Backend{ba, bb}) {
		t.Errorf("set %v while Services are forbidden, want every weight 1", got)
	}
	sf.setDown(nil)
	r.wait(t, []backend.Backend{weighted(ba, 4), bb})
	waitFor(t, "the recovery logged", func() bool {
		return len(messages(hook, logrus.InfoLevel, "weight annotations apply")) == 1
	})
}

// TestWireWeights (issue 30): a weighted service's provider reaching an
// internal/kubefake server over HTTP through a kubeconfig, as the daemon
// does, lists and watches its Service (fieldSelector metadata.name) with
// the core/v1 client: the annotation's weights come with the first set,
// and a change of it arrives through the watch.
func TestWireWeights(t *testing.T) {
	srv, err := kubefake.Start(kubefake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if _, err := srv.Apply(web("web-1", http8080, a, b)); err != nil {
		t.Fatal(err)
	}
	service := func(weights string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc, Annotations: map[string]string{WeightsAnnotation: weights}}}
	}
	if _, err := srv.ApplyService(service("10.1.0.2=9")); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := srv.WriteKubeconfig(kc, ns); err != nil {
		t.Fatal(err)
	}
	log, _ := test.NewNullLogger()
	p, err := New(config.KubernetesProvider{Namespace: ns, Service: svc, Kubeconfig: kc, PortName: "http"}, Options{Log: log, Weights: true})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, p)
	r.wait(t, []backend.Backend{ba, weighted(bb, 9)})
	if _, err := srv.ApplyService(service("10.1.0.1=0, 10.1.0.2=2")); err != nil {
		t.Fatal(err)
	}
	r.wait(t, []backend.Backend{weighted(ba, 0), weighted(bb, 2)})
	srv.DeleteService(ns, svc)
	r.wait(t, []backend.Backend{ba, bb})
	var watched bool
	for _, q := range srv.Requests() {
		if q.Resource != "services" {
			continue
		}
		if got := q.Query.Get("fieldSelector"); got != "metadata.name="+svc {
			t.Errorf("%s of services with fieldSelector %q, want metadata.name=%s", q.Verb, got, svc)
		}
		watched = watched || strings.HasPrefix(q.Verb, "watch") && q.Status == http.StatusOK
	}
	if !watched {
		t.Error("no watch of services answered 200")
	}
}
