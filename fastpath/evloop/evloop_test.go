package evloop

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// proxy is a minimal handler: /stream answers are relayed, everything else is held and
// delivered; a failed attempt answers 502.
type proxy struct {
	addr     string
	target   Target
	deadline time.Duration // per attempt; default 5 s
	done     atomic.Int64
	gone     atomic.Int64
	fails    atomic.Int64
}

func (p *proxy) Serve(x *Exchange) {
	d := p.deadline
	if d == 0 {
		d = 5 * time.Second
	}
	x.Forward(p, &p.target, x.Now().Add(d))
}

func (p *proxy) Reject(x *Exchange, status int, reason string) {
	x.Respond(status, "text/plain", []byte(reason))
}

func (p *proxy) UpstreamHead(x *Exchange, status int) bool {
	x.AddHeader("X-Proxied-By", []byte("evloop"))
	return strings.HasPrefix(string(x.Req().Path()), "/stream") && status == 200
}

func (p *proxy) UpstreamDone(x *Exchange, err error) {
	switch {
	case err == ErrClientGone:
		p.gone.Add(1)
	case err != nil:
		p.fails.Add(1)
		if !x.Relayed() {
			x.Respond(502, "text/plain", []byte(err.Error()))
		}
	default:
		p.done.Add(1)
		if !x.Relayed() {
			x.DeliverHeld()
		}
	}
}

func (p *proxy) Wake(*Exchange) {}

func startUpstream(t testing.TB, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func startProxy(t testing.TB, p *proxy, tweak func(*Config)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.target = Target{Addr: p.addr, RequestID: []byte("rid-1")}
	cfg := DefaultConfig()
	cfg.Handler, cfg.MaxBodySize, cfg.Loops, cfg.StreamFailureTail = p, 1<<20, 2, []byte("data: broken\n\n")
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s, ln)
	return ln.Addr().String()
}

// serve runs s on ln until the test ends, then shuts it down and checks that both ended
// cleanly. Not with t.Context(): it is cancelled before cleanups run, and the loops would
// outlive the test.
func serve(t testing.TB, s *Server, ln net.Listener) {
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		_ = ln.Close()
	})
}

func TestProxyHeldRoundTrips(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen-Request-Id", r.Header.Get("X-Request-Id"))
		w.Header().Set("X-Seen-Host", r.Host)
		fmt.Fprintf(w, "echo:%s", b)
	}))
	p := &proxy{addr: up}
	addr := startProxy(t, p, nil)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for i := range 20 {
		resp, err := client.Post("http://"+addr+"/v1/x?q=1", "application/json", strings.NewReader(fmt.Sprint("body", i)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != fmt.Sprint("echo:body", i) {
			t.Fatalf("got %d %q", resp.StatusCode, b)
		}
		if resp.Header.Get("X-Seen-Request-Id") != "rid-1" || resp.Header.Get("X-Proxied-By") != "evloop" || resp.Header.Get("X-Seen-Host") != up {
			t.Fatalf("headers %v", resp.Header)
		}
	}
	if p.done.Load() != 20 {
		t.Fatalf("done %d", p.done.Load())
	}
}

func TestProxyRelaysEventsAsTheyArrive(t *testing.T) {
	next := make(chan string)
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for ev := range next {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			w.(http.Flusher).Flush()
		}
	}))
	p := &proxy{addr: up}
	addr := startProxy(t, p, nil)
	resp, err := http.Post("http://"+addr+"/stream", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" || len(resp.TransferEncoding) == 0 {
		t.Fatalf("head %v %v", resp.Header, resp.TransferEncoding)
	}
	br := bufio.NewReader(resp.Body)
	for i := range 5 {
		ev := fmt.Sprint("event-", i)
		next <- ev // the event must reach the client before the next one is produced
		line, err := br.ReadString('\n')
		if err != nil || line != "data: "+ev+"\n" {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		_, _ = br.ReadString('\n')
	}
	close(next)
	rest, err := io.ReadAll(br)
	if err != nil || len(rest) != 0 {
		t.Fatalf("tail %q %v", rest, err)
	}
	testutil.Eventually(t, "the exchange done", func() bool { return p.done.Load() == 1 })
}

func TestClientHangUpCancelsTheWorkerRequest(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		cancelled <- struct{}{}
	}))
	p := &proxy{addr: up}
	addr := startProxy(t, p, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("%q %v", line, err)
	}
	_ = c.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker's request was not cancelled")
	}
	testutil.Eventually(t, "the exchange gone", func() bool { return p.gone.Load() == 1 })
}

func TestWorkerFailureMidStreamEndsWithTail(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		fmt.Fprint(w, "data: one\n\ndata: par")
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
	}))
	p := &proxy{addr: up}
	addr := startProxy(t, p, nil)
	resp, err := http.Post("http://"+addr+"/stream", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "data: one\n\ndata: par\n\ndata: broken\n\n" {
		t.Fatalf("%q %v", b, err)
	}
	testutil.Eventually(t, "one failed attempt", func() bool { return p.fails.Load() == 1 })
}

