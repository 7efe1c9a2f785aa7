package fastpath

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/worker"
)

// dialListener is a listener a test can dial: a loopback TCP listener (the event loops need
// real sockets), or one wrapping it (tlsListener).
type dialListener interface {
	net.Listener
	Dial() (net.Conn, error)
}

type tcpListener struct{ *net.TCPListener }

func (l tcpListener) Dial() (net.Conn, error) { return net.Dial("tcp", l.Addr().String()) }

// newTestListener returns a loopback listener on a free port.
func newTestListener(t testing.TB) dialListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() }) // a second Close after a server's is harmless
	return tcpListener{ln.(*net.TCPListener)}
}

// fakeWorker is a fake engine: a fasthttp server on a loopback listener that answers
// chat completions with a fixed JSON body or, for "stream":true, with SSE events paced by
// the test through the events channel.
type fakeWorker struct {
	name   string
	ln     dialListener
	srv    *fasthttp.Server
	events chan string // each value is sent as one SSE event; closing ends the stream
	served chan struct{}
	closed chan struct{} // receives when a stream's writer saw its client go away
	delay  time.Duration // non-streamed answers wait this long (timeouts)
	bodies chan []byte   // when set, receives a copy of every generation request's body
}

var okBody = []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)

func newFakeWorker(t testing.TB, name string, status int) *fakeWorker {
	return newFakeWorkerOn(t, newTestListener(t), name, status)
}

// newFakeWorkerOn is newFakeWorker serving on ln (tlsworker_test.go serves over TLS).
func newFakeWorkerOn(t testing.TB, ln dialListener, name string, status int) *fakeWorker {
	fw := &fakeWorker{name: name, ln: ln, events: make(chan string), served: make(chan struct{}, 1024), closed: make(chan struct{}, 16)}
	fw.srv = &fasthttp.Server{ReadBufferSize: 128 << 10, Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("X-Mock-Worker-Id", fw.name)
		ctx.Response.Header.SetBytesV("X-Seen-Request-Id", ctx.Request.Header.Peek("X-Request-Id"))
		ctx.Response.Header.SetBytesV("X-Seen-Authorization", ctx.Request.Header.Peek("Authorization"))
		ctx.Response.Header.SetBytesV("X-Seen-Path", ctx.Path())
		ctx.Response.Header.SetBytesV("X-Seen-Traceparent", ctx.Request.Header.Peek("traceparent"))
		ctx.Response.Header.SetBytesV("X-Seen-Tracestate", ctx.Request.Header.Peek("tracestate"))
		if string(ctx.Path()) == "/v1/models" {
			ctx.SetBodyString(`{"object":"list","data":[{"id":"m1","object":"model"}]}`)
			return
		}
		select {
		case fw.served <- struct{}{}:
		default:
		}
		if fw.bodies != nil {
			fw.bodies <- append([]byte(nil), ctx.PostBody()...)
		}
		if status != 200 || !bytesContains(ctx.PostBody(), `"stream":true`) {
			if fw.delay > 0 {
				time.Sleep(fw.delay)
			}
			ctx.SetStatusCode(status)
			ctx.SetContentType("application/json")
			ctx.Response.SetBodyRaw(okBody)
			return
		}
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for ev := range fw.events {
				fmt.Fprintf(w, "data: %s\n\n", ev)
				if err := w.Flush(); err != nil {
					fw.closed <- struct{}{}
					return
				}
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		})
	}}
	go func() { _ = fw.srv.Serve(fw.ln) }()
	t.Cleanup(func() { _ = fw.srv.Shutdown(); _ = fw.ln.Close() })
	return fw
}

func bytesContains(b []byte, s string) bool {
	return len(s) <= len(b) && (string(b) == s || indexOf(b, s) >= 0)
}

