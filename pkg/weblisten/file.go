// Package weblisten secures XLB's HTTP listeners, the admin listener
// (pkg/status) and the metrics listener (pkg/metrics), with a Prometheus
// exporter-toolkit web configuration file, the format node_exporter and
// Prometheus read with --web.config.file: tls_server_config (TLS, client
// certificates), basic_auth_users (bcrypt hashes), http_server_config
// (http2, headers) and rate_limit
// (https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md).
// The config keys admin.web_config_file and metrics.web_config_file name
// the files (issue 16).
//
// As in the exporter toolkit, the file is read again when it changes (the
// users, headers and TLS settings of the next request or handshake follow
// it) and the certificate files at every handshake, so certificates and
// passwords rotate without a reload; only turning TLS on or off takes a
// reload or restart. Unlike the toolkit's own server, a listener may name
// paths that stay open without auth (the admin listener's probes).
package weblisten

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v2"
	"golang.org/x/time/rate"
)

// File is one open web configuration file. A nil *File is a listener
// without one: plain HTTP, no auth.
type File struct {
	path string
	log  logrus.FieldLogger
	// tlsAtOpen is whether the file configured TLS when it was opened:
	// Serve decides HTTPS or HTTP once, at its start.
	tlsAtOpen bool

	mu      sync.Mutex
	cur     *loaded
	lastErr string // the last reload error logged, to log each only once
}

// loaded is one version of the file's contents.
type loaded struct {
	stamp   stamp
	cfg     *web.Config
	tls     *tls.Config   // nil when the file configures no TLS
	limiter *rate.Limiter // nil without rate_limit
}

// stamp identifies a version of the file without reading it.
type stamp struct {
	mtime time.Time
	size  int64
	ino   uint64
}

// Open reads and checks the web configuration file at path as the
// exporter toolkit does (web.Validate: strict YAML, bcrypt hashes,
// loadable certificate and key); "" returns nil, nil (no file). Errors
// name path. log receives reload errors; logrus.StandardLogger() when nil.
func Open(path string, log logrus.FieldLogger) (*File, error) {
	if path == "" {
		return nil, nil
	}
	if log == nil {
		log = logrus.StandardLogger()
	}
	f := &File{path: path, log: log}
	l, err := f.load()
	if err != nil {
		return nil, err
	}
	f.cur, f.tlsAtOpen = l, l.tls != nil
	return f, nil
}

// Path is the file's path; "" for nil.
func (f *File) Path() string {
	if f == nil {
		return ""
	}
	return f.path
}

// TLS says whether the listener serves HTTPS: the file configured
// tls_server_config when it was opened.
func (f *File) TLS() bool { return f != nil && f.tlsAtOpen }

// Users says whether the file, as last read, has basic_auth_users.
func (f *File) Users() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cur.cfg.Users) > 0
}

// Authenticates says whether the file, as last read, makes every client
// prove who it is: basic_auth_users, or TLS with client_auth_type
// RequireAndVerifyClientCert.
func (f *File) Authenticates() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.cur.cfg
	return len(c.Users) > 0 || (f.cur.tls != nil && c.TLSConfig.ClientAuth == "RequireAndVerifyClientCert")
}

// current returns the file's contents, reading it again when its
// modification time, size or inode changed. A file that became unreadable
// or invalid is an error (the caller fails closed), logged once per
// distinct error.
func (f *File) current() (*loaded, error) {
	st, err := stampOf(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && st == f.cur.stamp {
		return f.cur, nil
	}
	l, err := f.load()
	if err != nil {
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			f.log.WithError(err).Error("web config file no longer valid: requests and TLS handshakes fail until it is fixed")
		}
		return nil, err
	}
	if f.lastErr != "" {
		f.log.WithField("file", f.path).Info("web config file valid again")
	}
	f.lastErr = ""
	f.cur = l
	return l, nil
}

// load reads the file once: the toolkit's own validation, then the same
// decoding with the toolkit's defaults (TLS 1.2 to 1.3, HTTP/2 on) and
// relative certificate paths taken from the file's directory.
func (f *File) load() (*loaded, error) {
	st, err := stampOf(f.path)
	if err != nil {
		return nil, fmt.Errorf("web config file %s: %w", f.path, err)
	}
	if err := web.Validate(f.path); err != nil {
		return nil, fmt.Errorf("web config file %s: %w", f.path, err)
	}
	raw, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("web config file %s: %w", f.path, err)
	}
	c := &web.Config{
		TLSConfig:  web.TLSConfig{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13, PreferServerCipherSuites: true},
		HTTPConfig: web.HTTPConfig{HTTP2: true},
	}
	if err := yaml.UnmarshalStrict(raw, c); err != nil {
		return nil, fmt.Errorf("web config file %s: %w", f.path, err)
	}
	c.TLSConfig.SetDirectory(filepath.Dir(f.path))
	l := &loaded{stamp: st, cfg: c}
	if c.TLSConfig.IsEnabled() {
		if l.tls, err = web.ConfigToTLSConfig(&c.TLSConfig); err != nil {
			return nil, fmt.Errorf("web config file %s: tls_server_config: %w", f.path, err)
		}
	}
	if r := c.RateLimiterConfig; r.Interval != 0 {
		l.limiter = rate.NewLimiter(rate.Every(r.Interval), r.Burst)
	}
	return l, nil
}

func stampOf(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	st := stamp{mtime: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}
