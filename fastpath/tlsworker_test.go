package fastpath

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/smg-go/smg/internal/clock"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
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
	g := &gateway{t: t, tls: &tls.Config{RootCAs: roots, ServerName: "example.com", MinVersion: tls.VersionTLS13}}
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
		if st := w.Breaker.Stats(clock.Nanos()); st.Faults < 1 {
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
	g := &gateway{t: t, tls: &tls.Config{RootCAs: roots, ServerName: "example.com"}}
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

// tlsListener serves a fake worker over TLS with a certificate of a test PKI: Accept
// wraps each connection in a TLS server and counts it (one per handshake: connections to a
// worker are kept alive); Dial stays plain (the registry's worker client, for probes and the
// admin routes, runs TLS over it). newLegsGateway makes its workers https:// and trusts client.
type tlsListener struct {
	dialListener
	server, client *tls.Config
	accepted       *atomic.Int32
}

func newTLSListener(t testing.TB, pki *testutil.PKI) tlsListener {
	return tlsListener{dialListener: newTestListener(t), server: pki.ServerConfig(), client: pki.ClientConfig(), accepted: new(atomic.Int32)}
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.dialListener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	return tls.Server(c, l.server), nil
}

// newTLSFakeWorker is newFakeWorker behind TLS with pki's certificate; its listener counts
// the connections.
func newTLSFakeWorker(t testing.TB, pki *testutil.PKI, name string, status int) (*fakeWorker, tlsListener) {
	ln := newTLSListener(t, pki)
	return newFakeWorkerOn(t, ln, name, status), ln
}

// newTLSGateway is newGateway over fakes behind TLS (https://10.0.0.<i>:8000), trusting
// roots only (the gateway's --worker-ca-file) for the test PKI's server name.
func newTLSGateway(t testing.TB, cfg Config, roots *x509.CertPool, fakes ...*fakeWorker) *gateway {
	g := &gateway{t: t, fakes: map[string]*fakeWorker{}, tls: &tls.Config{RootCAs: roots, ServerName: testutil.PKIServerName}}
	g.startOnFakes(cfg, "round_robin", "https", fakes)
	return g
}

// TestTLSWorkerConnectionIsKeptAlive: one client's requests to a TLS worker, one after
// another, take one TLS connection: it goes back to its loop's pool after each answer (a
// handshake per request would cost more than the request).
func TestTLSWorkerConnectionIsKeptAlive(t *testing.T) {
	pki := testutil.NewPKI(t)
	fw, ln := newTLSFakeWorker(t, pki, "a", 200)
	g := newTLSGateway(t, Config{}, pki.Roots, fw)
	for i := range 20 {
		if resp := g.do("POST", "/v1/chat/completions", chatBody); resp.StatusCode() != 200 || !bytes.Equal(resp.Body(), okBody) {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode(), resp.Body())
		}
	}
	if n := ln.accepted.Load(); n != 1 {
		t.Fatalf("20 requests one after another opened %d TLS connections to the worker, want 1", n)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestTLSWorkerStreamIsRelayedEventByEvent is TestStreamIsRelayedEventByEvent with the
// worker behind TLS: each event reaches the client before the worker sends the next.
func TestTLSWorkerStreamIsRelayedEventByEvent(t *testing.T) {
	pki := testutil.NewPKI(t)
	fw, _ := newTLSFakeWorker(t, pki, "a", 200)
	g := newTLSGateway(t, Config{}, pki.Roots, fw)
	checkStreamRelayedEventByEvent(t, g, fw)
}

// TestTLSWorkerTakesAStreamedBody: a body past --max-buffered-request-bytes streams to a
// worker behind TLS intact (the loops answered it 502 while TLS workers were bridged to the
// fasthttp handler, which cannot take a body that is already streaming); its tail is not
// JSON, so the gateway never parsed it.
func TestTLSWorkerTakesAStreamedBody(t *testing.T) {
	pki := testutil.NewPKI(t)
	fw, _ := newTLSFakeWorker(t, pki, "a", 200)
	fw.bodies = make(chan []byte, 4)
	g := newTLSGateway(t, Config{MaxBufferedBody: 4096}, pki.Roots, fw)
	body := bigChat(1<<20) + "not json"
	resp := g.do("POST", "/v1/chat/completions", body)
	if resp.StatusCode() != 200 || !bytes.Equal(resp.Body(), okBody) {
		t.Fatalf("streamed to a TLS worker: %d %s", resp.StatusCode(), resp.Body())
	}
	if got := <-fw.bodies; string(got) != body {
		t.Fatalf("the worker got %d bytes, want the %d sent, unchanged", len(got), len(body))
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestTLSWorkerWithAnUntrustedCertificate: a worker whose certificate the gateway's roots do
// not verify fails its handshake; the request is retried on a trusted worker, and with no
// other worker the error names the handshake and the certificate.
func TestTLSWorkerWithAnUntrustedCertificate(t *testing.T) {
	pki, other := testutil.NewPKI(t), testutil.NewPKI(t)
	untrusted, _ := newTLSFakeWorker(t, other, "untrusted", 200)
	trusted, _ := newTLSFakeWorker(t, pki, "trusted", 200)
	g := newTLSGateway(t, Config{Retry: fastRetries()}, pki.Roots, untrusted, trusted)
	for i := range 4 { // round robin: two of them meet the untrusted worker first
		if resp := g.do("POST", "/v1/chat/completions", chatBody); resp.StatusCode() != 200 || string(resp.Header.Peek(headerRoutedWorker)) != "https://10.0.0.2:8000" {
			t.Fatalf("request %d: %d from %q: %s", i, resp.StatusCode(), resp.Header.Peek(headerRoutedWorker), resp.Body())
		}
	}
	g = newTLSGateway(t, Config{}, pki.Roots, untrusted)
	resp := g.do("POST", "/v1/chat/completions", chatBody)
	if body := string(resp.Body()); resp.StatusCode() != 502 || !strings.Contains(body, "TLS handshake") || !strings.Contains(body, "certificate") {
		t.Fatalf("untrusted worker alone: %d %s", resp.StatusCode(), body)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestTLSPDLegs: SGLang PD with both legs behind TLS, held and streamed: the decode answer
// comes back, both legs got the bootstrap room.
func TestTLSPDLegs(t *testing.T) {
	pki := testutil.NewPKI(t)
	p := newPDFakeOn(t, newTLSListener(t, pki), answerJSON(`{}`))
	d := newPDFakeOn(t, newTLSListener(t, pki), func(body map[string]any, ctx *fasthttp.RequestCtx) {
		if body["stream"] == true {
			ctx.SetContentType("text/event-stream")
			ctx.SetBodyString("data: {\"choices\":[{\"delta\":{\"content\":\"from decode\"}}]}\n\ndata: [DONE]\n\n")
			return
		}
		answerJSON(decodeAnswer)(body, ctx)
	})
	g := newPDGateway(t, []*pdFake{p}, []*pdFake{d}, map[string]string{worker.LabelBootstrapPort: "9001"})
	for _, stream := range []string{"false", "true"} {
		resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"x"}],"stream":`+stream+`}`)
		if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") {
			t.Fatalf("stream %s: %d %s", stream, resp.StatusCode(), resp.Body())
		}
	}
	// The legs run at once: the answer can be back before the prefill leg has been answered,
	// or has reached its fake; once nothing is in flight both have.
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
	pb, db := p.received(), d.received()
	if len(pb) != 2 || len(db) != 2 || pb[1]["bootstrap_room"] == nil || pb[1]["bootstrap_room"] != db[1]["bootstrap_room"] {
		t.Fatalf("prefill %v, decode %v: both legs want the same room", pb, db)
	}
}

// TestTLSEPDLegs: EPD with its three legs behind TLS: the encode leg's handshake reaches the
// PD legs and the decode answer comes back.
func TestTLSEPDLegs(t *testing.T) {
	pki := testutil.NewPKI(t)
	e := newPDFakeOn(t, newTLSListener(t, pki), answerJSON(`{"encoded":true}`))
	p := newPDFakeOn(t, newTLSListener(t, pki), answerJSON(`{"prefill":1}`))
	d := newPDFakeOn(t, newTLSListener(t, pki), answerJSON(decodeAnswer))
	g := newEPDGateway(t, []*pdFake{e}, []*pdFake{p}, []*pdFake{d}, map[string]string{worker.LabelBootstrapPort: "9001"})
	resp := g.do("POST", "/v1/chat/completions", epdImageChat)
	if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") || string(resp.Header.Peek(headerEncodeWorker)) != "https://10.0.3.1:8000" {
		t.Fatalf("got %d (encode worker %q) %s", resp.StatusCode(), resp.Header.Peek(headerEncodeWorker), resp.Body())
	}
	eb, pb := e.received(), p.received()
	if len(eb) != 1 || len(pb) != 1 || pb[0]["encode_bootstrap_room"] != eb[0]["bootstrap_room"] {
		t.Fatalf("encode %v, prefill %v: the PD legs want the encode leg's room", eb, pb)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestTLSHandshakeCancelledWhenTheClientLeaves: a worker that accepts connections and never
// answers the TLS handshake holds its request in the handshake; the client that leaves then
// ends it at once, and the handshake's connection is closed (the handshake runs on a
// goroutine of its own: closing the worker connection on the loop cancels it).
func TestTLSHandshakeCancelledWhenTheClientLeaves(t *testing.T) {
	silent := newTestListener(t)
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	pki := testutil.NewPKI(t)
	g := &gateway{t: t, fakes: map[string]*fakeWorker{}, tls: pki.ClientConfig()}
	g.start(Config{}, policy.RouterConfig{DefaultPolicy: "round_robin"},
		func(string) (net.Conn, error) { return silent.Dial() },
		func() {
			g.srv.resolveUpstream = func(string) string { return silent.Addr().String() } // before Serve
			g.addWorker("https://10.0.0.1:8000", "m1")
		})
	conn := sendChat(t, g.serveTCP())
	var worker net.Conn
	select {
	case worker = <-accepted:
		defer worker.Close()
	case <-time.After(testutil.Patience):
		t.Fatal("the gateway never connected to the worker")
	}
	testutil.Eventually(t, "the request in flight", func() bool { return g.inFlight() == 1 })
	conn.Close()
	testutil.Eventually(t, "in-flight back to 0 after the client left", func() bool { return g.inFlight() == 0 })
	_ = worker.SetReadDeadline(time.Now().Add(testutil.Patience))
	if _, err := io.Copy(io.Discard, worker); err != nil { // the ClientHello, then the end
		t.Fatalf("the handshake's connection was not closed: %v", err)
	}
}

// TestTLS12Worker: a worker that speaks TLS 1.2 only (explicit nonces, no post-handshake
// tickets) is served like a TLS 1.3 one, held (one after another on one kept-alive
// connection) and streamed.
func TestTLS12Worker(t *testing.T) {
	pki := testutil.NewPKI(t)
	ln := newTLSListener(t, pki)
	ln.server.MaxVersion = tls.VersionTLS12
	fw := newFakeWorkerOn(t, ln, "a", 200)
	g := newTLSGateway(t, Config{}, pki.Roots, fw)
	for i := range 3 {
		if resp := g.do("POST", "/v1/chat/completions", chatBody); resp.StatusCode() != 200 || !bytes.Equal(resp.Body(), okBody) {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode(), resp.Body())
		}
	}
	if n := ln.accepted.Load(); n != 1 {
		t.Fatalf("%d TLS connections for requests one after another, want 1", n)
	}
	conn, br := openStream(t, g) // a new client connection: maybe another loop, its own pool
	defer conn.Close()
	fw.events <- `{"n":1}`
	if got := readEvent(t, br); got != "data: {\"n\":1}\n\n" {
		t.Fatalf("event %q", got)
	}
	close(fw.events)
	if got := readEvent(t, br); got != "data: [DONE]\n\n" {
		t.Fatalf("last event %q", got)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestTLSWorkerLargeRecords: answers whose TLS records are larger than what crypto/tls asks
// of the loop at once (it reads a record into a buffer it grows by 512 bytes past the
// header) come back whole, held and streamed, one after another on one connection: the loop
// hands a record over in several reads and keeps its place between them (it lost the record
// boundaries and stalled the next answer on the connection before).
func TestTLSWorkerLargeRecords(t *testing.T) {
	big := strings.Repeat("x", 12<<10)
	g, _ := tlsGateway(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			fmt.Fprintf(w, `{"choices":[{"message":{"content":%q}}]}`, big)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"n\":%d,\"content\":%q}\n\n", i, big[:3000])
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	for i := range 4 {
		resp := g.do("POST", "/v1/chat/completions", chatBody)
		if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), big) {
			t.Fatalf("held answer %d: %d, %d bytes", i, resp.StatusCode(), len(resp.Body()))
		}
		resp = g.do("POST", "/v1/chat/completions", `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
		if body := string(resp.Body()); resp.StatusCode() != 200 || strings.Count(body, big[:3000]) != 3 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
			t.Fatalf("streamed answer %d: %d, %d bytes", i, resp.StatusCode(), len(body))
		}
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}
