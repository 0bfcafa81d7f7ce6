package kubefake

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// slicesPath is the collection's path; the namespace sits between them.
const (
	slicesPrefix = "/apis/discovery.k8s.io/v1/namespaces/"
	slicesSuffix = "/endpointslices"
)

// serveHTTP routes a request: list or watch of one namespace's slices;
// anything else is 404.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := Request{At: time.Now(), Verb: "other", Query: q}
	ns, ok := strings.CutPrefix(r.URL.Path, slicesPrefix)
	if ns, ok = strings.CutSuffix(ns, slicesSuffix); !ok || ns == "" || strings.Contains(ns, "/") || r.Method != http.MethodGet {
		req.Status = writeStatus(w, statusError(http.StatusNotFound, metav1.StatusReasonNotFound, "kubefake serves only list and watch of endpointslices"))
		s.logRequest(req)
		return
	}
	req.Namespace = ns
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
	switch {
	case fail != nil:
		req.Status = writeStatus(w, fail)
	case err != nil:
		req.Status = writeStatus(w, statusError(http.StatusBadRequest, metav1.StatusReasonBadRequest, "labelSelector: "+err.Error()))
	case isWatch:
		s.serveWatch(w, r, req, sel) // logs the request once it is answered
		return
	default:
		req.Status = s.serveList(w, ns, sel)
	}
	s.logRequest(req)
}

// serveList writes the namespace's selected slices at the current
// resourceVersion, whatever version the client asked for (the newest
// state satisfies "not older than"; the history is not kept as states).
func (s *Server) serveList(w http.ResponseWriter, ns string, sel labels.Selector) int {
	s.mu.Lock()
	list := discoveryv1.EndpointSliceList{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSliceList"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(s.st.rv, 10)},
		Items:    []discoveryv1.EndpointSlice{},
	}
	for _, e := range s.st.matching(ns, sel) {
		list.Items = append(list.Items, *e.Object)
	}
	s.mu.Unlock()
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
