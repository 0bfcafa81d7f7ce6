package kubernetes

import (
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus/hooks/test"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/xlbproject/xlb/internal/kubefake"
	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
)

// Issue 29: two services whose Services live in one namespace share one
// informer (one list and watch of both Services' slices, through one
// kubeconfig), and each provider sends only its own Service's backends;
// a change to one Service leaves the other's set as it was.
func TestHubSharesNamespaceInformer(t *testing.T) {
	srv, err := kubefake.Start(kubefake.Options{NoWatchList: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	for _, s := range []*discoveryv1.EndpointSlice{
		web("web-1", http8080, a, b),
		kubefake.Slice(ns, "api", "api-1", http8080, c),
		kubefake.Slice(ns, "other", "other-1", http8080, d),
	} {
		if _, err := srv.Apply(s); err != nil {
			t.Fatal(err)
		}
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := srv.WriteKubeconfig(kc, ns); err != nil {
		t.Fatal(err)
	}
	log, _ := test.NewNullLogger()
	hub := NewHub()
	mk := func(service string) *Provider {
		p, err := New(config.KubernetesProvider{Namespace: ns, Service: service, Kubeconfig: kc, PortName: "http"}, Options{Log: log, Hub: hub})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw, pa := mk(svc), mk("api")
	rw, ra := run(t, pw), run(t, pa)
	rw.wait(t, []backend.Backend{ba, bb})
	ra.wait(t, []backend.Backend{be("web-c", "10.1.0.3", 8080)})

	lists := 0
	for _, r := range srv.Requests() {
		if r.Verb == "list" {
			lists++
			if got, want := r.Query.Get("labelSelector"), "kubernetes.io/service-name in (api,web)"; got != want {
				t.Errorf("list with labelSelector %q, want %q", got, want)
			}
		}
	}
	if lists != 1 {
		t.Fatalf("%d lists for two services of one namespace, want 1 (one shared informer)", lists)
	}

	sent := ra.count()
	if _, err := srv.Apply(web("web-1", http8080, a, b, d)); err != nil {
		t.Fatal(err)
	}
	rw.wait(t, []backend.Backend{ba, bb, bd})
	if ra.count() != sent {
		t.Errorf("api's provider sent a set when only web's Service changed")
	}
}
