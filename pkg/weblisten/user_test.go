package weblisten

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http/httptest"
	"testing"
)

// User is the basic-auth user a guard put on the request, else the
// common name of a verified client certificate, else nothing (issue 28:
// only a request that proved who it is may drain over HTTP).
func TestUser(t *testing.T) {
	r := httptest.NewRequest("POST", "/api/v1/drain", nil)
	if u, ok := User(r); ok {
		t.Errorf("a plain request: User = %q, true; want none", u)
	}
	r.SetBasicAuth("operator", "unchecked")
	if u, ok := User(r); ok {
		t.Errorf("unchecked basic auth: User = %q, true; want none (only a guard's check counts)", u)
	}
	if u, ok := User(WithUser(r, "operator")); !ok || u != "operator" {
		t.Errorf("after WithUser: User = %q, %v", u, ok)
	}
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "ops-robot"}}
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	if u, ok := User(r); ok {
		t.Errorf("an unverified client certificate: User = %q, true; want none", u)
	}
	r.TLS.VerifiedChains = [][]*x509.Certificate{{cert}}
	if u, ok := User(r); !ok || u != "cert:ops-robot" {
		t.Errorf("a verified client certificate: User = %q, %v; want cert:ops-robot", u, ok)
	}
}
