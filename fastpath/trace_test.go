package fastpath

import (
	"math"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/traceparent"
	"github.com/smg-go/smg/worker"
)

const (
	clientTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	clientTracestate  = "congo=t61rcWkgMzE"
)

// tracedChat sends a chat request with the given trace headers ("" leaves one out) and
// returns the traceparent and tracestate the worker saw.
func tracedChat(t *testing.T, g *gateway, tp, ts string) (seenParent, seenState string) {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://gateway/v1/chat/completions")
	if tp != "" {
		req.Header.Set("traceparent", tp)
	}
	if ts != "" {
		req.Header.Set("tracestate", ts)
	}
	req.SetBodyString(chatBody)
	if err := g.client.DoTimeout(req, resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("chat: %v, status %d: %s", err, resp.StatusCode(), resp.Body())
	}
	return string(resp.Header.Peek("X-Seen-Traceparent")), string(resp.Header.Peek("X-Seen-Tracestate"))
}

func mustParse(t *testing.T, v string) traceparent.Context {
	t.Helper()
	c, ok := traceparent.Parse([]byte(v))
	if !ok {
		t.Fatalf("the worker saw an invalid traceparent %q", v)
	}
	return c
}

// TestTraceContextJoinsTheClientsTrace: with tracing on, the worker's parent is a new span of
// the client's trace, with the client's sampled flag, and the client's tracestate goes along;
// each request gets a span of its own.
func TestTraceContextJoinsTheClientsTrace(t *testing.T) {
	g := newGateway(t, "round_robin", Config{Trace: TraceConfig{Enable: true, SampleRatio: math.SmallestNonzeroFloat64}}, newFakeWorker(t, "a", 200))
	client := mustParse(t, clientTraceparent)
	spans := map[[8]byte]bool{}
	for _, flags := range []string{"01", "00"} {
		tp := clientTraceparent[:53] + flags
		seen, state := tracedChat(t, g, tp, clientTracestate)
		c := mustParse(t, seen)
		if c.TraceID != client.TraceID || c.SpanID == client.SpanID || spans[c.SpanID] {
			t.Fatalf("client %s, worker saw %s: want the client's trace and a new span", tp, seen)
		}
		spans[c.SpanID] = true
		if want := flags == "01"; c.Sampled() != want {
			t.Errorf("client flags %s, worker saw %s: the client's sampled flag decides", flags, seen)
		}
		if state != clientTracestate {
			t.Errorf("tracestate %q reached the worker as %q", clientTracestate, state)
		}
	}
}

// TestTraceContextStartsATrace: with no traceparent, or an invalid one, the gateway starts a
// trace (sampled by --trace-sample-ratio) and sends no tracestate.
func TestTraceContextStartsATrace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ratio   float64
		sampled bool
	}{
		{"ratio 1", 1, true},
		{"ratio ~0", math.SmallestNonzeroFloat64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, "round_robin", Config{Trace: TraceConfig{Enable: true, SampleRatio: tc.ratio}}, newFakeWorker(t, "a", 200))
			client := mustParse(t, clientTraceparent)
			for _, tp := range []string{"", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "garbage"} {
				seen, state := tracedChat(t, g, tp, clientTracestate)
				c := mustParse(t, seen)
				if c.TraceID == client.TraceID || c.Sampled() != tc.sampled {
					t.Errorf("client traceparent %q: worker saw %s, want a new trace, sampled %v", tp, seen, tc.sampled)
				}
				if state != "" {
					t.Errorf("client traceparent %q: the worker saw tracestate %q of no trace it is in", tp, state)
				}
			}
		})
	}
}

// TestTraceContextOffPassesHeadersThrough: with tracing off the client's headers reach the
// worker as sent, an invalid traceparent included.
func TestTraceContextOffPassesHeadersThrough(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	for _, tp := range []string{clientTraceparent, "garbage"} {
		if seen, state := tracedChat(t, g, tp, clientTracestate); seen != tp || state != clientTracestate {
			t.Errorf("sent %q, %q; the worker saw %q, %q", tp, clientTracestate, seen, state)
		}
	}
	if seen, _ := tracedChat(t, g, "", ""); seen != "" {
		t.Errorf("the worker saw traceparent %q the client did not send", seen)
	}
}