func indexOf(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

// gateway is an in-memory gateway over fake workers.
type gateway struct {
	t      testing.TB
	reg    *worker.Registry
	srv    *Server
	ln     dialListener
	client *fasthttp.HostClient
	fakes  map[string]*fakeWorker // by worker host:port; after start, setFake and fake only
	// fakesMu guards fakes: the gateway dials and resolves from its own goroutines, and on
	// loopback (evloop) nothing the race detector sees orders a test's later setFake after
	// the dials of an earlier request.
	fakesMu sync.Mutex
	// others are the listeners of other fakes (PD) by worker host:port, for resolve.
	others map[string]dialListener
	// tls configures the connections to https workers (worker.ClientOptions.TLS).
	tls *tls.Config
}

func newGateway(t testing.TB, policyName string, cfg Config, fakes ...*fakeWorker) *gateway {
	g := &gateway{t: t, fakes: map[string]*fakeWorker{}}
	g.startOnFakes(cfg, policyName, "http", fakes)
	return g
}

// startOnFakes starts the gateway over fakes, worker i at <scheme>://10.0.0.<i+1>:8000 serving
// model m1, dialled over the fakes' in-memory listeners.
func (g *gateway) startOnFakes(cfg Config, policyName, scheme string, fakes []*fakeWorker) {
	for i, f := range fakes {
		g.fakes[fmt.Sprintf("10.0.0.%d:8000", i+1)] = f
	}
	g.start(cfg, policy.RouterConfig{DefaultPolicy: policyName}, func(addr string) (net.Conn, error) {
		f := g.fake(addr)
		if f == nil {
			return nil, fmt.Errorf("dial %s: connection refused", addr)
		}
		return f.ln.Dial()
	}, func() {
		for i := range fakes {
			g.addWorker(fmt.Sprintf("%s://10.0.0.%d:8000", scheme, i+1), "m1")
		}
	})
}

// start builds the registry (dialing workers with dial), the router (rc, quiet, with the
// policies' defaults unless rc names its own builders) and the server, calls addWorkers, then serves on an in-memory listener.
func (g *gateway) start(cfg Config, rc policy.RouterConfig, dial fasthttp.DialFunc, addWorkers func()) {
	t := g.t
	var err error
	quiet := testutil.Quiet
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	regCfg := worker.DefaultConfig().WithLogger(quiet)
	regCfg.Client.Dial = dial
	regCfg.Client.TLS = g.tls
	g.reg, err = worker.NewRegistry(regCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.reg.Close)
	if rc.NewBuilder == nil {
		pc := all.DefaultConfig()
		pc.Logger, pc.PDMode = quiet, rc.PD != nil
		if rc.NewBuilder, err = all.NewBuilderFunc(pc); err != nil {
			t.Fatal(err)
		}
	}
	rc.Logger = quiet
	router, err := policy.NewRouter(rc)
	if err != nil {
		t.Fatal(err)
	}
	g.reg.Subscribe(router.Update)
	g.srv, err = New(withDefaults(cfg), g.reg, router)
	if err != nil {
		t.Fatal(err)
	}
	g.srv.DiscoverModels = nil
	g.srv.resolveUpstream = g.resolve
	addWorkers()
	g.ln = newTestListener(t)
	go func() { _ = g.srv.Serve(g.ln) }()
	t.Cleanup(func() { _ = g.srv.Shutdown(context.Background()); _ = g.ln.Close() })
	g.client = &fasthttp.HostClient{Addr: "gateway", Dial: func(string) (net.Conn, error) { return g.ln.Dial() }, MaxConns: 64}
}

// withDefaults is DefaultConfig with the settings a test gave: the non-zero fields of given,
// field by field inside Admission and FanOut. Retry is taken as given: its zero value retries
// nothing, which is what most tests want.
func withDefaults(given Config) Config {
	cfg := DefaultConfig()
	overlay(reflect.ValueOf(&cfg).Elem(), reflect.ValueOf(given))
	cfg.Retry = given.Retry
	return cfg
}

func overlay(dst, src reflect.Value) {
	for i := range src.NumField() {
		f := src.Field(i)
		switch {
		case f.Kind() == reflect.Struct:
			overlay(dst.Field(i), f)
		case !f.IsZero():
			dst.Field(i).Set(f)
		}
	}
}

// resolve maps a fake worker's made-up address to where it listens (the event loops connect
// by address; the registry's Dial, for the admin routes' and probes' round trips, goes to the
// same fakes).
func (g *gateway) resolve(addr string) string {
	if f := g.fake(addr); f != nil {
		return f.ln.Addr().String()
	}
	if ln := g.others[addr]; ln != nil {
		return ln.Addr().String()
	}
	return "127.0.0.1:1" // nothing listens: connection refused
}

// fake returns the fake worker at the made-up address addr, or nil.
func (g *gateway) fake(addr string) *fakeWorker {
	g.fakesMu.Lock()
	defer g.fakesMu.Unlock()
	return g.fakes[addr]
}

// setFake makes f the fake worker at the made-up address addr.
func (g *gateway) setFake(addr string, f *fakeWorker) {
	g.fakesMu.Lock()
	defer g.fakesMu.Unlock()
	g.fakes[addr] = f
}

func (g *gateway) addWorker(url, model string) *worker.Worker {
	spec := worker.Spec{URL: url, ModelID: model}
	if err := spec.Normalize(); err != nil {
		g.t.Fatal(err)
	}
	w, err := g.reg.Add(context.Background(), spec, worker.StatusReady)
	if err != nil {
		g.t.Fatal(err)
	}
	g.waitTable(func(n int) bool { return n >= len(g.reg.Current().Workers) })
	return w
}

// waitTable waits until the router has published a table covering the registry's snapshot.
func (g *gateway) waitTable(ok func(int) bool) {
	g.t.Helper()
	testutil.Eventually(g.t, "the route table published", func() bool {
		return g.srv.router.Current().Snapshot.Version == g.reg.Current().Version && ok(len(g.srv.router.Current().Snapshot.Workers))
	})
}

func (g *gateway) do(method, path, body string, hdr ...string) *fasthttp.Response {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://gateway" + path)
	req.SetBodyString(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp := fasthttp.AcquireResponse()
	if err := g.client.DoTimeout(req, resp, 10*time.Second); err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func (g *gateway) inFlight() (sum int64) {
	for _, w := range g.reg.Current().Workers {
		sum += w.InFlight.Load()
	}
	return sum
}

// openConnections counts the client connections the server is serving.
func (s *Server) openConnections() int {
	<-s.loopsReady
	return int(s.loops.OpenConnections())
}
