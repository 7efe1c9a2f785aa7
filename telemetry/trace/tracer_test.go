package trace

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/traceparent"
	"github.com/smg-go/smg/telemetry"
	"github.com/smg-go/smg/telemetry/trace/tracetest"
	"github.com/smg-go/smg/worker/workertest"
)

func TestConfigValidate(t *testing.T) {
	def := DefaultConfig()
	if err := def.Validate(); err != nil {
		t.Fatalf("default (off): %v", err)
	}
	on := DefaultConfig()
	on.Enable = true
	if err := on.Validate(); err != nil {
		t.Fatalf("default on: %v", err)
	}
	for _, tc := range []struct {
		name, want string
		edit       func(*Config)
	}{
		{"endpoint without port", "--otlp-traces-endpoint", func(c *Config) { c.Endpoint = "collector" }},
		{"endpoint as URL", "--otlp-traces-endpoint", func(c *Config) { c.Endpoint = "http://collector:4317/v1" }},
		{"endpoint empty", "--otlp-traces-endpoint", func(c *Config) { c.Endpoint = "" }},
		{"service name", "service name", func(c *Config) { c.ServiceName = "" }},
		{"batch timeout", "batch timeout", func(c *Config) { c.BatchTimeout = 0 }},
		{"queue below batch", "queue size", func(c *Config) { c.QueueSize = c.BatchSize - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := on
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error naming %q", err, tc.want)
			}
			c.Enable = false
			if err := c.Validate(); err != nil {
				t.Fatalf("off, Validate = %v: settings of a disabled tracer do not matter", err)
			}
		})
	}
}

// startTracer returns a Tracer exporting to a real OTLP/gRPC receiver, flushing quickly.
func startTracer(t *testing.T) (*Tracer, *tracetest.Receiver) {
	rcv := tracetest.Start(t)
	return startTracerTo(t, rcv, DefaultExportTimeout), rcv
}

