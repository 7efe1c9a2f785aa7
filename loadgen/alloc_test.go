//go:build !race

package loadgen

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// fixedServer answers every request with body, without allocating, so that
// testing.AllocsPerRun (which counts every goroutine) sees only the client's allocations.
func fixedServer(t *testing.T, contentType string, body []byte) *fasthttputil.InmemoryListener {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("x-mock-worker-id", "w1")
		ctx.SetContentType(contentType)
		ctx.SetBody(body)
	}}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln) //nolint:errcheck // ends when the listener closes
	}()
	t.Cleanup(func() {
		srv.Shutdown()
		ln.Close() // in case Serve had not registered ln when Shutdown ran
		<-served
	})
	return ln
}

// inMemoryClient connects a client for cfg to ln (every PD worker too, in PD mode).
func inMemoryClient(t *testing.T, cfg Config, ln *fasthttputil.InmemoryListener) (*client, source) {
	t.Helper()
	if !cfg.PD.enabled() {
		cfg.BaseURL = "http://fake/v1"
	}
	cfg.Dial = func(string) (net.Conn, error) { return ln.Dial() }
	cfg.derive()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cl, err := newClient(&cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	src, err := newSource(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl, src
}

// TestRequestCycleAllocations checks the promise of the package doc: a closed-loop request
// of the raw workload (send, read, parse, record) allocates nothing in steady state.
func TestRequestCycleAllocations(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Model, cfg.Workload, cfg.Stream = "m", WorkloadRaw, false
	cfg.SessionHeader = "X-SMG-Routing-Key" // set per request, in place
	ln := fixedServer(t, "application/json", []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi there"},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}`))
	cl, src := inMemoryClient(t, cfg, ln)
	st := cl.newState(time.Hour)
	start := time.Now()
	cycle := func() {
		it, _ := src.next(context.Background())
		if s := cl.do(st, it, start, false, true); s.fail != failNone {
			t.Fatalf("request failed: %+v", s)
		}
	}
	for range 100 { // warm the pools, maps and sample slices
		cycle()
	}
	if a := testing.AllocsPerRun(2000, cycle); a != 0 {
		t.Fatalf("%v allocations per request, want 0", a)
	}
}

// maxStreamAllocs is what fasthttp v1.79 allocates per streamed response.
const maxStreamAllocs = 4

// TestStreamingRequestAllocations bounds a streamed request: fasthttp allocates the body
// stream wrapper and its closures per response (clientStreamBody), loadgen nothing per event.
func TestStreamingRequestAllocations(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Model, cfg.Workload = "m", WorkloadRaw
	cfg.Raw.OutputTokens = 16
	var events []byte
	for i := range 16 {
		events = fmt.Appendf(events, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d \"}}]}\n\n", i)
	}
	events = append(events, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":16}}\n\ndata: [DONE]\n\n"...)
	cl, src := inMemoryClient(t, cfg, fixedServer(t, "text/event-stream", events))
	st := cl.newState(time.Hour)
	start := time.Now()
	cycle := func() {
		it, _ := src.next(context.Background())
		if s := cl.do(st, it, start, false, true); s.fail != failNone || s.contentEvents != 16 {
			t.Fatalf("request failed: %+v", s)
		}
	}
	for range 100 {
		cycle()
	}
	a := testing.AllocsPerRun(1000, cycle)
	t.Logf("%v allocations per streamed request of 16 events", a)
	if a > maxStreamAllocs {
		t.Fatalf("%v allocations per streamed request, want at most %d", a, maxStreamAllocs)
	}
}

// TestPDRequestCycleAllocations: PD mode adds the body splice and the prefill leg's
// hand-offs to a request, none of which allocates in steady state.
func TestPDRequestCycleAllocations(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Model, cfg.Workload, cfg.Stream = "m", WorkloadRaw, false
	cfg.PD = PDConfig{Prefill: []string{"http://prefill:1", "http://prefill2:1"}, Decode: []string{"http://decode:1"}, BootstrapPort: 8998}
	ln := fixedServer(t, "application/json", []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi there"},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":2}}`))
	cl, src := inMemoryClient(t, cfg, ln)
	st := cl.newState(time.Hour)
	defer st.close()
	start := time.Now()
	cycle := func() {
		it, _ := src.next(context.Background())
		if s := cl.do(st, it, start, false, true); s.fail != failNone {
			t.Fatalf("request failed: %+v %s", s, s.detail)
		}
	}
	for range 100 {
		cycle()
	}
	if a := testing.AllocsPerRun(2000, cycle); a != 0 {
		t.Fatalf("%v allocations per PD request, want 0", a)
	}
}
