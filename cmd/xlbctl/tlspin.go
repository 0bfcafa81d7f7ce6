package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// pinnedTLS is the TLS config for an admin listener whose certificate xlbctl
// read from the listener's own web config file: a server presenting exactly
// that certificate is trusted whatever names it carries (xlbctl reaches it
// on loopback, which a certificate seldom names); any other certificate is
// verified as usual against the system roots and the host name. Errors:
// pemCert holds no certificate.
func pinnedTLS(pemCert []byte) (*tls.Config, error) {
	var pinned [][]byte
	for rest := pemCert; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			pinned = append(pinned, b.Bytes)
		}
	}
	if len(pinned) == 0 {
		return nil, errors.New("the web config's certificate holds no PEM CERTIFICATE")
	}
	return &tls.Config{
		// Verification happens in VerifyConnection, which sees the
		// pinned certificate first.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the admin listener presented no certificate")
			}
			leaf := cs.PeerCertificates[0]
			for _, p := range pinned {
				if bytes.Equal(leaf.Raw, p) {
					return nil
				}
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: cs.ServerName, Intermediates: inter}); err != nil {
				return fmt.Errorf("the admin listener's certificate is not the web config's and does not verify: %w", err)
			}
			return nil
		},
	}, nil
}
