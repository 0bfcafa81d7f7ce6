package kubefake

import (
	"cmp"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Options configures a Server.
type Options struct {
	// Listen opens the server's listener on addr, and again on the same
	// address after Stop; default net.Listen("tcp", addr). A lab test
	// passes its namespace's Listen.
	Listen func(addr string) (net.Listener, error)
	// Addr is the first listening address; default "127.0.0.1:0".
	Addr string
	// NoWatchList refuses watch requests with sendInitialEvents=true (422
	// Invalid), as an API server without the WatchList feature does.
	NoWatchList bool
}

// Request is one request a client made.
type Request struct {
	At time.Time
	// Verb is "list" or "watch"; "watch-list" for a watch with
	// sendInitialEvents=true; "other" for any other path.
	Verb string
	// Resource is "endpointslices" or "services"; "" for another path.
	Resource  string
	Namespace string
	Query     url.Values
	// Status is the HTTP status answered.
	Status int
}

// Server is a fake API server; its methods are safe for concurrent use.
type Server struct {
	opts Options

	mu       sync.Mutex
	st       store
	watchers map[*watcher]struct{}
	requests []Request
	fail     *metav1.Status // answer every request with it
	addr     string         // the listening address, kept across Stop
	srv      *http.Server
	served   chan struct{} // closed when srv's Serve returned
}

// Start listens and serves until Close.
func Start(o Options) (*Server, error) {
	if o.Listen == nil {
		o.Listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	s := &Server{opts: o, st: newStore(), watchers: map[*watcher]struct{}{}, addr: o.Addr}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is the server's base URL, http://ADDRESS:PORT.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addr
}

// Start listens again on the address of the first start after Stop: the
// API server is reachable again. A running server is left as it is.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	ln, err := s.opts.Listen(s.addr)
	if err != nil {
		return fmt.Errorf("kubefake: listen %s: %w", s.addr, err)
	}
	s.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	s.srv, s.served = srv, served
	return nil
}

// Stop closes the listener and every connection: the API server is
// unreachable (connections are refused) until Start.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, served := s.srv, s.served
	s.srv = nil
	s.closeWatchersLocked(nil)
	s.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	<-served
}

// Close stops the server for good.
func (s *Server) Close() { s.Stop() }

// Apply creates or replaces an EndpointSlice (namespace and name
// required) and returns the resourceVersion it got; watchers see ADDED
// or MODIFIED.
func (s *Server) Apply(slice *discoveryv1.EndpointSlice) (string, error) {
	return s.applyObject(slice)
}

// ApplyService creates or replaces a Service (namespace and name
// required), as Apply does an EndpointSlice.
func (s *Server) ApplyService(svc *corev1.Service) (string, error) {
	return s.applyObject(svc)
}

func (s *Server) applyObject(o object) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.st.apply(o)
	if err != nil {
		return "", err
	}
	s.notifyLocked(e)
	return e.Object.GetResourceVersion(), nil
}

// Delete removes an EndpointSlice; watchers see DELETED. It reports
// whether there was one.
func (s *Server) Delete(namespace, name string) bool {
	return s.deleteObject(endpointSlices, namespace, name)
}

// DeleteService removes a Service, as Delete does an EndpointSlice.
func (s *Server) DeleteService(namespace, name string) bool {
	return s.deleteObject(services, namespace, name)
}

func (s *Server) deleteObject(res resource, namespace, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.st.remove(res, namespace, name)
	if ok {
		s.notifyLocked(e)
	}
	return ok
}

// ResourceVersion is the current resourceVersion (that of the latest
// change).
func (s *Server) ResourceVersion() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.rv
}

// Watches is the number of open watch streams.
func (s *Server) Watches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers)
}

// CloseWatches ends every open watch stream, as an API server does at its
// watch timeout or when it restarts; clients watch again from their last
// version.
func (s *Server) CloseWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeWatchersLocked(nil)
}

// ApplyMissed is Apply while every client is disconnected through a
// compaction: no open watch sees the change, every watch ends, and the
// history is compacted past the change, so a client watching again from
// its version gets 410 Gone and must list again to see it.
func (s *Server) ApplyMissed(slice *discoveryv1.EndpointSlice) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeWatchersLocked(nil)
	e, err := s.st.apply(slice)
	if err != nil {
		return "", err
	}
	s.st.compact()
	return e.Object.GetResourceVersion(), nil
}

// ExpireWatches compacts the history and ends every open watch with an
// ERROR event of status 410 Expired, as an API server does when etcd
// compacted past a watch's version; the client must list again.
func (s *Server) ExpireWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.compact()
	st := statusError(http.StatusGone, metav1.StatusReasonExpired,
		fmt.Sprintf("The resourceVersion for the provided watch is too old (compacted at %d).", s.st.compacted))
	s.closeWatchersLocked(st)
}

// Fail answers every later request with an error of HTTP status code
// (e.g. 503, 403) and ends every open watch; Fail(0) serves again.
func (s *Server) Fail(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 {
		s.fail = nil
		return
	}
	s.fail = statusError(code, reasonFor(code), fmt.Sprintf("kubefake: failing every request with %d", code))
	s.closeWatchersLocked(nil)
}

// Requests returns the requests served so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) logRequest(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
}

func sortEvents(es []event) {
	slices.SortFunc(es, func(a, b event) int { return cmp.Compare(a.Object.GetName(), b.Object.GetName()) })
}
