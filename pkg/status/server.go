// Package status is the admin listener (DESIGN §3):
// /healthz and /readyz probes, the /api/v1/status document and the
// embedded console at /admin/. Every request reads the latest published
// snapshot.Snapshot and nothing else; no request touches a BPF map. The
// document's types live in pkg/status/api (standard library only), so
// clients such as xlbctl decode them without linking the data path.
package status

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/pkg/weblisten"
)

// Options configure a Server.
type Options struct {
	// Address and Port are where Listen binds (config admin.address,
	// admin.port). Port 0 picks a free port.
	Address netip.Addr
	Port    uint16
	// Store is the snapshot the instance publishes; required.
	Store snapshot.Source
	// Username enables HTTP Basic auth on /api/v1/status and /admin/
	// (config admin.auth.username); empty means no auth. Password is then
	// required (PasswordFromEnv).
	Username string
	Password string
	// WebConfig is the listener's exporter-toolkit web configuration file
	// (config admin.web_config_file): TLS, basic_auth_users, headers and
	// rate_limit; nil serves plain HTTP. Its users guard what Username
	// does; New refuses both at once. /healthz and /readyz stay open.
	WebConfig *weblisten.File
	// Log receives server errors; logrus.StandardLogger() when nil.
	Log logrus.FieldLogger
	// Now is the clock for readiness and ages; time.Now when nil (tests).
	Now func() time.Time
	// Drain drains (true) or undrains (false) the instance for
	// POST /api/v1/drain and /api/v1/undrain (DESIGN §6a), by whom the
	// requester says; nil answers them 503. It returns once the new
	// state is published. Over HTTP only a request that proved who it is
	// (Username, the web config's users or a verified client
	// certificate) reaches it, never an unauthenticated one (issue 28);
	// over the admin socket (ServeSocket) every request does.
	Drain func(drain bool, by Requester) error
	// Socket is the admin socket's path (config admin.socket), named in
	// the answer to an HTTP command refused for want of auth; "" names
	// none.
	Socket string
	// AllowedHosts are the Host header values (lower case, no port) the
	// HTTP listener accepts besides the address a request arrived on and
	// Address (config admin.allowed_hosts; issue 28: a DNS-rebinding page
	// sends its own host name). A request naming another host is 400;
	// the probes and a request without Host (HTTP/1.0) are not checked.
	AllowedHosts []string
}

// Server is the admin HTTP server: the TCP listener (Serve) and the
// admin unix socket (ServeSocket).
type Server struct {
	opts        Options
	handler     http.Handler
	sockHandler http.Handler
	srv         *http.Server
	sockSrv     *http.Server
}

// New checks opts and builds the server; it does not listen yet.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("status: Options.Store is nil")
	}
	if opts.Username != "" {
		if strings.Contains(opts.Username, ":") {
			return nil, fmt.Errorf("status: admin username %q contains ':'", opts.Username)
		}
		if opts.Password == "" {
			return nil, fmt.Errorf("status: admin username %q set but the password is empty (%s)", opts.Username, api.EnvAdminPassword)
		}
		if opts.WebConfig.Users() {
			return nil, fmt.Errorf("status: admin username %q set and %s has basic_auth_users: keep one source of users", opts.Username, opts.WebConfig.Path())
		}
	}
	if opts.Log == nil {
		opts.Log = logrus.StandardLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts}
	var auth *basicAuth
	if opts.Username != "" {
		auth = newBasicAuth(opts.Username, opts.Password)
	}
	s.handler = s.checkHost(opts.WebConfig.Guard(s.routes(auth, false), isProbe))
	s.sockHandler = s.routes(nil, true)
	s.srv = s.httpServer(s.handler)
	s.sockSrv = s.httpServer(s.sockHandler)
	s.sockSrv.ConnContext = peerContext
	return s, nil
}

func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          log.New(logWriter{s.opts.Log}, "", 0),
	}
}

