package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// loadWorkerCA reads --worker-ca-file into the TLS configuration of the connections to
// https workers. The bundle replaces the system's roots rather than adding to them: a fleet
// with its own CA should not also trust every public CA for its workers (nginx's
// proxy_ssl_trusted_certificate and curl's --cacert behave the same way); to trust both,
// concatenate the system bundle (/etc/ssl/certs/ca-certificates.crt on Debian) into the file.
// An empty path keeps the system's roots (nil).
func loadWorkerCA(path string) (*tls.Config, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--worker-ca-file: cannot read the CA bundle: %w; give a readable PEM file of the CA certificates that signed the workers' certificates", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--worker-ca-file %s: no PEM certificate in it; give the CA certificates that signed the workers' certificates, each between -----BEGIN CERTIFICATE----- and -----END CERTIFICATE-----", path)
	}
	return &tls.Config{RootCAs: roots}, nil
}
