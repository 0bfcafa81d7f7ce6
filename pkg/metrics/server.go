package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/weblisten"
)

// Options configure a Server.
type Options struct {
	// Store holds the snapshots the daemon publishes, the only input of
	// every XLB series. Required.
	Store snapshot.Source
	// Log receives scrape errors and listener messages; default the
	// logrus standard logger.
	Log logrus.FieldLogger
	// Now is the clock for readiness and sample age; default time.Now.
	Now func() time.Time
	// OmitPerBackend leaves out every series with a backend label
	// (config metrics.per_backend: false; issue 28 item 9):
	// xlb_backend_state, xlb_backend_health_checks_total, the per-backend
	// traffic series, xlb_backend_tcp_timestamps and
	// xlb_backend_handshake_seconds (docs/observability.md counts them per
	// backend name). The instance's totals stay.
	OmitPerBackend bool
	// WebConfig is the listener's exporter-toolkit web configuration file
	// (config metrics.web_config_file): TLS, basic_auth_users, headers and
	// rate_limit over every path; nil serves plain HTTP without auth.
	WebConfig *weblisten.File
}

// Server is the metrics listener: /metrics (the XLB collectors plus the
// standard Go, process and promhttp collectors) and a landing page at /.
type Server struct {
	reg     *prometheus.Registry
	handler http.Handler
	srv     *http.Server
	opts    Options
}

// New builds the registry and the HTTP handler. It does not listen.
func New(o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("metrics: Options.Store is required")
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{reg: prometheus.NewRegistry(), opts: o}
	xlb := newCollectorSet(o.Store, o.Log,
		&source{name: "instance", what: "instance state", c: newInstanceCollector(o.Now)},
		&source{name: "connections", what: "maintenance sample", c: newConnectionsCollector()},
		&source{name: "udp", what: "maintenance sample", c: newUDPCollector()},
		&source{name: "maintenance", what: "maintenance sample", c: newMaintenanceCollector(o.Now)},
		&source{name: "backends", what: "backend set", c: newBackendsCollector(!o.OmitPerBackend)},
		&source{name: "handshake", what: "maintenance sample", c: newHandshakeCollector(!o.OmitPerBackend)},
		&source{name: "dataplane", what: "data path counters", c: newDataplaneCollector()},
		&source{name: "bgp", what: "BGP speaker", c: newBGPCollector()},
	)
	for _, c := range []prometheus.Collector{
		xlb,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := s.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register collector: %w", err)
		}
	}
	metricsHandler := promhttp.InstrumentMetricHandler(s.reg, promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorLog:            errorLog{o.Log},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 8,
		Timeout:             10 * time.Second,
	}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricsHandler)
	mux.Handle("GET /{$}", landingPage(o.Store))
	s.handler = o.WebConfig.Guard(mux, nil)
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	return s, nil
}

// Handler serves /metrics and the landing page; for tests and for
// embedding in another listener.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves on ln (bound by the daemon or inherited from a hot-upgrade
// predecessor), with TLS when the web config file sets it, until
// Shutdown; it returns nil after Shutdown and the listener's error
// otherwise. ln is closed on return.
func (s *Server) Serve(ln net.Listener) error {
	s.opts.Log.WithFields(logrus.Fields{"address": ln.Addr().String(), "tls": s.opts.WebConfig.TLS()}).Info("metrics listener serving /metrics")
	if err := s.opts.WebConfig.Serve(s.srv, ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// Shutdown stops the listener gracefully: no new scrapes, and waits for
// those in flight until ctx ends (http.Server.Shutdown).
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// EndKeepAlives closes the idle keep-alive connections and answers the
// requests in flight with "Connection: close": after a hot upgrade, a
// scraper's next request reaches the process that took over.
func (s *Server) EndKeepAlives() { s.srv.SetKeepAlivesEnabled(false) }

// errorLog adapts logrus to promhttp.Logger.
type errorLog struct{ log logrus.FieldLogger }

func (l errorLog) Println(v ...any) { l.log.Warn(append([]any{"metrics: scrape: "}, v...)...) }
