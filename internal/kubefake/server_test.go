package kubefake

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

const path = "/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices"

func start(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, s *Server, q url.Values) *http.Response {
	t.Helper()
	resp, err := http.Get(s.URL() + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// watchEvent is a watch event as the wire carries it.
type watchEvent struct {
	Type   string
	Object struct {
		Kind     string
		Metadata metav1.ObjectMeta
		Code     int
		Reason   string
	}
}

// events reads n events of a watch response.
func events(t *testing.T, resp *http.Response, n int) []watchEvent {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("watch: %d %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	var out []watchEvent
	for len(out) < n && sc.Scan() {
		var e watchEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	if len(out) < n {
		t.Fatalf("%d events, want %d (%v)", len(out), n, sc.Err())
	}
	return out
}

func summary(es []watchEvent) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Type+" "+e.Object.Metadata.Name+"@"+e.Object.Metadata.ResourceVersion)
	}
	return strings.Join(s, ", ")
}

func apply(t *testing.T, s *Server, sl *discoveryv1.EndpointSlice) {
	t.Helper()
	if _, err := s.Apply(sl); err != nil {
		t.Fatal(err)
	}
}

func TestListAndWatch(t *testing.T) {
	s := start(t, Options{})
	ports := Ports(TCPPort("http", 8080))
	apply(t, s, Slice("ns", "web", "web-b", ports, Endpoint("10.1.0.2", "b", Ready))) // rv 2
	apply(t, s, Slice("ns", "web", "web-a", ports, Endpoint("10.1.0.1", "a", Ready))) // rv 3
	apply(t, s, Slice("ns", "db", "db-a", ports))                                     // rv 4
	apply(t, s, Slice("other", "web", "web-x", ports))                                // rv 5

	var list discoveryv1.EndpointSliceList
	resp := get(t, s, url.Values{"labelSelector": {"kubernetes.io/service-name=web"}})
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "EndpointSliceList" || list.ResourceVersion != "5" || len(list.Items) != 2 ||
		list.Items[0].Name != "web-a" || list.Items[1].Name != "web-b" || list.Items[0].Endpoints[0].Addresses[0] != "10.1.0.1" {
		t.Fatalf("list = %+v", list)
	}

	// A watch from version 2 replays what came after it in ns, then
	// streams.
	w := get(t, s, url.Values{"watch": {"true"}, "resourceVersion": {"2"}})
	if got := summary(events(t, w, 2)); got != "ADDED web-a@3, ADDED db-a@4" {
		t.Errorf("replay = %s", got)
	}
	apply(t, s, Slice("ns", "web", "web-a", ports)) // rv 6
	s.Delete("ns", "web-b")                         // rv 7
	if got := summary(events(t, w, 2)); got != "MODIFIED web-a@6, DELETED web-b@7" {
		t.Errorf("live = %s", got)
	}

	// A watch from "" starts with the objects.
	w0 := get(t, s, url.Values{"watch": {"1"}, "labelSelector": {"kubernetes.io/service-name=web"}})
	if got := summary(events(t, w0, 1)); got != "ADDED web-a@6" {
		t.Errorf("watch from \"\" = %s", got)
	}

	// Watch-list: the objects, then the bookmark.
	wl := get(t, s, url.Values{"watch": {"true"}, "sendInitialEvents": {"true"}, "allowWatchBookmarks": {"true"},
		"resourceVersionMatch": {"NotOlderThan"}, "labelSelector": {"kubernetes.io/service-name=web"}})
	es := events(t, wl, 2)
	if summary(es) != "ADDED web-a@6, BOOKMARK @7" || es[1].Object.Metadata.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("watch-list = %s %+v", summary(es), es[1].Object.Metadata)
	}

	// ExpireWatches ends the streams with 410 Expired, and a watch from an
	// older version is refused with 410.
	s.ExpireWatches()
	if e := events(t, w, 1)[0]; e.Type != "ERROR" || e.Object.Code != 410 || e.Object.Reason != "Expired" {
		t.Errorf("after ExpireWatches: %+v", e)
	}
	if r := get(t, s, url.Values{"watch": {"true"}, "resourceVersion": {"6"}}); r.StatusCode != http.StatusGone {
		t.Errorf("watch from a compacted version: %d", r.StatusCode)
	}
	if r := get(t, s, url.Values{"watch": {"true"}, "resourceVersion": {"7"}}); r.StatusCode != http.StatusOK {
		t.Errorf("watch from the current version: %d", r.StatusCode)
	}

	want := []string{"list 200", "watch 200", "watch 200", "watch-list 200", "watch 410", "watch 200"}
	var got []string
	for _, r := range s.Requests() {
		got = append(got, r.Verb+" "+strconv.Itoa(r.Status))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("requests %q, want %q", got, want)
	}
}

