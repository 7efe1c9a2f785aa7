//go:build !race

package fastpath

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/worker"
)

// TestProxyRoundTripDoesNotAllocate drives complete non-streamed round trips (client →
// gateway → worker → gateway → client) over loopback connections and counts heap
// allocations of the whole process: once pools and buffers are warm, there must be none (the
// event loops read the request body into the connection's buffer; no fasthttp server is on
// this path).
func TestProxyRoundTripDoesNotAllocate(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200), newFakeWorker(t, "b", 200))
	assertRoundTripDoesNotAllocate(t, g)
}

// TestPDRoundTripDoesNotAllocate is the same for an SGLang PD round trip: the bootstrap
// rewrite, two upstream requests and the handover; held, and relayed ("stream":true, the
// decode answer relayed as it arrives while the prefill finishes alone).
func TestPDRoundTripDoesNotAllocate(t *testing.T) {
	g := newPDGateway(t, []*pdFake{newPDFake(t, nil)}, []*pdFake{newPDFake(t, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"})
	t.Run("held", func(t *testing.T) { assertRoundTripDoesNotAllocate(t, g) })
	t.Run("stream", func(t *testing.T) {
		assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hello there"}],"stream":true}`)
	})
}

// TestPassThroughRoundTripDoesNotAllocate is the same for every engine pass-through route.
func TestPassThroughRoundTripDoesNotAllocate(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200), newFakeWorker(t, "b", 200))
	for _, c := range passThroughBodies {
		t.Run(c.path, func(t *testing.T) { assertRouteDoesNotAllocate(t, g, c.path, c.body) })
	}
}

// TestQueuedRoundTripDoesNotAllocate: a request that waits in the admission queue
// (--max-concurrent-requests 1, --queue-size 1) and is served when the slot frees allocates
// nothing on the event loops: it is parked on its loop as the parkedWaiter of its exchange,
// and release hands it the slot. The test holds the one slot itself, sends the request, waits
// until it is queued, then frees the slot.
func TestQueuedRoundTripDoesNotAllocate(t *testing.T) {
	g := newGateway(t, "round_robin", Config{Admission: AdmissionConfig{MaxConcurrent: 1, QueueSize: 1, QueueTimeout: time.Hour}}, newFakeWorker(t, "a", 200))
	adm := g.srv.adm
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://gateway/v1/chat/completions")
	req.SetBodyString(chatBody)
	send, answered := make(chan struct{}), make(chan error)
	go func() { // the client: a goroutine of its own, since its request waits for the test
		for range send {
			err := g.client.DoTimeout(req, resp, 5*time.Second)
			if err == nil && resp.StatusCode() != 200 {
				err = errStatus
			}
			answered <- err
		}
	}()
	t.Cleanup(func() { close(send) })
	var holder parkedWaiter // the test's own admission, never parked
	queuedRoundTrip := func() {
		if _, st := adm.admitOrPark(&holder, evloop.Unparker{}); st != admitted { // the test holds the one slot
			t.Fatal("the free slot was refused")
		}
		send <- struct{}{}
		for adm.parked.Load() != 1 { // the request is parked on its loop, in the queue
			time.Sleep(20 * time.Microsecond)
		}
		adm.release() // its slot: the request is served
		if err := <-answered; err != nil {
			t.Fatalf("the queued request: %v (status %d: %s)", err, resp.StatusCode(), resp.Body())
		}
	}
	for range 200 {
		queuedRoundTrip()
	}
	if allocs := testing.AllocsPerRun(500, queuedRoundTrip); allocs != 0 {
		t.Fatalf("%.2f allocations per queued round trip, want 0", allocs)
	}
}

// TestTracedRoundTripDoesNotAllocate: the trace context costs no allocation, on (joining the
// client's trace or starting one, copied into the request's telemetry record) and off (the
// client's headers passed through).
func TestTracedRoundTripDoesNotAllocate(t *testing.T) {
	on := Config{Trace: TraceConfig{Enable: true, SampleRatio: 0.5}, Telemetry: newTelemetrySink(t, metrics.NewSet())}
	for _, tc := range []struct {
		name string
		cfg  Config
		hdr  []string
	}{
		{"on, client's trace", on, []string{"traceparent", clientTraceparent, "tracestate", clientTracestate}},
		{"on, new trace", on, nil},
		{"off", Config{}, []string{"traceparent", clientTraceparent, "tracestate", clientTracestate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, "round_robin", tc.cfg, newFakeWorker(t, "a", 200), newFakeWorker(t, "b", 200))
			assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", chatBody, tc.hdr...)
		})
	}
}

// errStatus: the answer was not 200.
var errStatus = errors.New("status not 200")

