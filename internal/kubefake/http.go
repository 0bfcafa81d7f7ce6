package kubefake

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// The collections' paths: the namespace sits between prefix and suffix.
var collections = []struct {
	prefix, suffix string
	res            resource
}{
	{"/apis/discovery.k8s.io/v1/namespaces/", "/endpointslices", endpointSlices},
	{"/api/v1/namespaces/", "/services", services},
}

// route finds the collection and namespace of path.
func route(path string) (resource, string, bool) {
	for _, c := range collections {
		ns, ok := strings.CutPrefix(path, c.prefix)
		if ns, ok = strings.CutSuffix(ns, c.suffix); ok && ns != "" && !strings.Contains(ns, "/") {
			return c.res, ns, true
		}
	}
	return "", "", false
}

// serveHTTP routes a request: list or watch of one namespace's slices or
// Services; anything else is 404.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := Request{At: time.Now(), Verb: "other", Query: q}
	res, ns, ok := route(r.URL.Path)
	if !ok || r.Method != http.MethodGet {
		req.Status = writeStatus(w, statusError(http.StatusNotFound, metav1.StatusReasonNotFound, "kubefake serves only list and watch of endpointslices and services"))
		s.logRequest(req)
		return
	}
	req.Namespace, req.Resource = ns, string(res)
	isWatch := q.Get("watch") == "true" || q.Get("watch") == "1"
	switch {
	case isWatch && q.Get("sendInitialEvents") == "true":
		req.Verb = "watch-list"
	case isWatch:
		req.Verb = "watch"
	default:
		req.Verb = "list"
	}
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	sel, err := labels.Parse(q.Get("labelSelector"))
	fsel, ferr := fields.ParseSelector(q.Get("fieldSelector"))
	switch {
	case fail != nil:
		req.Status = writeStatus(w, fail)
	case err != nil:
		req.Status = writeStatus(w, statusError(http.StatusBadRequest, metav1.StatusReasonBadRequest, "labelSelector: "+err.Error()))
	case ferr != nil:
		req.Status = writeStatus(w, statusError(http.StatusBadRequest, metav1.StatusReasonBadRequest, "fieldSelector: "+ferr.Error()))
	case isWatch:
		s.serveWatch(w, r, req, res, sel, fsel) // logs the request once it is answered
		return
	default:
		req.Status = s.serveList(w, res, ns, sel, fsel)
	}
	s.logRequest(req)
}

// serveList writes the namespace's selected slices or Services at the
// current resourceVersion, whatever version the client asked for (the
// newest state satisfies "not older than"; the history is not kept as
// states).
func (s *Server) serveList(w http.ResponseWriter, res resource, ns string, sel labels.Selector, fsel fields.Selector) int {
	s.mu.Lock()
	meta := metav1.ListMeta{ResourceVersion: strconv.FormatInt(s.st.rv, 10)}
	matching := s.st.matching(res, ns, sel, fsel)
	s.mu.Unlock()
	if res == services {
		list := corev1.ServiceList{
			TypeMeta: metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "ServiceList"},
			ListMeta: meta, Items: []corev1.Service{},
		}
		for _, e := range matching {
			list.Items = append(list.Items, *e.Object.(*corev1.Service))
		}
		return writeJSON(w, http.StatusOK, list)
	}
	list := discoveryv1.EndpointSliceList{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSliceList"},
		ListMeta: meta, Items: []discoveryv1.EndpointSlice{},
	}
	for _, e := range matching {
		list.Items = append(list.Items, *e.Object.(*discoveryv1.EndpointSlice))
	}
	return writeJSON(w, http.StatusOK, list)
}

// writeJSON writes v as the whole response.
func writeJSON(w http.ResponseWriter, code int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
	return code
}

// writeStatus writes an error response.
func writeStatus(w http.ResponseWriter, st *metav1.Status) int {
	return writeJSON(w, int(st.Code), st)
}

// statusError is the Status object the API server answers errors with.
func statusError(code int, reason metav1.StatusReason, msg string) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure,
		Message:  msg,
		Reason:   reason,
		Code:     int32(code),
	}
}

// reasons are the API's reasons for the HTTP statuses Fail is used
// with; others are InternalError.
var reasons = map[int]metav1.StatusReason{
	http.StatusUnauthorized:       metav1.StatusReasonUnauthorized,
	http.StatusForbidden:          metav1.StatusReasonForbidden,
	http.StatusGone:               metav1.StatusReasonExpired,
	http.StatusTooManyRequests:    metav1.StatusReasonTooManyRequests,
	http.StatusServiceUnavailable: metav1.StatusReasonServiceUnavailable,
	http.StatusGatewayTimeout:     metav1.StatusReasonTimeout,
}

// reasonFor is the API's reason for an HTTP status.
func reasonFor(code int) metav1.StatusReason {
	if r, ok := reasons[code]; ok {
		return r
	}
	return metav1.StatusReasonInternalError
}
