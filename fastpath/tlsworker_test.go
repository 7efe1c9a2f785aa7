package fastpath

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
)

// tlsGateway serves a gateway over one https worker: a net/http TLS engine on loopback
// whose handler is h (TLS 1.3, so session tickets follow the handshake), trusted through
// the gateway's worker TLS configuration.
func tlsGateway(t *testing.T, h http.HandlerFunc) (*gateway, *worker.Worker) {
	srv := httptest.NewUnstartedServer(h)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	g := &gateway{t: t, loopback: true, tls: &tls.Config{RootCAs: roots, ServerName: "example.com", MinVersion: tls.VersionTLS13}}
	addr := srv.Listener.Addr().String()
	var w *worker.Worker
	g.start(Config{Retry: fastRetries()}, policy.RouterConfig{DefaultPolicy: "round_robin"},
		func(string) (net.Conn, error) { return net.Dial("tcp", addr) },
		func() {
			// Before Serve: the event loops read it when they start.
			g.srv.resolveUpstream = func(string) string { return addr }
			w = g.addWorker("https://10.0.3.1:8443", "m1")
		})
	return g, w
}

// TestTLSWorker: a worker behind TLS answers through the gateway (the gateway's requests
// used to be refused by the worker's client as a redirect to another scheme); a client that
// leaves while it has not answered cancels the worker's request at once, on the first
// request of a fresh TLS connection too (whose session tickets a watch below TLS took for
// the answer); and a wait on it is cut when worker/stall finds it unresponsive.
func TestTLSWorker(t *testing.T) {
	t.Run("answers", func(t *testing.T) {
		g, _ := tlsGateway(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			fmt.Fprint(w, `{"choices":[{"message":{"content":"over tls"}}]}`)
		})
		resp := g.do("POST", "/v1/chat/completions", chatBody)
		if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "over tls") {
			t.Fatalf("%d %s", resp.StatusCode(), resp.Body())
		}
	})
	hanging := func(started, cancelled chan<- struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			started <- struct{}{}
			<-r.Context().Done()
			cancelled <- struct{}{}
		}
	}
	t.Run("client leaves", func(t *testing.T) {
		started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
		g, w := tlsGateway(t, hanging(started, cancelled))
		conn := sendChat(t, g.ln.Addr().String())
		<-started
		conn.Close()
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("the worker's request was not cancelled when the client left")
		}
		testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
		if errs := w.Upstream[worker.OutcomeError].Get(); errs != 0 {
			t.Fatalf("%d upstream errors: a client's departure is not the worker's fault", errs)
		}
	})
	t.Run("unresponsive", func(t *testing.T) {
		started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
		g, w := tlsGateway(t, hanging(started, cancelled))
		done := make(chan int, 1)
		go func() { done <- g.do("POST", "/v1/chat/completions", chatBody).StatusCode() }()
		<-started
		w.SetStallState(worker.StallUnresponsive) // as worker/stall does after an unanswered probe
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("the wait on the unresponsive worker was not cut")
		}
		if status := <-done; status < 500 {
			t.Fatalf("status %d with the only worker cut, want a gateway error", status)
		}
		if st := w.Breaker.Stats(breaker.Now()); st.Faults < 1 {
			t.Fatalf("breaker %+v: the cut is a fault", st)
		}
		testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
	})
}

// TestTLSWorkerWhoseTicketsFollowTheHandshake: OpenSSL's server sends its TLS 1.3 session
// tickets after it has read the client's Finished, so they reach the gateway after the
// handshake, on the first request's read (Go's server sends them with its own Finished,
// which hides this). The watch sees the worker's answer, not TLS's own records: a client
// that leaves the first request on a fresh connection to such a worker, which never
// answers (openssl s_server without -www reads and does not answer), still ends it.
func TestTLSWorkerWhoseTicketsFollowTheHandshake(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed")
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if out, err := exec.Command(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
		"-keyout", key, "-out", cert, "-subj", "/CN=example.com", "-addext", "subjectAltName=DNS:example.com", "-days", "1").CombinedOutput(); err != nil {
		t.Fatalf("openssl req: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(openssl, "s_server", "-accept", addr, "-cert", cert, "-key", key, "-tls1_3", "-quiet")
	stdin, err := srv.StdinPipe() // open and silent: s_server sends nothing back
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close() })
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	testutil.Eventually(t, "openssl s_server listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	pem, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	g := &gateway{t: t, loopback: true, tls: &tls.Config{RootCAs: roots, ServerName: "example.com"}}
	g.start(Config{}, policy.RouterConfig{DefaultPolicy: "round_robin"},
		func(string) (net.Conn, error) { return net.Dial("tcp", addr) },
		func() {
			g.srv.resolveUpstream = func(string) string { return addr } // before Serve
			g.addWorker("https://10.0.3.1:8443", "m1")
		})
	conn := sendChat(t, g.ln.Addr().String())
	testutil.Eventually(t, "the request in flight", func() bool { return g.inFlight() == 1 })
	// The worker neither answers nor closes: a second later the client still has nothing
	// (and the session tickets have arrived under the watch).
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := conn.Read(make([]byte, 512)); n > 0 || !os.IsTimeout(err) {
		t.Fatalf("the client got %d bytes (%v) from a worker that never answers", n, err)
	}
	conn.Close()
	testutil.Eventually(t, "in-flight back to 0 after the client left", func() bool { return g.inFlight() == 0 })
}
