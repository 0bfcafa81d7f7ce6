package weblisten

import (
	"context"
	"net/http"
)

// userKey is the context key of the identity a request proved.
type userKey struct{}

// WithUser returns r carrying user, the basic-auth user a guard checked
// (Guard, or the admin listener's own admin.auth).
func WithUser(r *http.Request, user string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), userKey{}, user))
}

// User returns the identity r proved to the listener: the basic-auth user
// a guard checked (WithUser), or "cert:" and the subject's common name of
// a client certificate the TLS handshake verified (tls_server_config
// client_auth_type VerifyClientCertIfGiven or RequireAndVerifyClientCert).
// ok is false for a request that proved nothing.
func User(r *http.Request) (user string, ok bool) {
	if u, ok := r.Context().Value(userKey{}).(string); ok {
		return u, true
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		return "cert:" + r.TLS.VerifiedChains[0][0].Subject.CommonName, true
	}
	return "", false
}