// Handler is the server's routing handler for the TCP listener (for
// tests and embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// SocketHandler is the routing handler of the admin socket: the same
// routes without auth and Host checks, commands accepted from the peer
// whose credentials the connection's context holds.
func (s *Server) SocketHandler() http.Handler { return s.sockHandler }

// Addr is the configured Address:Port.
func (s *Server) Addr() string {
	return net.JoinHostPort(s.opts.Address.String(), strconv.Itoa(int(s.opts.Port)))
}

// Listen binds the configured address so that a bind failure surfaces at
// startup; pass the listener to Serve.
func (s *Server) Listen() (net.Listener, error) {
	if !s.opts.Address.IsValid() {
		return nil, errors.New("status: Options.Address is not set")
	}
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		return nil, fmt.Errorf("status: admin listener: %w", err)
	}
	return ln, nil
}

// Serve serves on ln (bound by Listen or inherited from a hot-upgrade
// predecessor), with TLS when the web config file sets it, until
// Shutdown; it returns nil after Shutdown and the listener's error
// otherwise.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.opts.WebConfig.Serve(s.srv, ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeSocket serves the admin unix socket ln (ListenSocket, or
// inherited from a hot-upgrade predecessor) until Shutdown; it returns
// nil after Shutdown and the listener's error otherwise.
func (s *Server) ServeSocket(ln net.Listener) error {
	if err := s.sockSrv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting connections and waits for open requests until
// ctx ends (net/http.Server.Shutdown), on the TCP listener and the
// socket. The daemon calls it last, after the shutdown window, so
// /readyz reports shutting_down throughout.
func (s *Server) Shutdown(ctx context.Context) error {
	return errors.Join(s.srv.Shutdown(ctx), s.sockSrv.Shutdown(ctx))
}

// EndKeepAlives closes the idle keep-alive connections and answers the
// requests in flight with "Connection: close": after a hot upgrade, a
// client's next request reaches the process that took over.
func (s *Server) EndKeepAlives() {
	s.srv.SetKeepAlivesEnabled(false)
	s.sockSrv.SetKeepAlivesEnabled(false)
}

// checkHost refuses, with 400, a request whose Host header names neither
// one of AllowedHosts, nor the address the request arrived on, nor
// Address (issue 28: DNS rebinding). The probes and a request without
// Host are let through.
func (s *Server) checkHost(next http.Handler) http.Handler {
	allowed := make(map[string]bool, len(s.opts.AllowedHosts))
	for _, h := range s.opts.AllowedHosts {
		allowed[strings.ToLower(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isProbe(r) || s.hostAllowed(r, allowed) {
			next.ServeHTTP(w, r)
			return
		}
		s.opts.Log.WithFields(logrus.Fields{"host": r.Host, "remote": r.RemoteAddr, "path": r.URL.Path}).
			Warn("admin: refused a request for another host (not in admin.allowed_hosts, not this listener's address)")
		writeText(w, http.StatusBadRequest, fmt.Sprintf("Host %q is not a name of this listener; add it to admin.allowed_hosts", r.Host))
	})
}

// hostAllowed applies checkHost's rule.
func (s *Server) hostAllowed(r *http.Request, allowed map[string]bool) bool {
	h := trimPort(r.Host)
	if h == "" || allowed[h] {
		return true
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		return false
	}
	a = a.Unmap()
	if allowed[a.String()] || (s.opts.Address.IsValid() && !s.opts.Address.IsUnspecified() && a == s.opts.Address.Unmap()) {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(la.String()); err == nil && ap.Addr().Unmap().WithZone("") == a {
			return true
		}
	}
	return false
}

// logWriter sends net/http's internal error log to logrus.
type logWriter struct{ l logrus.FieldLogger }

func (w logWriter) Write(p []byte) (int, error) {
	w.l.WithField("component", "status").Warn(strings.TrimSpace(string(p)))
	return len(p), nil
}
