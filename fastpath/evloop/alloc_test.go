//go:build !race

package evloop

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestRoundTripDoesNotAllocate drives complete round trips over real loopback sockets
// (fasthttp client → event loop → fasthttp worker) and counts the heap allocations of the
// whole process: once connections and buffers are warm there must be none, held and relayed.
func TestRoundTripDoesNotAllocate(t *testing.T) {
	for _, path := range []string{"/held", "/stream"} {
		t.Run(path, func(t *testing.T) {
			client := newFastClient(t)
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://gw" + path)
			req.SetBodyString(`{"model":"m1","messages":[{"role":"user","content":"hello"}]}`)
			roundTrip := func() {
				if err := client.DoTimeout(req, resp, 5*time.Second); err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode() != 200 || len(resp.Body()) == 0 {
					t.Fatalf("status %d body %q", resp.StatusCode(), resp.Body())
				}
			}
			for range 200 {
				roundTrip()
			}
			if allocs := testing.AllocsPerRun(500, roundTrip); allocs != 0 {
				t.Fatalf("%.2f allocations per proxied round trip, want 0", allocs)
			}
		})
	}
}

func newFastClient(t testing.TB) *fasthttp.HostClient {
	wln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"x","choices":[{"message":{"content":"hi"}}]}`)
	ws := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.Response.SetBodyRaw(body)
	}}
	go func() { _ = ws.Serve(wln) }()
	t.Cleanup(func() { _ = ws.Shutdown() })
	addr := startProxy(t, &proxy{addr: wln.Addr().String()}, func(c *Config) { c.Loops = 1 })
	return &fasthttp.HostClient{Addr: addr, MaxConns: 1}
}

// BenchmarkRoundTrip is one proxied round trip over loopback (client, loop and worker in this
// process).
func BenchmarkRoundTrip(b *testing.B) {
	client := newFastClient(b)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://gw/held")
	req.SetBodyString(`{"model":"m1","messages":[{"role":"user","content":"hello"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := client.DoTimeout(req, resp, 5*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