// TestStreamedBodyRoundTripDoesNotAllocate: a body past --max-buffered-request-bytes,
// streamed to the worker unparsed, allocates nothing either, sent with a Content-Length and
// chunked. Its tail is not JSON: had the gateway read and parsed it, the answer would be 400.
func TestStreamedBodyRoundTripDoesNotAllocate(t *testing.T) {
	g := newGateway(t, "round_robin", Config{MaxBufferedBody: 4096}, newFakeWorker(t, "a", 200), newFakeWorker(t, "b", 200))
	body := bigChat(64<<10) + "not json"
	t.Run("content-length", func(t *testing.T) { assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", body) })
	t.Run("chunked", func(t *testing.T) {
		req := fasthttp.AcquireRequest()
		resp := fasthttp.AcquireResponse()
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://gateway/v1/chat/completions")
		var rd strings.Reader
		roundTrip := func() {
			rd.Reset(body)
			req.SetBodyStream(&rd, -1) // chunked
			if err := g.client.DoTimeout(req, resp, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
			}
		}
		for range 200 {
			roundTrip()
		}
		if allocs := testing.AllocsPerRun(500, roundTrip); allocs != 0 {
			t.Fatalf("%.2f allocations per chunked streamed round trip, want 0", allocs)
		}
	})
}

func assertRoundTripDoesNotAllocate(t *testing.T, g *gateway) {
	assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", `{"model":"m1","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"hello there"}]}`)
}

func assertRouteDoesNotAllocate(t *testing.T, g *gateway, path, body string, hdr ...string) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://gateway" + path)
	req.SetBodyString(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	roundTrip := func() {
		if err := g.client.DoTimeout(req, resp, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
		}
	}
	for range 200 { // warm every pool on both sides
		roundTrip()
	}
	if allocs := testing.AllocsPerRun(500, roundTrip); allocs != 0 {
		t.Fatalf("%.2f allocations per proxied round trip, want 0", allocs)
	}
}

// BenchmarkProxyRoundTrip measures one non-streamed round trip through the gateway over
// in-memory connections (client, gateway and worker all in this process).
func BenchmarkProxyRoundTrip(b *testing.B) {
	benchRoundTrip(b, newGateway(b, "round_robin", Config{}, newFakeWorker(b, "a", 200), newFakeWorker(b, "b", 200)))
}

// BenchmarkPDRoundTrip measures one non-streamed SGLang PD round trip through the gateway over
// in-memory connections: the bootstrap rewrite, two upstream requests and the handover.
func BenchmarkPDRoundTrip(b *testing.B) {
	benchRoundTrip(b, newPDGateway(b, []*pdFake{newPDFake(b, nil)}, []*pdFake{newPDFake(b, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"}))
}

// BenchmarkPassThroughRoundTrip is BenchmarkProxyRoundTrip for two pass-through routes, to
// compare in one run: the Anthropic messages (system joined before the messages) and rerank.
func BenchmarkPassThroughRoundTrip(b *testing.B) {
	g := newGateway(b, "round_robin", Config{}, newFakeWorker(b, "a", 200), newFakeWorker(b, "b", 200))
	b.Run("messages", func(b *testing.B) {
		benchRouteRoundTrip(b, g, "/v1/messages", `{"model":"m1","system":"be brief","messages":[{"role":"user","content":"hello there"}]}`)
	})
	b.Run("rerank", func(b *testing.B) {
		benchRouteRoundTrip(b, g, "/v1/rerank", `{"model":"m1","query":"hello there","documents":["a","b"]}`)
	})
}

// BenchmarkTracedRoundTrip is BenchmarkProxyRoundTrip with the trace context off and on (the
// client's traceparent and tracestate sent either way), to compare in one run.
func BenchmarkTracedRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{{"off", Config{}}, {"on", Config{Trace: TraceConfig{Enable: true, SampleRatio: 1}}}} {
		b.Run(tc.name, func(b *testing.B) {
			g := newGateway(b, "round_robin", tc.cfg, newFakeWorker(b, "a", 200), newFakeWorker(b, "b", 200))
			benchRouteRoundTrip(b, g, "/v1/chat/completions", chatBody, "traceparent", clientTraceparent, "tracestate", clientTracestate)
		})
	}
}

func benchRoundTrip(b *testing.B, g *gateway) {
	benchRouteRoundTrip(b, g, "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hello there"}]}`)
}

func benchRouteRoundTrip(b *testing.B, g *gateway, path, body string, hdr ...string) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://gateway" + path)
	req.SetBodyString(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	b.ReportAllocs()
	n, start := 0, processCPU()
	for b.Loop() {
		if err := g.client.DoTimeout(req, resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
			b.Fatal(err, resp.StatusCode())
		}
		n++
	}
	// The whole process's CPU per round trip (client, gateway, worker): steadier than ns/op
	// on a loaded machine, where the wall clock also measures the wait for a core.
	b.ReportMetric(float64(processCPU()-start)/float64(n), "cpu-ns/op")
}
