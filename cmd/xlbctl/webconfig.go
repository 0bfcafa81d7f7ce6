package main

import (
	"fmt"
	"os"
	"path/filepath"

	yaml "go.yaml.in/yaml/v3"
)

// webConfig is the part of a Prometheus exporter-toolkit web config file
// (admin.web_config_file) xlbctl needs: whether the listener serves TLS,
// and its certificate. Paths in the file are relative to the file's
// directory, as exporter-toolkit reads them.
type webConfig struct {
	TLS *struct {
		CertFile string `yaml:"cert_file"`
		Cert     string `yaml:"cert"` // inline PEM
	} `yaml:"tls_server_config"`
}

// webConfigTLS reads the web config file at path: tls is true when it has
// a tls_server_config, and cert is then the PEM of the listener's
// certificate (cert, or the file cert_file names; nil when the file has
// neither). Errors: the file (or the certificate file) cannot be read, or
// is not YAML.
func webConfigTLS(path string) (tls bool, cert []byte, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, nil, err
	}
	var wc webConfig
	if err := yaml.Unmarshal(data, &wc); err != nil {
		return false, nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case wc.TLS == nil:
		return false, nil, nil
	case wc.TLS.Cert != "":
		return true, []byte(wc.TLS.Cert), nil
	case wc.TLS.CertFile == "":
		return true, nil, nil
	}
	certPath := wc.TLS.CertFile
	if !filepath.IsAbs(certPath) {
		certPath = filepath.Join(filepath.Dir(path), certPath)
	}
	cert, err = os.ReadFile(certPath)
	if err != nil {
		return true, nil, fmt.Errorf("%s: tls_server_config.cert_file: %w", path, err)
	}
	return true, cert, nil
}