// startTracerTo returns a Tracer exporting to rcv, flushing quickly, an export given up
// after exportTimeout.
func startTracerTo(t *testing.T, rcv *tracetest.Receiver, exportTimeout time.Duration) *Tracer {
	cfg := DefaultConfig()
	cfg.Enable, cfg.Endpoint, cfg.ServiceName, cfg.BatchTimeout = true, rcv.Addr(), "smg-test", 10*time.Millisecond
	cfg.ExportTimeout = exportTimeout
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

// record is a finished request of the client's trace: 2 ms admission wait, picked 1 ms later
// by round_robin (30 of its 40 units cached), sent to w0 at 3 ms, which answered 503 at 4 ms; a 1 ms pause, then sent to
// w1 at 5 ms: first token at 10 ms, done at 30 ms.
func record(t testing.TB, sampled bool) *telemetry.Record {
	w0, w1 := workertest.Ready(t, "http://w0:8000", "m1"), workertest.Ready(t, "http://w1:8000", "m1")
	r := &telemetry.Record{
		Model: "m1", Route: "/v1/chat/completions", Worker: w1, Status: 200, Policy: "round_robin",
		Stream: true, Attempts: 2, PromptTokens: 12, CompletionTokens: 34, CachedTokens: -1,
		TraceID: traceparent.NewTraceID(), SpanID: traceparent.NewSpanID(), ParentSpanID: traceparent.NewSpanID(), Sampled: sampled,
	}
	r.IDLen = uint8(copy(r.RequestID[:], "chatcmpl-abc"))
	r.Start = clock.Nanos()
	r.Admitted = r.Start + 2e6
	r.Picked = r.Admitted + 1e6
	r.FirstToken = r.Start + 10e6
	r.End = r.Start + 30e6
	r.Tries[0] = telemetry.Try{Worker: w0, Sent: r.Start + 3e6, Ended: r.Start + 4e6, Status: 503, Backoff: 1e6}
	r.Tries[1] = telemetry.Try{Worker: w1, Sent: r.Start + 5e6, Ended: r.End, Status: 200}
	r.CacheMatched, r.CacheInput = 30, 40
	return r
}

// TestExportJoinsTheRecordsTrace: the request span carries the record's trace id, span id and
// parent, its times and attributes; the admission and pick spans are its children with the
// record's times; the first token is an event. An unsampled record exports nothing.
func TestExportJoinsTheRecordsTrace(t *testing.T) {
	tr, rcv := startTracer(t)
	dropped, r := record(t, false), record(t, true)
	tr.Export(dropped)
	tr.Export(r)
	if err := tr.Shutdown(context.Background()); err != nil { // flushes the batch
		t.Fatal(err)
	}
	for _, s := range rcv.Spans() {
		if bytes.Equal(s.GetTraceId(), dropped.TraceID[:]) {
			t.Fatalf("span %s of an unsampled record was exported", s.GetName())
		}
	}
	req := rcv.WaitSpan(t, 5*time.Second, func(s tracetest.Span) bool { return s.GetName() == "smg.request" })
	if !bytes.Equal(req.GetTraceId(), r.TraceID[:]) || !bytes.Equal(req.GetSpanId(), r.SpanID[:]) || !bytes.Equal(req.GetParentSpanId(), r.ParentSpanID[:]) {
		t.Fatalf("request span trace %x span %x parent %x, want the record's %x %x %x",
			req.GetTraceId(), req.GetSpanId(), req.GetParentSpanId(), r.TraceID, r.SpanID, r.ParentSpanID)
	}
	if req.Service != "smg-test" {
		t.Errorf("service.name %q", req.Service)
	}
	if d := req.GetEndTimeUnixNano() - req.GetStartTimeUnixNano(); d != 30e6 {
		t.Errorf("request span lasts %d ns, want the record's 30 ms", d)
	}
	if start := time.Unix(0, int64(req.GetStartTimeUnixNano())); time.Since(start) > time.Minute || time.Since(start) < 0 {
		t.Errorf("request span starts at %v: not the wall time of the record's start", start)
	}
	for key, want := range map[string]string{"gen_ai.request.model": "m1", "http.route": "/v1/chat/completions", "smg.worker": "http://w1:8000", "smg.request_id": "chatcmpl-abc"} {
		if got := req.Attr(key).GetStringValue(); got != want {
			t.Errorf("attribute %s = %q, want %q", key, got, want)
		}
	}
	for key, want := range map[string]int64{"http.response.status_code": 200, "smg.attempts": 2, "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 34} {
		if got := req.Attr(key).GetIntValue(); got != want {
			t.Errorf("attribute %s = %d, want %d", key, got, want)
		}
	}
	if req.Attr("smg.usage.cached_tokens") != nil {
		t.Error("unknown cached tokens (-1) exported")
	}
	if ev := req.GetEvents(); len(ev) != 1 || ev[0].GetName() != "first_token" || ev[0].GetTimeUnixNano()-req.GetStartTimeUnixNano() != 10e6 {
		t.Errorf("events %v, want first_token at 10 ms", ev)
	}
	for _, c := range []struct {
		name     string
		from, to uint64
	}{{"smg.admission", 0, 2e6}, {"smg.pick", 2e6, 3e6}} {
		s, ok := rcv.Child(req, c.name)
		if !ok {
			t.Fatalf("no %s span under the request span; got %v", c.name, rcv.Spans())
		}
		if s.GetStartTimeUnixNano()-req.GetStartTimeUnixNano() != c.from || s.GetEndTimeUnixNano()-req.GetStartTimeUnixNano() != c.to {
			t.Errorf("%s from %d to %d ns after the request, want %d to %d", c.name,
				s.GetStartTimeUnixNano()-req.GetStartTimeUnixNano(), s.GetEndTimeUnixNano()-req.GetStartTimeUnixNano(), c.from, c.to)
		}
		if bytes.Equal(s.GetSpanId(), r.SpanID[:]) {
			t.Errorf("%s reuses the request span's id", c.name)
		}
		if c.name == "smg.pick" && (s.Attr("smg.worker").GetStringValue() != "http://w0:8000" || s.Attr("smg.policy").GetStringValue() != "round_robin") {
			t.Errorf("pick span: worker %v, policy %v; want the first try's worker and the policy", s.Attr("smg.worker"), s.Attr("smg.policy"))
		}
		if c.name == "smg.pick" && (s.Attr("smg.cache.matched").GetIntValue() != 30 || s.Attr("smg.cache.input").GetIntValue() != 40 || s.Attr("smg.cache.match_ratio").GetDoubleValue() != 0.75) {
			t.Errorf("pick span: cache matched %v of %v, ratio %v; want 30 of 40, 0.75", s.Attr("smg.cache.matched"), s.Attr("smg.cache.input"), s.Attr("smg.cache.match_ratio"))
		}
	}
	// One span per try, in order, each with its worker, retry number and outcome.
	var tries []tracetest.Span
	for _, s := range rcv.Spans() {
		if s.GetName() == "smg.attempt" && bytes.Equal(s.GetParentSpanId(), req.GetSpanId()) {
			tries = append(tries, s)
		}
	}
	if len(tries) != 2 {
		t.Fatalf("%d smg.attempt spans under the request span, want 2", len(tries))
	}
	if tries[0].GetStartTimeUnixNano() > tries[1].GetStartTimeUnixNano() {
		tries[0], tries[1] = tries[1], tries[0]
	}
	for i, want := range []struct {
		worker    string
		status    int64
		from, to  uint64
		backoff   float64
		errorCode string
	}{{"http://w0:8000", 503, 3e6, 4e6, 1, "STATUS_CODE_ERROR"}, {"http://w1:8000", 200, 5e6, 30e6, 0, "STATUS_CODE_UNSET"}} {
		s := tries[i]
		if s.Attr("smg.worker").GetStringValue() != want.worker || s.Attr("smg.retry").GetIntValue() != int64(i) ||
			s.Attr("http.response.status_code").GetIntValue() != want.status || s.GetStatus().GetCode().String() != want.errorCode {
			t.Errorf("try %d: worker %v, retry %v, status %v, span status %v; want %+v", i, s.Attr("smg.worker"), s.Attr("smg.retry"),
				s.Attr("http.response.status_code"), s.GetStatus(), want)
		}
		if got := s.Attr("smg.backoff_ms").GetDoubleValue(); got != want.backoff {
			t.Errorf("try %d: backoff %v ms, want %v", i, got, want.backoff)
		}
		if s.GetStartTimeUnixNano()-req.GetStartTimeUnixNano() != want.from || s.GetEndTimeUnixNano()-req.GetStartTimeUnixNano() != want.to {
			t.Errorf("try %d from %d to %d ns, want %d to %d", i, s.GetStartTimeUnixNano()-req.GetStartTimeUnixNano(),
				s.GetEndTimeUnixNano()-req.GetStartTimeUnixNano(), want.from, want.to)
		}
	}
}

// TestExportStartsARootSpan: a record of a trace the gateway started exports a root span
// with the record's ids; a 5xx is an error span.
func TestExportStartsARootSpan(t *testing.T) {
	tr, rcv := startTracer(t)
	r := record(t, true)
	r.ParentSpanID, r.Status, r.ErrorCode, r.Worker, r.Picked, r.FirstToken = [8]byte{}, 503, "no_available_workers", nil, 0, 0
	r.Cause = "no worker of model m1 is ready"
	tr.Export(r)
	s := rcv.WaitSpan(t, 5*time.Second, func(s tracetest.Span) bool { return s.GetName() == "smg.request" })
	if !bytes.Equal(s.GetTraceId(), r.TraceID[:]) || !bytes.Equal(s.GetSpanId(), r.SpanID[:]) || len(s.GetParentSpanId()) != 0 {
		t.Fatalf("root span trace %x span %x parent %x, want %x %x and none", s.GetTraceId(), s.GetSpanId(), s.GetParentSpanId(), r.TraceID, r.SpanID)
	}
	if s.GetStatus().GetCode().String() != "STATUS_CODE_ERROR" || s.GetStatus().GetMessage() != r.Cause || s.Attr("error.type").GetStringValue() != "no_available_workers" {
		t.Errorf("status %v, error.type %v: want an error span naming the code", s.GetStatus(), s.Attr("error.type"))
	}
	if _, ok := rcv.Child(s, "smg.pick"); ok {
		t.Error("a pick span for a request that picked no worker")
	}
}

// TestDisabledTracerExportsNothing: off, New returns a nil Tracer that takes records safely.
func TestDisabledTracerExportsNothing(t *testing.T) {
	tr, err := New(DefaultConfig())
	if err != nil || tr != nil {
		t.Fatalf("New(off) = %v, %v; want nil, nil", tr, err)
	}
	tr.Export(record(t, true))
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// discard is a SpanExporter that drops every batch.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkExport is the telemetry goroutine's cost of one sampled record of two tries: its
// five spans and the event built and queued for the batcher (the export itself is the SDK's goroutine's).
func BenchmarkExport(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Enable = true
	tr := newTracer(cfg, discard{})
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	r := record(b, true)
	b.ReportAllocs()
	for b.Loop() {
		tr.Export(r)
	}
}
