package kubefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
)

// watchBuffer is how many events a watcher may lag behind; a watcher
// further behind is ended (the client watches again from its version),
// as the API server drops slow watchers.
const watchBuffer = 1024

// watcher is one open watch stream.
type watcher struct {
	res  resource
	ns   string
	sel  labels.Selector
	fsel fields.Selector
	ch   chan event
	// done is closed to end the stream; final, when set before, is sent
	// first as an ERROR event.
	done  chan struct{}
	final *metav1.Status
}

// notifyLocked sends e to the watchers that select it.
func (s *Server) notifyLocked(e event) {
	for w := range s.watchers {
		if !selects(e.Object, w.res, w.ns, w.sel, w.fsel, e.res) {
			continue
		}
		select {
		case w.ch <- e:
		default:
			s.endLocked(w, nil)
		}
	}
}

// closeWatchersLocked ends every watch, with an ERROR event of st when
// st is not nil.
func (s *Server) closeWatchersLocked(st *metav1.Status) {
	for w := range s.watchers {
		s.endLocked(w, st)
	}
}

func (s *Server) endLocked(w *watcher, st *metav1.Status) {
	w.final = st
	close(w.done)
	delete(s.watchers, w)
}

// serveWatch answers a watch request: the events it starts with (see the
// package doc), then live ones until the client leaves, timeoutSeconds
// pass or the test ends the stream. The request is logged when its
// status is written, before the stream.
func (s *Server) serveWatch(rw http.ResponseWriter, r *http.Request, req Request, res resource, sel labels.Selector, fsel fields.Selector) {
	q := req.Query
	w := &watcher{res: res, ns: req.Namespace, sel: sel, fsel: fsel, ch: make(chan event, watchBuffer), done: make(chan struct{})}
	s.mu.Lock()
	initial, st := s.startLocked(req, res, sel, fsel)
	if st == nil {
		s.watchers[w] = struct{}{}
	}
	s.mu.Unlock()
	if st != nil {
		req.Status = writeStatus(rw, st)
		s.logRequest(req)
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}()

	var timeout <-chan time.Time
	if secs, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && secs > 0 {
		t := time.NewTimer(time.Duration(secs) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusOK)
	req.Status = http.StatusOK
	s.logRequest(req)
	flusher, _ := rw.(http.Flusher)
	enc := json.NewEncoder(rw)
	send := func(typ watch.EventType, obj any) bool {
		if err := enc.Encode(struct {
			Type   watch.EventType `json:"type"`
			Object any             `json:"object"`
		}{typ, obj}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if flusher != nil {
		flusher.Flush() // the headers: the client's Watch returns
	}
	for _, e := range initial {
		if !send(e.Type, e.Object) {
			return
		}
	}
	for {
		select {
		case e := <-w.ch:
			if !send(e.Type, e.Object) {
				return
			}
		case <-w.done:
			s.mu.Lock()
			final := w.final
			s.mu.Unlock()
			if final != nil {
				send(watch.Error, final)
			}
			return
		case <-timeout:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// startLocked decides how a watch starts: the events it begins with, or
// the error status it is refused with.
func (s *Server) startLocked(req Request, res resource, sel labels.Selector, fsel fields.Selector) ([]event, *metav1.Status) {
	q := req.Query
	rv := q.Get("resourceVersion")
	if req.Verb == "watch-list" {
		if s.opts.NoWatchList {
			return nil, statusError(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
				`ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled`)
		}
		if q.Get("allowWatchBookmarks") != "true" || q.Get("resourceVersionMatch") != string(metav1.ResourceVersionMatchNotOlderThan) {
			return nil, statusError(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
				"sendInitialEvents requires allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan")
		}
		meta := metav1.ObjectMeta{
			ResourceVersion: strconv.FormatInt(s.st.rv, 10),
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}
		var bookmark object = &discoveryv1.EndpointSlice{TypeMeta: sliceType, ObjectMeta: meta}
		if res == services {
			bookmark = &corev1.Service{TypeMeta: serviceType, ObjectMeta: meta}
		}
		return append(s.st.matching(res, req.Namespace, sel, fsel), event{Type: watch.Bookmark, Object: bookmark, res: res, rv: s.st.rv}), nil
	}
	if rv == "" || rv == "0" {
		return s.st.matching(res, req.Namespace, sel, fsel), nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	switch {
	case err != nil:
		return nil, statusError(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("invalid resourceVersion %q", rv))
	case n < s.st.compacted:
		return nil, statusError(http.StatusGone, metav1.StatusReasonExpired,
			fmt.Sprintf("too old resource version: %d (%d)", n, s.st.compacted))
	}
	return s.st.since(n, res, req.Namespace, sel, fsel), nil
}
