package worker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
)

// probeServer is a worker's HTTP/1.1 server that counts the connections it accepts and
// answers every GET 200 "ok": on the same connection (keep), then closing it without saying
// so (closeAfter), or only the first request of each connection (hang).
type probeServer struct {
	ln       net.Listener
	accepted atomic.Int64
	answered atomic.Int64
	closed   atomic.Int64 // connections the client closed (read EOF while idle)

	closeAfter, hang bool

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startProbeServer(t *testing.T, closeAfter, hang bool) *probeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &probeServer{ln: ln, closeAfter: closeAfter, hang: hang}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *probeServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *probeServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *probeServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for first := true; ; first = false {
		req, err := http.ReadRequest(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				s.closed.Add(1)
			}
			return
		}
		_ = req.Body.Close()
		if s.hang && !first {
			_, _ = io.Copy(io.Discard, br) // until the client gives up and closes
			return
		}
		s.answered.Add(1) // before the answer: the client may count as soon as it reads it
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
		if s.closeAfter {
			return
		}
	}
}

// probeGet probes w's /health as the health checker does.
func probeGet(w *Worker, timeout time.Duration) (int, string, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(w.URL + "/health")
	err := w.Probe(req, resp, timeout)
	return resp.StatusCode(), string(resp.Body()), err
}

func addProbed(t *testing.T, r *Registry, url string) *Worker {
	t.Helper()
	w, err := r.Add(context.Background(), mustSpec(t, url, "m"), StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestProbeKeepsOneConnection: probes of a worker that keeps its connections open go over
// one connection, however many there are.
func TestProbeKeepsOneConnection(t *testing.T) {
	srv := startProbeServer(t, false, false)
	w := addProbed(t, newTestRegistry(t), srv.url())
	for i := range 20 {
		code, body, err := probeGet(w, testutil.Patience)
		if err != nil || code != 200 || body != "ok" {
			t.Fatalf("probe %d: %d %q %v, want 200 \"ok\"", i, code, body, err)
		}
	}
	if got := srv.accepted.Load(); got != 1 {
		t.Fatalf("20 probes dialled %d connections, want 1 kept", got)
	}
}

// TestProbeRedialsAConnectionTheWorkerClosed: a worker that closes each connection after
// its answer (an engine's idle timeout) is still answered at every probe, each on a new
// connection.
func TestProbeRedialsAConnectionTheWorkerClosed(t *testing.T) {
	srv := startProbeServer(t, true, false)
	w := addProbed(t, newTestRegistry(t), srv.url())
	const probes = 10
	for i := range probes {
		if code, _, err := probeGet(w, testutil.Patience); err != nil || code != 200 {
			t.Fatalf("probe %d: %d %v, want 200", i, code, err)
		}
	}
	if got := srv.answered.Load(); got != probes {
		t.Fatalf("the worker answered %d requests, want %d", got, probes)
	}
	if got := srv.accepted.Load(); got != probes {
		t.Fatalf("%d connections for %d probes of a worker that closes each one", got, probes)
	}
}

// TestProbeOfASilentWorkerTimesOutOnce: a worker that stops answering on its kept
// connection fails the probe at its timeout, without a second attempt on a new connection;
// the next probe dials a new one.
func TestProbeOfASilentWorkerTimesOutOnce(t *testing.T) {
	srv := startProbeServer(t, false, true)
	w := addProbed(t, newTestRegistry(t), srv.url())
	if code, _, err := probeGet(w, testutil.Patience); err != nil || code != 200 {
		t.Fatalf("first probe: %d %v, want 200", code, err)
	}
	if _, _, err := probeGet(w, 50*time.Millisecond); !isTimeout(err) {
		t.Fatalf("probe of a worker silent on the kept connection: %v, want a timeout", err)
	}
	if got := srv.accepted.Load(); got != 1 {
		t.Fatalf("a probe that timed out on the kept connection dialled again: %d connections", got)
	}
	if code, _, err := probeGet(w, testutil.Patience); err != nil || code != 200 {
		t.Fatalf("probe after the timeout: %d %v, want 200 on a new connection", code, err)
	}
	if got := srv.accepted.Load(); got != 2 {
		t.Fatalf("%d connections after a timeout and a new probe, want 2", got)
	}
}

// TestRemovedWorkerClosesItsProbeConnection: the registry closes a removed worker's kept
// connection, and a probe that ends after the removal keeps none.
func TestRemovedWorkerClosesItsProbeConnection(t *testing.T) {
	srv := startProbeServer(t, false, false)
	r := newTestRegistry(t)
	w := addProbed(t, r, srv.url())
	if _, _, err := probeGet(w, testutil.Patience); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Remove(context.Background(), w.ID); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the kept connection closed", func() bool { return srv.closed.Load() == 1 })
	if _, _, err := probeGet(w, testutil.Patience); err != nil { // a probe already under way
		t.Fatal(err)
	}
	testutil.Eventually(t, "the late probe's connection closed", func() bool { return srv.closed.Load() == 2 })
	if c := w.probe.take(); c != nil {
		t.Fatal("a removed worker keeps a probe connection")
	}
}

// TestKeptProbeConnectionsTakeNoGoroutine: 100 workers each holding a kept probe connection
// cost the client no goroutine (a HostClient's idle pool runs a cleaner per worker).
func TestKeptProbeConnectionsTakeNoGoroutine(t *testing.T) {
	const n = 100
	srv := startProbeServer(t, false, false)
	cfg := DefaultConfig().WithLogger(testutil.Quiet)
	cfg.Client.Dial = func(string) (net.Conn, error) { return net.Dial("tcp", srv.ln.Addr().String()) }
	r, err := NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	ws := make([]*Worker, n)
	for i := range ws {
		ws[i] = addProbed(t, r, "http://w"+string(rune('a'+i/26))+string(rune('a'+i%26))+":8000")
	}
	if _, _, err := probeGet(ws[0], testutil.Patience); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine() - int(srv.accepted.Load()) // the server's goroutines aside
	for _, w := range ws[1:] {
		if _, _, err := probeGet(w, testutil.Patience); err != nil {
			t.Fatal(err)
		}
	}
	after := runtime.NumGoroutine() - int(srv.accepted.Load())
	if srv.accepted.Load() != n {
		t.Fatalf("%d connections for %d workers, want one each", srv.accepted.Load(), n)
	}
	if after > before+2 { // a runtime or netpoll goroutine may come and go
		t.Fatalf("goroutines (the server's aside) %d → %d after keeping %d probe connections", before, after, n-1)
	}
}

// TestIdleClosedSeesWhatTheWorkerClosed: a kept connection the worker closed is seen closed
// before a request is written on it; one the worker keeps open is not.
func TestIdleClosedSeesWhatTheWorkerClosed(t *testing.T) {
	for _, closing := range []bool{false, true} {
		srv := startProbeServer(t, closing, false)
		w := addProbed(t, newTestRegistry(t), srv.url())
		if _, _, err := probeGet(w, testutil.Patience); err != nil {
			t.Fatal(err)
		}
		c := w.probe.take()
		if c == nil {
			t.Fatalf("closing %v: no connection kept after a probe", closing)
		}
		if !closing {
			if idleClosed(c) {
				t.Fatal("a connection the worker keeps open was seen closed")
			}
			_ = c.Close()
			continue
		}
		testutil.Eventually(t, "the worker's close seen", func() bool { return idleClosed(c) })
	}
}