// TestSlowClientBoundsBuffering: a client that stops reading makes the proxy stop reading the
// worker, so the worker's writes block instead of the proxy buffering the stream.
func TestSlowClientBoundsBuffering(t *testing.T) {
	var written atomic.Int64
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		chunk := []byte(strings.Repeat("x", 16<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			written.Add(int64(len(chunk)))
		}
	}))
	p := &proxy{addr: up}
	addr := startProxy(t, p, func(c *Config) { c.OutputLimit = 64 << 10 })
	c := dialClosed(t, addr)
	_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
	fmt.Fprintf(c, "POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	// An unbounded proxy takes everything the worker writes (gigabytes a second on
	// loopback); a bounded one stalls the worker at its output limit plus the socket buffers
	// on both sides (a few MiB with Linux's autotuning).
	var last int64 = -1
	for i := 0; i < 100; i++ {
		time.Sleep(40 * time.Millisecond)
		n := written.Load()
		if n == last && n > 0 {
			break
		}
		last = n
	}
	if n := written.Load(); n > 32<<20 {
		t.Fatalf("the worker wrote %d bytes to a client that reads nothing", n)
	}
}

// TestDeadlineOnAPooledConnection: a worker that answers once on a keep-alive connection and
// then never again has its second request cut at the attempt's deadline (a pooled
// connection's failure is not resent silently, with no deadline left).
func TestDeadlineOnAPooledConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if i == 0 {
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			} // later requests: read, never answered
		}
	}()
	p := &proxy{addr: ln.Addr().String(), deadline: 200 * time.Millisecond}
	addr := startProxy(t, p, func(c *Config) { c.Loops = 1 })
	client := &http.Client{Timeout: 20 * time.Second}
	for i, want := range []int{200, 502} {
		resp, err := client.Post("http://"+addr+"/x", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if p.fails.Load() != 1 {
		t.Fatalf("%d failed attempts, want 1", p.fails.Load())
	}
}

// TestRefusalLingersWhileTheClientSends: a request refused while its client is still sending
// (a body past MaxBodySize) gets its 413, not a reset: the connection is half-closed and its
// input drained before it closes.
func TestRefusalLingersWhileTheClientSends(t *testing.T) {
	p := &proxy{addr: "127.0.0.1:1"}
	addr := startProxy(t, p, nil)
	for i := range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		body := strings.Repeat("b", 6<<20)
		sent := make(chan error, 1)
		go func() {
			_, err := fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			sent <- err
		}()
		if err := <-sent; err != nil {
			t.Fatalf("round %d: sending the body: %v (the gateway reset the connection)", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if resp.StatusCode != 413 {
			t.Fatalf("round %d: status %d, want 413", i, resp.StatusCode)
		}
		_ = c.Close()
	}
}

// TestIdleTimeoutAfterKeepAliveTraffic: requests on one keep-alive connection keep re-arming
// its idle timer later than the deadline the loop parked with (which the loop keeps, waking
// early and parking again: setParkDeadline); once the traffic stops, the idle timer still
// closes the connection, and never during the traffic.
func TestIdleTimeoutAfterKeepAliveTraffic(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	const idle = 300 * time.Millisecond
	addr := startProxy(t, &proxy{addr: up}, func(c *Config) { c.Loops, c.IdleTimeout = 1, idle })
	c := dialClosed(t, addr)
	br := bufio.NewReader(c)
	for i := range 12 { // about 2 idle periods of traffic, one request per sixth of one
		fmt.Fprint(c, "POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on the kept-alive connection: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		time.Sleep(idle / 6)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * idle))
	if n, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, %v; want the server to close it (EOF)", n, err)
	}
}

// TestConfigZeroIsRefused: no zero setting means "the default": DefaultConfig with
// a handler and a body bound is valid, and a zeroed setting is refused naming where to start.
func TestConfigZeroIsRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Handler, cfg.MaxBodySize = &proxy{}, 1<<20
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	for name, zero := range map[string]func(*Config){
		"Loops": func(c *Config) { c.Loops = 0 }, "OutputLimit": func(c *Config) { c.OutputLimit = 0 },
		"ReadTimeout": func(c *Config) { c.ReadTimeout = 0 }, "WatchInterval": func(c *Config) { c.WatchInterval = 0 },
	} {
		c := cfg
		zero(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "DefaultConfig") {
			t.Errorf("zero %s: %v, want a refusal naming DefaultConfig", name, err)
		}
		if _, err := New(c); err == nil {
			t.Errorf("New accepted a zero %s", name)
		}
	}
}

// dialClosed connects to the proxy at addr, the connection closed when the test ends.
func dialClosed(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