func TestRefusals(t *testing.T) {
	s := start(t, Options{NoWatchList: true})
	wl := url.Values{"watch": {"true"}, "sendInitialEvents": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersionMatch": {"NotOlderThan"}}
	if r := get(t, s, wl); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("watch-list without the feature: %d", r.StatusCode)
	}
	if r := get(t, s, url.Values{"labelSelector": {"a in ("}}); r.StatusCode != http.StatusBadRequest {
		t.Errorf("bad selector: %d", r.StatusCode)
	}
	resp, err := http.Get(s.URL() + "/api/v1/namespaces/ns/pods")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("pods: %d", resp.StatusCode)
	}
	s.Fail(http.StatusForbidden)
	if r := get(t, s, nil); r.StatusCode != http.StatusForbidden {
		t.Errorf("Fail(403): %d", r.StatusCode)
	}
	s.Fail(0)
	if r := get(t, s, nil); r.StatusCode != http.StatusOK {
		t.Errorf("Fail(0): %d", r.StatusCode)
	}
}

// A watch ends at its timeoutSeconds, CloseWatches ends every watch, and
// Stop makes the server unreachable on its address until Start.
func TestEndsAndRestart(t *testing.T) {
	s := start(t, Options{})
	w := get(t, s, url.Values{"watch": {"true"}, "resourceVersion": {"1"}, "timeoutSeconds": {"1"}})
	if _, err := io.ReadAll(w.Body); err != nil {
		t.Errorf("watch at its timeout: %v", err)
	}
	w = get(t, s, url.Values{"watch": {"true"}, "resourceVersion": {"1"}})
	s.CloseWatches()
	if _, err := io.ReadAll(w.Body); err != nil {
		t.Errorf("closed watch: %v", err)
	}
	url := s.URL()
	s.Stop()
	if resp, err := http.Get(url + path); err == nil {
		resp.Body.Close()
		t.Fatal("the server answers after Stop")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if s.URL() != url {
		t.Errorf("URL after Start %s, want %s", s.URL(), url)
	}
	if r := get(t, s, nil); r.StatusCode != http.StatusOK {
		t.Errorf("after Start: %d", r.StatusCode)
	}
}

func TestKubeconfig(t *testing.T) {
	s := start(t, Options{})
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := s.WriteKubeconfig(p, "shop"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != s.URL() {
		t.Errorf("host %s, want %s", cfg.Host, s.URL())
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
}

// Services (issue 30): list and watch under /api/v1, selected by
// fieldSelector metadata.name; a Service change is no slice watcher's
// event, and the resourceVersion counter is shared.
func TestServices(t *testing.T) {
	s := start(t, Options{})
	svcPath := "/api/v1/namespaces/ns/services"
	getSvc := func(q url.Values) *http.Response {
		t.Helper()
		resp, err := http.Get(s.URL() + svcPath + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	service := func(name, weights string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{"w": weights}}}
	}
	for _, sv := range []*corev1.Service{service("web", "a"), service("db", "b")} { // rv 2, 3
		if _, err := s.ApplyService(sv); err != nil {
			t.Fatal(err)
		}
	}
	var list corev1.ServiceList
	if err := json.NewDecoder(getSvc(url.Values{"fieldSelector": {"metadata.name=web"}}).Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "ServiceList" || list.ResourceVersion != "3" || len(list.Items) != 1 || list.Items[0].Name != "web" ||
		list.Items[0].Annotations["w"] != "a" || list.Items[0].Kind != "Service" {
		t.Fatalf("list = %+v", list)
	}
	slices := get(t, s, url.Values{"watch": {"true"}, "resourceVersion": {"3"}})
	w := getSvc(url.Values{"watch": {"true"}, "resourceVersion": {"3"}, "fieldSelector": {"metadata.name=web"}})
	if _, err := s.ApplyService(service("db", "c")); err != nil { // rv 4: not selected
		t.Fatal(err)
	}
	if _, err := s.ApplyService(service("web", "d")); err != nil { // rv 5
		t.Fatal(err)
	}
	apply(t, s, Slice("ns", "web", "web-a", Ports(TCPPort("http", 8080)))) // rv 6
	s.DeleteService("ns", "web")                                           // rv 7
	es := events(t, w, 2)
	if got := summary(es); got != "MODIFIED web@5, DELETED web@7" || es[0].Object.Kind != "Service" {
		t.Errorf("Services watch = %s (%s)", got, es[0].Object.Kind)
	}
	if got := summary(events(t, slices, 1)); got != "ADDED web-a@6" {
		t.Errorf("slices watch = %s, want the slice only", got)
	}
	var res []string
	for _, r := range s.Requests() {
		res = append(res, r.Verb+" "+r.Resource)
	}
	if want := "list services,watch endpointslices,watch services"; strings.Join(res, ",") != want {
		t.Errorf("requests %q, want %q", res, want)
	}
}
