package kubernetes

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/xlbproject/xlb/internal/kubefake"
	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
)

// wire is a provider reaching an internal/kubefake server over HTTP
// through a kubeconfig file, as the daemon does.
type wire struct {
	srv *kubefake.Server
	p   *Provider
	r   *recorder
}

func startWire(t *testing.T, o kubefake.Options, initial ...*discoveryv1.EndpointSlice) *wire {
	t.Helper()
	srv, err := kubefake.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	for _, s := range initial {
		if _, err := srv.Apply(s); err != nil {
			t.Fatal(err)
		}
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := srv.WriteKubeconfig(kc, ns); err != nil {
		t.Fatal(err)
	}
	log, _ := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	p, err := New(config.KubernetesProvider{Namespace: ns, Service: svc, Kubeconfig: kc, PortName: "http"}, Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{srv: srv, p: p}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("requests:\n%s", strings.Join(w.requests(0), "\n"))
		}
	})
	w.r = run(t, p)
	return w
}

func (w *wire) apply(t *testing.T, s *discoveryv1.EndpointSlice) {
	t.Helper()
	if _, err := w.srv.Apply(s); err != nil {
		t.Fatal(err)
	}
}

// requests describes the requests from index from on, e.g.
// "watch rv=5 -> 410".
func (w *wire) requests(from int) []string {
	var out []string
	for _, r := range w.srv.Requests()[from:] {
		out = append(out, fmt.Sprintf("%s %s rv=%s -> %d", r.At.Format("15:04:05.000"), r.Verb, r.Query.Get("resourceVersion"), r.Status))
	}
	return out
}

// waitRequest waits for a request at index from or later with one of
// verbs and status, and returns the index after it.
func (w *wire) waitRequest(t *testing.T, from int, verbs []string, status int) int {
	t.Helper()
	var at int
	waitFor(t, strings.Join(verbs, " or ")+" answered "+http.StatusText(status), func() bool {
		rs := w.srv.Requests()
		for i := from; i < len(rs); i++ {
			if slices.Contains(verbs, rs[i].Verb) && rs[i].Status == status {
				at = i + 1
				return true
			}
		}
		return false
	})
	return at
}

// TestWire runs the informer against a real HTTP server (issue 14: "the
// wire protocol"), once as against a current API server (watch-list: the
// initial state streamed in a watch) and once as against one without
// watch-list (list, then watch). Each case starts afresh, so client-go's
// backoff, which grows with consecutive failures, stays short.
func TestWire(t *testing.T) {
	modes := []struct {
		name string
		opts kubefake.Options
		// relist is what the client sends to list again.
		relist string
	}{
		{"watch-list", kubefake.Options{}, "watch-list"},
		{"list and watch", kubefake.Options{NoWatchList: true}, "list"},
	}
	cases := []struct {
		name string
		run  func(t *testing.T, w *wire, relist string)
	}{
		{"events and a watch the server closes", func(t *testing.T, w *wire, _ string) {
			w.apply(t, web("web-1", http8080, a, with(b, kubefake.Terminating)))
			w.r.wait(t, []backend.Backend{ba})
			// The client watches again from its version, without a
			// relist, and sees what changed.
			n := len(w.srv.Requests())
			w.srv.CloseWatches()
			w.apply(t, web("web-1", http8080, a, with(b, kubefake.Terminating), c))
			w.r.wait(t, []backend.Backend{ba, bc})
			w.waitRequest(t, n, []string{"watch"}, http.StatusOK)
			for _, r := range w.srv.Requests()[n:] {
				if r.Verb != "watch" {
					t.Errorf("%s request after a closed watch, want only watches", r.Verb)
				}
			}
			w.srv.Delete(ns, "web-1")
			w.r.wait(t, nil)
		}},
		{"410 Gone: a change missed through a compaction", func(t *testing.T, w *wire, relist string) {
			// A watch that ends before it saw an event or lasted a
			// second is "very short" to client-go, which then lists
			// again instead of watching from its version: an event
			// first.
			w.apply(t, web("web-1", http8080, a))
			w.r.wait(t, []backend.Backend{ba})
			n := len(w.srv.Requests())
			if _, err := w.srv.ApplyMissed(web("web-1", http8080, b, c)); err != nil {
				t.Fatal(err)
			}
			n = w.waitRequest(t, n, []string{"watch"}, http.StatusGone)
			w.waitRequest(t, n, []string{relist}, http.StatusOK)
			w.r.wait(t, []backend.Backend{bb, bc})
		}},
		{"410 Expired in the watch stream", func(t *testing.T, w *wire, relist string) {
			n := len(w.srv.Requests())
			w.srv.ExpireWatches()
			w.waitRequest(t, n, []string{relist}, http.StatusOK)
			w.apply(t, web("web-1", http8080, b, c))
			w.r.wait(t, []backend.Backend{bb, bc})
		}},
		{"server unreachable: the set is kept, then caught up", func(t *testing.T, w *wire, _ string) {
			sent := w.r.count()
			w.srv.Stop()
			w.apply(t, web("web-1", http8080, c))
			waitFor(t, "LastError while the server is down", func() bool { return w.p.LastError() != nil })
			if err := w.p.LastError(); !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("LastError = %v, want connection refused", err)
			}
			if w.r.count() != sent {
				t.Errorf("a set was sent while the server was down")
			}
			if err := w.srv.Start(); err != nil {
				t.Fatal(err)
			}
			w.r.wait(t, []backend.Backend{bc})
			waitFor(t, "LastError cleared", func() bool { return w.p.LastError() == nil })
		}},
		{"requests answered 503: the set is kept, then caught up", func(t *testing.T, w *wire, _ string) {
			n := len(w.srv.Requests())
			w.srv.Fail(http.StatusServiceUnavailable)
			w.apply(t, web("web-1", http8080, c, d))
			w.waitRequest(t, n, []string{"watch", "list", "watch-list"}, http.StatusServiceUnavailable)
			waitFor(t, "LastError with the 503", func() bool {
				err := w.p.LastError()
				return err != nil && strings.Contains(err.Error(), "failing every request with 503")
			})
			if got, _ := w.r.last(); !sameSet(got, []backend.Backend{ba, bb}) {
				t.Errorf("set %v while the server fails, want the last one", names(got))
			}
			w.srv.Fail(0)
			w.r.wait(t, []backend.Backend{bc, bd})
			waitFor(t, "LastError cleared", func() bool { return w.p.LastError() == nil })
		}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					w := startWire(t, m.opts, web("web-1", http8080, a, b))
					w.r.wait(t, []backend.Backend{ba, bb})
					first := w.srv.Requests()
					if m.opts.NoWatchList {
						if len(first) < 2 || first[0].Verb != "watch-list" || first[0].Status != http.StatusUnprocessableEntity || first[1].Verb != "list" {
							t.Errorf("first requests %q, want a refused watch-list, then a list", w.requests(0))
						}
					} else if len(first) < 1 || first[0].Verb != "watch-list" || first[0].Status != http.StatusOK {
						t.Errorf("first requests %q, want a watch-list", w.requests(0))
					}
					// The informer syncs before its watch is open:
					// the cases start from a steady state.
					waitFor(t, "an open watch", func() bool { return w.srv.Watches() > 0 })
					c.run(t, w, m.relist)
				})
			}
		})
	}
}
