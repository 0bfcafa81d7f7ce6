package weblisten

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
)

// Serve serves srv on ln (a listener bound here or inherited from a
// hot-upgrade predecessor alike): HTTPS with the file's
// tls_server_config when it configured TLS at Open, plain HTTP otherwise
// (nil f included). It returns what srv.Serve or srv.ServeTLS returns.
// Each handshake takes the file's TLS settings as last read and loads the
// certificate and key files anew; a file that lost its TLS settings fails
// the handshake until it has them again or the listener is restarted.
// Wrap srv.Handler with Guard for the file's auth, headers and rate limit.
func (f *File) Serve(srv *http.Server, ln net.Listener) error {
	if !f.TLS() {
		return srv.Serve(ln)
	}
	l, err := f.current()
	if err != nil {
		return err
	}
	http2 := l.cfg.HTTPConfig.HTTP2
	if !http2 {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	cfg := l.tls.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		l, err := f.current()
		if err != nil {
			return nil, err
		}
		if l.tls == nil {
			return nil, errors.New("weblisten: the web config file " + f.path + " no longer configures TLS")
		}
		c := l.tls.Clone()
		c.NextProtos = []string{"http/1.1"}
		if http2 && l.cfg.HTTPConfig.HTTP2 {
			c.NextProtos = []string{"h2", "http/1.1"}
		}
		return c, nil
	}
	srv.TLSConfig = cfg
	return srv.ServeTLS(ln, "", "")
}
