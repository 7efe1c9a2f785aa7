package evloop

import (
	"bufio"
	"errors"
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

// callProxy forwards every request to main and, beside it, calls side with a body of its own.
// By path:
//   - /wait: the answer waits for the call (Await) and carries the call's status and body in
//     headers;
//   - /call: the answer is the call's (DeliverCall), once the main answer is in;
//   - /nowait: the main answer is delivered at once and the call released (cancelled if it
//     still runs);
//   - /alone: the main answer is delivered at once and the call finishes alone.
type callProxy struct {
	main, side string
	call       *Call // the call of the running request (one client at a time)
	mainDone   bool
	calls      atomic.Int64 // CallDone calls
	callErrs   atomic.Int64 // CallDone calls with an error
	gone       atomic.Int64 // UpstreamDone(ErrClientGone)
}

func (p *callProxy) Serve(x *Exchange) {
	p.mainDone = false
	p.call = x.Call(p, &Target{Addr: p.side, Body: []byte("side:" + string(x.Req().Body()))}, time.Now().Add(5*time.Second))
	x.Forward(p, &Target{Addr: p.main}, time.Now().Add(5*time.Second))
}

func (p *callProxy) Reject(x *Exchange, status int, reason string) {
	x.Respond(status, "text/plain", []byte(reason))
}

func (p *callProxy) UpstreamHead(*Exchange, int) bool { return false }

func (p *callProxy) UpstreamDone(x *Exchange, err error) {
	if err == ErrClientGone {
		p.gone.Add(1)
		if p.call != nil {
			p.call.Release()
			p.call = nil
		}
		return
	}
	if err != nil {
		x.Respond(502, "text/plain", []byte(err.Error()))
		return
	}
	p.mainDone = true
	switch string(x.Req().Path()) {
	case "/nowait":
		p.call.Release()
		p.call = nil
		x.DeliverHeld()
	case "/alone":
		p.call = nil
		x.DeliverHeld()
	default:
		if p.call.phase == callDone {
			p.answer(x)
			return
		}
		x.Await(p)
	}
}

func (p *callProxy) Wake(*Exchange) {}

// CallDone answers the awaiting exchange, or releases a call nobody waits for.
func (p *callProxy) CallDone(c *Call, err error) {
	p.calls.Add(1)
	if err != nil {
		p.callErrs.Add(1)
	}
	if c != p.call { // finished alone
		c.Release()
		return
	}
	x := c.x
	if p.mainDone && x.phase == phaseAwaiting {
		x.Resume()
		p.answer(x)
	}
}

func (p *callProxy) answer(x *Exchange) {
	c := p.call
	p.call = nil
	if string(x.Req().Path()) == "/call" {
		x.DeliverCall(c)
	} else {
		x.AddHeader("X-Call-Status", []byte(fmt.Sprint(c.Status())))
		x.AddHeader("X-Call-Body", c.Body())
		x.DeliverHeld()
	}
	c.Release()
}

func startCallProxy(t *testing.T, p *callProxy) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Handler, cfg.MaxBodySize, cfg.Loops = p, 1<<20, 1
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s, ln)
	return ln.Addr().String()
}

func echoUpstream(t *testing.T, name string, delay time.Duration) string {
	return startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		time.Sleep(delay)
		w.Header().Set("X-From", name)
		w.WriteHeader(201)
		fmt.Fprintf(w, "%s got %s", name, b)
	}))
}

func post(t *testing.T, addr, path, body string) *http.Response {
	resp, err := http.Post("http://"+addr+path, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readBody(t *testing.T, resp *http.Response) string {
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCallBesideForwardIsAwaited: the call goes out with its own body beside the forward, and
// an exchange that awaits it answers once it ended, however the two finish in time.
func TestCallBesideForwardIsAwaited(t *testing.T) {
	for _, slow := range []string{"side", "main"} {
		t.Run(slow+" slower", func(t *testing.T) {
			var mainDelay, sideDelay time.Duration
			if slow == "side" {
				sideDelay = 100 * time.Millisecond
			} else {
				mainDelay = 100 * time.Millisecond
			}
			p := &callProxy{main: echoUpstream(t, "main", mainDelay), side: echoUpstream(t, "side", sideDelay)}
			addr := startCallProxy(t, p)
			for i := range 3 {
				resp := post(t, addr, "/wait", fmt.Sprint("b", i))
				body := readBody(t, resp)
				if resp.StatusCode != 201 || body != fmt.Sprint("main got b", i) || resp.Header.Get("X-Call-Status") != "201" ||
					resp.Header.Get("X-Call-Body") != fmt.Sprint("side got side:b", i) {
					t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
				}
			}
			if p.calls.Load() != 3 || p.callErrs.Load() != 0 {
				t.Fatalf("%d calls ended, %d with an error; want 3, 0", p.calls.Load(), p.callErrs.Load())
			}
		})
	}
}

// TestDeliverCallAnswersWithTheCallsAnswer: status, the worker's headers and body of the call.
func TestDeliverCallAnswersWithTheCallsAnswer(t *testing.T) {
	p := &callProxy{main: echoUpstream(t, "main", 0), side: echoUpstream(t, "side", 20*time.Millisecond)}
	addr := startCallProxy(t, p)
	resp := post(t, addr, "/call", "x")
	if body := readBody(t, resp); resp.StatusCode != 201 || body != "side got side:x" || resp.Header.Get("X-From") != "side" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
}

// blockingUpstream answers nothing until its request is cancelled, which it reports.
func blockingUpstream(t *testing.T, cancelled chan<- struct{}) string {
	return startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // net/http watches the connection once the body is read
		<-r.Context().Done()
		cancelled <- struct{}{}
	}))
}

