package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/traceparent"
	"github.com/smg-go/smg/telemetry/trace/tracetest"
)

// TestTraceReachesAnOTLPReceiver: smg --enable-trace exports a span per request to a real
// OTLP/gRPC receiver, in the client's trace with the client's span as parent, and the worker
// (a real mockworker) received a traceparent whose parent is that exported span. A request
// without traceparent starts a trace: a root span, and the worker sees its trace.
func TestTraceReachesAnOTLPReceiver(t *testing.T) {
	rcv := tracetest.Start(t)
	mocks := StartMocks(t, 1)
	gw := StartGateway(t, "--worker-urls", mocks.URLs[0], "--policy", "round_robin",
		"--enable-trace", "--otlp-traces-endpoint", rcv.Addr())
	const chat = `{"model":"mock-model","messages":[{"role":"user","content":"trace me"}],"max_tokens":4}`

	workerSawAt := func(url string) traceparent.Context {
		t.Helper()
		r := MustDo(t, "GET", url+"/admin/trace", "", nil)
		var body struct {
			Last string `json:"last_traceparent"`
		}
		if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
			t.Fatalf("/admin/trace: %v: %s", err, r.Body)
		}
		c, ok := traceparent.Parse([]byte(body.Last))
		if !ok {
			t.Fatalf("the worker saw traceparent %q: not valid", body.Last)
		}
		return c
	}
	workerSaw := func() traceparent.Context { t.Helper(); return workerSawAt(mocks.URLs[0]) }
	requestSpan := func(traceID []byte) tracetest.Span {
		t.Helper()
		return rcv.WaitSpan(t, 30*time.Second, func(s tracetest.Span) bool {
			return s.GetName() == "smg.request" && bytes.Equal(s.GetTraceId(), traceID)
		})
	}

	t.Run("client's trace", func(t *testing.T) {
		const clientTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		client, _ := traceparent.Parse([]byte(clientTP))
		if r := MustDo(t, "POST", gw.URL+"/v1/chat/completions", chat, map[string]string{"traceparent": clientTP}); r.Status != 200 {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		seen := workerSaw()
		span := requestSpan(client.TraceID[:])
		if !bytes.Equal(span.GetParentSpanId(), client.SpanID[:]) {
			t.Errorf("exported span's parent %x, want the client's span %x", span.GetParentSpanId(), client.SpanID)
		}
		if seen.TraceID != client.TraceID || !bytes.Equal(span.GetSpanId(), seen.SpanID[:]) {
			t.Errorf("the worker's parent is %x in trace %x; the exported span is %x", seen.SpanID, seen.TraceID, span.GetSpanId())
		}
		if span.Service != "smg" || span.Attr("gen_ai.request.model").GetStringValue() != "mock-model" || span.Attr("smg.worker").GetStringValue() != mocks.URLs[0] {
			t.Errorf("span of service %q, model %v, worker %v", span.Service, span.Attr("gen_ai.request.model"), span.Attr("smg.worker"))
		}
		if pick, ok := rcv.Child(span, "smg.pick"); !ok || pick.Attr("smg.policy").GetStringValue() != "round_robin" {
			t.Errorf("no smg.pick span naming round_robin under the request span (found %v)", ok)
		}
		try, ok := rcv.Child(span, "smg.attempt")
		if !ok || try.Attr("smg.worker").GetStringValue() != mocks.URLs[0] || try.Attr("http.response.status_code").GetIntValue() != 200 || try.Attr("smg.retry").GetIntValue() != 0 {
			t.Errorf("no smg.attempt span of the worker's 200 under the request span (found %v)", ok)
		}
	})

	t.Run("new trace", func(t *testing.T) {
		if r := MustDo(t, "POST", gw.URL+"/v1/chat/completions", chat, nil); r.Status != 200 {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		seen := workerSaw()
		span := requestSpan(seen.TraceID[:])
		if len(span.GetParentSpanId()) != 0 || !bytes.Equal(span.GetSpanId(), seen.SpanID[:]) || !seen.Sampled() {
			t.Errorf("span %x parent %x; the worker saw %+v: want a sampled root span, the worker's parent", span.GetSpanId(), span.GetParentSpanId(), seen)
		}
	})

	// A gRPC engine gets the same trace context as the call's traceparent metadata.
	t.Run("gRPC engine", func(t *testing.T) {
		engines := startGRPCMocks(t, 1, "sglang")
		ggw := StartGateway(t, "--model-path", qwen3Dir(t), "--worker-urls", engines[0], "--policy", "round_robin",
			"--enable-trace", "--otlp-traces-endpoint", rcv.Addr())
		const clientTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		client, _ := traceparent.Parse([]byte(clientTP))
		if r := MustDo(t, "POST", ggw.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, ""), map[string]string{"traceparent": clientTP}); r.Status != 200 {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		seen := workerSawAt("http://" + strings.TrimPrefix(engines[0], "grpc://"))
		span := requestSpan(client.TraceID[:])
		if seen.TraceID != client.TraceID || !bytes.Equal(span.GetSpanId(), seen.SpanID[:]) || !bytes.Equal(span.GetParentSpanId(), client.SpanID[:]) {
			t.Errorf("the engine's parent is %x in trace %x; the exported span is %x with parent %x (client %x)",
				seen.SpanID, seen.TraceID, span.GetSpanId(), span.GetParentSpanId(), client.SpanID)
		}
	})
}