// TestTraceContextReachesBothPDLegs: in PD mode the prefill and the decode worker both see
// the gateway's span as their parent.
func TestTraceContextReachesBothPDLegs(t *testing.T) {
	seen := make(chan string, 2)
	answer := func(s string) func(map[string]any, *fasthttp.RequestCtx) {
		return func(_ map[string]any, ctx *fasthttp.RequestCtx) {
			seen <- string(ctx.Request.Header.Peek("traceparent"))
			ctx.SetContentType("application/json")
			ctx.SetBodyString(s)
		}
	}
	g := newPDGatewayConfig(t, Config{Retry: DefaultRetryConfig(), Trace: TraceConfig{Enable: true, SampleRatio: 1}},
		[]*pdFake{newPDFake(t, answer(`{}`))}, []*pdFake{newPDFake(t, answer(decodeAnswer))}, map[string]string{worker.LabelBootstrapPort: "9001"})
	resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"x"}]}`, "traceparent", clientTraceparent)
	if resp.StatusCode() != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
	}
	a, b := mustParse(t, <-seen), mustParse(t, <-seen)
	client := mustParse(t, clientTraceparent)
	if a != b || a.TraceID != client.TraceID || a.SpanID == client.SpanID {
		t.Fatalf("the legs saw %+v and %+v: want the same new span of the client's trace", a, b)
	}
}

// BenchmarkTraceContext is the data plane's whole cost of tracing per request: reading the
// client's traceparent (or starting a trace and sampling it), drawing a span id and writing
// the worker's traceparent.
func BenchmarkTraceContext(b *testing.B) {
	ratio := traceparent.NewRatio(0.5)
	for _, tc := range []struct {
		name   string
		header []byte
	}{{"client's trace", []byte(clientTraceparent)}, {"new trace", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			var t traceState
			b.ReportAllocs()
			for b.Loop() {
				t.begin(tc.header, ratio)
			}
		})
	}
}

// TestRecordCarriesTheTraceContext: the request's record holds the span the worker saw as
// its parent (the client's trace, the client's span as the record's parent), so the span
// exported from it is that parent; with tracing off the record's trace context is zero.
func TestRecordCarriesTheTraceContext(t *testing.T) {
	c := &collector{}
	sink := newTelemetrySink(t, metrics.NewSet(), c)
	g := newGateway(t, "round_robin", Config{Telemetry: sink, Trace: TraceConfig{Enable: true, SampleRatio: 1}}, newFakeWorker(t, "a", 200))
	n := 0
	seen, _ := tracedChat(t, g, clientTraceparent, "")
	worker, client := mustParse(t, seen), mustParse(t, clientTraceparent)
	r := c.next(t, &n)
	if r.TraceID != client.TraceID || r.ParentSpanID != client.SpanID || r.SpanID != worker.SpanID || !r.Sampled {
		t.Fatalf("record trace %x span %x parent %x sampled %v; client %s, worker saw %s", r.TraceID, r.SpanID, r.ParentSpanID, r.Sampled, clientTraceparent, seen)
	}
	seen, _ = tracedChat(t, g, "", "")
	worker = mustParse(t, seen)
	if r = c.next(t, &n); r.TraceID != worker.TraceID || r.SpanID != worker.SpanID || r.ParentSpanID != ([8]byte{}) {
		t.Fatalf("new trace: record trace %x span %x parent %x; the worker saw %s", r.TraceID, r.SpanID, r.ParentSpanID, seen)
	}

	off := newGateway(t, "round_robin", Config{Telemetry: sink}, newFakeWorker(t, "b", 200))
	tracedChat(t, off, clientTraceparent, "")
	if r = c.next(t, &n); r.TraceID != ([16]byte{}) || r.SpanID != ([8]byte{}) || r.Sampled {
		t.Fatalf("tracing off: record trace %x span %x sampled %v", r.TraceID, r.SpanID, r.Sampled)
	}
}