func waitCancelled(t *testing.T, cancelled <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s was not cancelled", what)
	}
}

// TestReleaseCancelsARunningCall: the worker of a call released before its answer sees its
// request cancelled, and CallDone is not called.
func TestReleaseCancelsARunningCall(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	p := &callProxy{main: echoUpstream(t, "main", 0), side: blockingUpstream(t, cancelled)}
	addr := startCallProxy(t, p)
	if resp := post(t, addr, "/nowait", "x"); resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	waitCancelled(t, cancelled, "the released call")
	if p.calls.Load() != 0 {
		t.Fatalf("CallDone called %d times for a released call", p.calls.Load())
	}
}

// TestAwaitingExchangeLearnsTheClientLeft: a client that hangs up while its exchange awaits a
// call ends the exchange (UpstreamDone(ErrClientGone)); the handler's Release cancels the call.
func TestAwaitingExchangeLearnsTheClientLeft(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	served := make(chan struct{}, 1)
	main := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		fmt.Fprint(w, "main")
		served <- struct{}{}
	}))
	p := &callProxy{main: main, side: blockingUpstream(t, cancelled)}
	addr := startCallProxy(t, p)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	<-served
	time.Sleep(50 * time.Millisecond) // let the main answer arrive: the exchange awaits
	_ = c.Close()
	waitCancelled(t, cancelled, "the awaited call")
	testutil.Eventually(t, "the exchange gone", func() bool { return p.gone.Load() == 1 })
}

// TestCallOutlivesItsExchange: a call left to finish alone ends after the client got its
// answer, and the connection serves its next request meanwhile.
func TestCallOutlivesItsExchange(t *testing.T) {
	p := &callProxy{main: echoUpstream(t, "main", 0), side: echoUpstream(t, "side", 200*time.Millisecond)}
	addr := startCallProxy(t, p)
	c := dialClosed(t, addr)
	br := bufio.NewReader(c)
	for i := range 2 {
		fmt.Fprintf(c, "POST /alone HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nb%d", i)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if body := readBody(t, resp); body != fmt.Sprint("main got b", i) {
			t.Fatalf("request %d: %q", i, body)
		}
	}
	if n := p.calls.Load(); n != 0 {
		t.Fatalf("%d calls ended before the answers: the side worker answers after 200 ms", n)
	}
	testutil.Eventually(t, "two calls without error", func() bool { return p.calls.Load() == 2 && p.callErrs.Load() == 0 })
}

// TestCallFailureIsReported: a call whose worker cannot be reached ends with an
// *UpstreamError, after Call returned.
func TestCallFailureIsReported(t *testing.T) {
	p := &callProxy{main: echoUpstream(t, "main", 0), side: "127.0.0.1:1"}
	addr := startCallProxy(t, p)
	resp := post(t, addr, "/wait", "x")
	if body := readBody(t, resp); resp.StatusCode != 201 || resp.Header.Get("X-Call-Status") != "0" || body != "main got x" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
	if p.calls.Load() != 1 || p.callErrs.Load() != 1 {
		t.Fatalf("%d calls ended, %d with an error; want 1, 1", p.calls.Load(), p.callErrs.Load())
	}
}

// watchingProxy is proxy with a HeadWatcher that gives up once cut is set.
type watchingProxy struct {
	proxy
	cut atomic.Bool
}

func (p *watchingProxy) KeepWaiting(*Exchange) bool { return !p.cut.Load() }

func (p *watchingProxy) Serve(x *Exchange) { x.Forward(p, &p.target, time.Now().Add(5*time.Second)) }

func (p *watchingProxy) UpstreamDone(x *Exchange, err error) {
	if errors.Is(err, ErrCut) {
		x.Respond(504, "text/plain", []byte(err.Error()))
		return
	}
	p.proxy.UpstreamDone(x, err)
}

// TestHeadWatcherCutsTheWait: a forwarder that stops wanting the worker's head cuts the
// attempt within a watch interval; the worker sees its request cancelled.
func TestHeadWatcherCutsTheWait(t *testing.T) {
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		started <- struct{}{}
		<-r.Context().Done()
		cancelled <- struct{}{}
	}))
	p := &watchingProxy{proxy: proxy{addr: up}}
	addr := startProxy(t, &p.proxy, func(c *Config) { c.Handler, c.WatchInterval = p, 20*time.Millisecond })
	go func() {
		<-started
		p.cut.Store(true)
	}()
	resp := post(t, addr, "/x", "x")
	if body := readBody(t, resp); resp.StatusCode != 504 || !strings.Contains(body, ErrCut.Error()) {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	waitCancelled(t, cancelled, "the cut attempt")
}
