// Package webtest makes what tests of XLB's secured listeners (issue 16)
// need: a throwaway certificate authority with server and client
// certificates as PEM files, and bcrypt hashes for web config files'
// basic_auth_users. Tests only; nothing here is fit to secure a real
// listener (the hashes use bcrypt's lowest cost).
package webtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// PKI is a CA and the certificates it issued, as PEM file paths.
type PKI struct {
	// CA is the CA certificate (curl --cacert).
	CA string
	// Cert and Key are the server's, valid for 127.0.0.1.
	Cert, Key string
	// ClientCert and ClientKey are a client's (TLS client auth).
	ClientCert, ClientKey string
}

// NewPKI creates a CA named name in dir (files name-*.pem), valid for a
// day, and issues a server certificate for 127.0.0.1 and a client
// certificate; it fails t on any error.
func NewPKI(t testing.TB, dir, name string) PKI {
	t.Helper()
	caTmpl := template(1, name+" CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid, caTmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	ca, caKey := create(t, caTmpl, nil, nil)
	p := PKI{CA: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, p.CA, "CERTIFICATE", ca.Raw)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) (cert, key string) {
		tmpl := template(serial, cn)
		tmpl.KeyUsage, tmpl.ExtKeyUsage, tmpl.IPAddresses = x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{usage}, ips
		c, k := create(t, tmpl, ca, caKey)
		kd, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		cert, key = filepath.Join(dir, name+"-"+cn+".pem"), filepath.Join(dir, name+"-"+cn+"-key.pem")
		writePEM(t, cert, "CERTIFICATE", c.Raw)
		writePEM(t, key, "EC PRIVATE KEY", kd)
		return cert, key
	}
	p.Cert, p.Key = issue(2, "server", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.ClientCert, p.ClientKey = issue(3, "client", x509.ExtKeyUsageClientAuth, nil)
	return p
}

// create makes a new P-256 key and a certificate for it from tmpl,
// signed by parent and parentKey, or self-signed when parent is nil.
func create(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, k
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// TLSServerConfig is the web config file's tls_server_config section for
// p's server certificate (a YAML fragment ending in a newline).
func (p PKI) TLSServerConfig() string {
	return "tls_server_config:\n  cert_file: " + p.Cert + "\n  key_file: " + p.Key + "\n"
}

// Hash is password's bcrypt hash at bcrypt.MinCost.
func Hash(t testing.TB, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// UsersFile writes a web config file holding only basic_auth_users
// (user: password pairs, hashed with Hash) into a new temporary directory
// and returns its path.
func UsersFile(t testing.TB, userPass ...string) string {
	t.Helper()
	body := "basic_auth_users:\n"
	for i := 0; i+1 < len(userPass); i += 2 {
		body += "  " + userPass[i] + ": " + Hash(t, userPass[i+1]) + "\n"
	}
	path := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func template(serial int64, cn string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
	}
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
