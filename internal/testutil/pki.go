package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a private certificate authority made for one test, and a server certificate it
// signed for the host name "worker.test" and the address 127.0.0.1 (TLS workers).
type PKI struct {
	// CAPEM is the CA's certificate in PEM; Roots holds it.
	CAPEM []byte
	Roots *x509.CertPool
	// Cert is the server certificate with its key; CertPEM and KeyPEM are the same in PEM.
	Cert            tls.Certificate
	CertPEM, KeyPEM []byte
}

// PKIServerName is the host name the PKI's server certificate is valid for.
const PKIServerName = "worker.test"

// NewPKI makes a CA and a server certificate signed by it, valid for a day.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smg test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, caKey := issue(t, caTmpl, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: PKIServerName},
		DNSNames: []string{PKIServerName}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, key := issue(t, tmpl, ca, caKey)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		Roots:   x509.NewCertPool(),
	}
	p.Roots.AddCert(ca)
	if p.Cert, err = tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue makes a P-256 key and the certificate of tmpl for it, signed by parentKey, the key of
// parent, or self-signed when parent is nil.
func issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (der []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	if der, err = x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey); err != nil {
		t.Fatal(err)
	}
	return der, key
}

// Files writes the CA certificate, the server certificate and its key to PEM files in a
// temporary directory and returns their paths.
func (p *PKI) Files(t testing.TB) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for path, b := range map[string][]byte{ca: p.CAPEM, cert: p.CertPEM, key: p.KeyPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca, cert, key
}

// ServerConfig is the TLS configuration of a server presenting the PKI's certificate.
func (p *PKI) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.Cert}}
}

// ClientConfig is the TLS configuration of a client that trusts the PKI's CA only and
// expects PKIServerName.
func (p *PKI) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: p.Roots, ServerName: PKIServerName}
}
