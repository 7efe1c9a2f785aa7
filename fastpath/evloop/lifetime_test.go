package evloop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smg-go/smg/internal/testutil"
)

// addrProxy forwards each request to the address its X-Addr header names.
type addrProxy struct{ proxy }

func (p *addrProxy) Serve(x *Exchange) {
	t := Target{Addr: string(x.Req().Header("x-addr"))}
	x.Forward(p, &t, time.Now().Add(5*time.Second))
}

// get sends GET / to the server at gw for the worker at addr and returns status and body.
func get(t *testing.T, gw, addr string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+gw+"/", nil)
	req.Header.Set("X-Addr", addr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// listenPair listens on 127.0.0.1 and 127.0.0.2 at the same port (the port of the first,
// taken again until the second address has it free too).
func listenPair(t *testing.T) (net.Listener, net.Listener) {
	for range 20 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", a.Addr().(*net.TCPAddr).Port))
		if err == nil {
			return a, b
		}
		a.Close()
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return nil, nil
}

func serveName(t *testing.T, ln net.Listener, name string) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, name) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// TestWorkerHostNamesAreResolvedOffTheLoopWithATTL: a lookup that hangs does not stall the
// loop (another worker is served meanwhile, on the one loop); a failed lookup is retried
// (the name that failed once becomes reachable); and once the TTL passes the address is
// looked up again, so a worker whose IP changed is followed.
func TestWorkerHostNamesAreResolvedOffTheLoopWithATTL(t *testing.T) {
	one, two := listenPair(t)
	serveName(t, one, "one")
	serveName(t, two, "two")
	port := one.Addr().(*net.TCPAddr).Port
	var mu sync.Mutex
	answer := map[string]string{"flaky.test": "fail", "moving.test": "127.0.0.1"}
	hang := make(chan struct{})
	var lookups atomic.Int64
	lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		if host == "slow.test" {
			select {
			case <-hang:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		mu.Lock()
		a := answer[host]
		mu.Unlock()
		if a == "fail" {
			return nil, errors.New("lookup " + host + ": server misbehaving")
		}
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	p := &addrProxy{}
	gw := startProxy(t, &p.proxy, func(c *Config) {
		c.Handler, c.Loops, c.LookupHost, c.DNSTTL = p, 1, lookup, 50*time.Millisecond
	})

	slow := make(chan string, 1)
	go func() { _, body := get(t, gw, fmt.Sprintf("slow.test:%d", port)); slow <- body }()
	testutil.Eventually(t, "the slow lookup started", func() bool { return lookups.Load() >= 1 })
	if status, body := get(t, gw, one.Addr().String()); status != 200 || body != "one" {
		t.Fatalf("while a lookup hangs, the loop's other worker: %d %q", status, body)
	}
	close(hang)
	if body := <-slow; body != "one" {
		t.Fatalf("the request that waited for its lookup: %q", body)
	}

	flaky := fmt.Sprintf("flaky.test:%d", port)
	if status, body := get(t, gw, flaky); status != 502 || !strings.Contains(body, "misbehaving") {
		t.Fatalf("a failing lookup: %d %q", status, body)
	}
	mu.Lock()
	answer["flaky.test"] = "127.0.0.2"
	mu.Unlock()
	testutil.Eventually(t, "the failed name retried and served", func() bool {
		status, body := get(t, gw, flaky)
		return status == 200 && body == "two"
	})

	moving := fmt.Sprintf("moving.test:%d", port)
	if _, body := get(t, gw, moving); body != "one" {
		t.Fatalf("moving.test first: %q", body)
	}
	mu.Lock()
	answer["moving.test"] = "127.0.0.2"
	mu.Unlock()
	// Pooled connections to the old address serve until they close; new ones go to the new.
	testutil.Eventually(t, "the new address followed", func() bool {
		http.DefaultClient.CloseIdleConnections()
		_, body := get(t, gw, moving)
		return body == "two"
	})
}

// TestPoolsOfGoneWorkersAreDropped: a worker's pool (and its shared connection counter) goes
// once nothing asked for it during UpstreamIdleTimeout and its connections closed.
func TestPoolsOfGoneWorkersAreDropped(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	p := &addrProxy{}
	var srv *Server
	gw := startProxyServer(t, &srv, func(c *Config) {
		c.Handler, c.Loops, c.UpstreamIdleTimeout = p, 1, 100*time.Millisecond
	})
	if status, _ := get(t, gw, up); status != 200 {
		t.Fatalf("status %d", status)
	}
	counters := func() int {
		srv.upstreamMu.Lock()
		defer srv.upstreamMu.Unlock()
		return len(srv.upstreamConns)
	}
	if counters() != 1 {
		t.Fatalf("%d counters after one worker", counters())
	}
	testutil.Eventually(t, "the gone worker's pool dropped", func() bool { return counters() == 0 })
	if status, _ := get(t, gw, up); status != 200 { // and made again when asked for
		t.Fatalf("status %d after the sweep", status)
	}
}

// TestConnectionDealtToAStoppedLoopIsClosed: an adoption that a stopped loop never runs
// closes its descriptor and gives its place in the connection count back.
func TestConnectionDealtToAStoppedLoopIsClosed(t *testing.T) {
	s := &Server{}
	l := &loop{s: s, dead: true}
	s.conns.Add(1)
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	l.post(adoption{l: l, fd: fds[0]})
	if n := s.conns.Load(); n != 0 {
		t.Fatalf("connection count %d after the discarded adoption, want 0", n)
	}
	if _, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GETFD, 0); err != unix.EBADF {
		t.Fatalf("the discarded adoption's descriptor is still open (fcntl: %v)", err)
	}
}

// TestBodyBudgetReturnedWhenTheRequestEnds: the share of the body budget a large request
// took is returned when its exchange ends, while its keep-alive connection stays open.
func TestBodyBudgetReturnedWhenTheRequestEnds(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	}))
	var used atomic.Int64
	var srv *Server
	gw := startProxyServer(t, &srv, func(c *Config) {
		c.Handler = &proxy{target: Target{Addr: up}}
		c.Reserve = func(n int) bool { used.Add(int64(n)); return true }
		c.Release = func(n int) { used.Add(-int64(n)) }
	})
	c, err := net.Dial("tcp", gw)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := strings.Repeat("b", 300<<10)
	fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != fmt.Sprint(len(body)) {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	testutil.Eventually(t, "the body budget returned with the connection open", func() bool { return used.Load() == 0 })
	if srv.OpenConnections() != 1 {
		t.Fatalf("%d connections open, want the keep-alive one", srv.OpenConnections())
	}
}

// startProxyServer is startProxy that also hands back the server.
func startProxyServer(t *testing.T, srv **Server, tweak func(*Config)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.MaxBodySize, cfg.Loops = 1<<20, 2
	tweak(&cfg)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	*srv = s
	serve(t, s, ln)
	return ln.Addr().String()
}
