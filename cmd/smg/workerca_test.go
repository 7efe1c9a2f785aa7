package main

import (
	"bytes"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// TestWorkerCAFileIsCheckedAtStart: a --worker-ca-file that cannot be read, or holds no PEM
// certificate, stops `smg launch` before it serves (exit 2), with an error that says what
// the file must hold.
func TestWorkerCAFileIsCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "key.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.pem"), "cannot read the CA bundle"},
		{notPEM, "no PEM certificate in it"},
	} {
		var out, errb bytes.Buffer
		code := run([]string{"launch", "--port", "0", "--worker-ca-file", c.path}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "--worker-ca-file") || !strings.Contains(errb.String(), c.want) || !strings.Contains(errb.String(), "CA certificates that signed") {
			t.Errorf("%s: exit %d, stderr %q", c.path, code, errb.String())
		}
	}
}

// TestWorkerCAFileReplacesTheSystemRoots: the bundle's CA verifies a worker certificate it
// signed, and it is the only root: a certificate of another CA is refused.
func TestWorkerCAFileReplacesTheSystemRoots(t *testing.T) {
	pki, other := testutil.NewPKI(t), testutil.NewPKI(t)
	caFile, _, _ := pki.Files(t)
	cfg, err := loadWorkerCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(server *testutil.PKI) error {
		ln, err := net.Listen("tcp", "127.0.0.1:0") // buffered both ways: an alert never blocks
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			s, err := ln.Accept()
			if err != nil {
				return
			}
			defer s.Close()
			_ = tls.Server(s, server.ServerConfig()).Handshake()
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(testutil.Patience))
		client := cfg.Clone()
		client.ServerName = testutil.PKIServerName
		return tls.Client(c, client).Handshake()
	}
	if err := handshake(pki); err != nil {
		t.Fatalf("a worker certificate of the bundle's CA: %v", err)
	}
	if err := handshake(other); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a worker certificate of another CA: %v, want refused", err)
	}
	if cfg, err := loadWorkerCA(""); cfg != nil || err != nil {
		t.Fatalf("no --worker-ca-file: %v %v, want the system roots (nil)", cfg, err)
	}
}
