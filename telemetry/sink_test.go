package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/worker"
)

// testSink is a sink over a fresh metrics set, a text logger into a buffer and a fake clock.
type testSink struct {
	*Sink
	set   *metrics.Set
	logs  *bytes.Buffer
	clock *clock.Fake
}

func newTestSink(t *testing.T, edit func(*Config)) *testSink {
	t.Helper()
	ts := &testSink{set: metrics.NewSet(), logs: &bytes.Buffer{}, clock: clock.NewFake()}
	cfg := DefaultConfig()
	cfg.Metrics, cfg.Clock = ts.set, ts.clock
	cfg.Logger = slog.New(slog.NewTextHandler(ts.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts.Sink = s
	return ts
}

// consumeAll runs the sink over what was submitted and stops it.
func (ts *testSink) consumeAll() {
	ts.Start()
	ts.Close()
}

func (ts *testSink) metric(t *testing.T, line string) {
	t.Helper()
	var b bytes.Buffer
	ts.set.WritePrometheus(&b)
	if !strings.Contains(b.String(), line+"\n") {
		t.Fatalf("no %q in\n%s", line, b.String())
	}
}

func record(id, model, route string, status int) Record {
	r := Record{Model: model, Route: route, Status: status, Attempts: 1, PromptTokens: -1, CompletionTokens: -1, CachedTokens: -1}
	r.IDLen = uint8(copy(r.RequestID[:], id))
	return r
}

const ms = int64(time.Millisecond)

// testWorker registers a worker at url in a registry of its own.
func testWorker(t *testing.T, url string) *worker.Worker {
	t.Helper()
	cfg := worker.DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	reg, err := worker.NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	spec := worker.Spec{URL: url, ModelID: "m"}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	w, err := reg.Add(context.Background(), spec, worker.StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestStreamedRecordFeedsTheModelSeries(t *testing.T) {
	ts := newTestSink(t, nil)
	r := record("chatcmpl-1", "m1", "/v1/chat/completions", 200)
	r.Stream = true
	r.Start, r.Admitted, r.Picked, r.FirstToken, r.End = 1000*ms, 1000*ms, 1001*ms, 1050*ms, 1250*ms
	r.PromptTokens, r.CompletionTokens = 12, 11
	ts.Submit(&r)
	ts.consumeAll()
	l := `router_type="http",backend_type="regular",model="m1",endpoint="chat"`
	ts.metric(t, `smg_router_requests_total{`+l+`,streaming="true"} 1`)
	ts.metric(t, `smg_router_ttft_seconds_bucket{`+l+`,le="0.05"} 1`)
	ts.metric(t, `smg_router_ttft_seconds_bucket{`+l+`,le="0.025"} 0`)
	// (1250-1050) ms over 10 gaps: 20 ms per output token.
	ts.metric(t, `smg_router_tpot_seconds_bucket{`+l+`,le="0.02"} 1`)
	ts.metric(t, `smg_router_tpot_seconds_bucket{`+l+`,le="0.015"} 0`)
	ts.metric(t, `smg_router_generation_duration_seconds_sum{`+l+`} 0.2`)
	ts.metric(t, `smg_router_request_duration_seconds_sum{`+l+`} 0.25`)
	ts.metric(t, `smg_router_tokens_total{`+l+`,token_type="input"} 12`)
	ts.metric(t, `smg_router_tokens_total{`+l+`,token_type="output"} 11`)
}

func TestWholeAnswerHasNoTTFTAndUnknownTokensCountNothing(t *testing.T) {
	ts := newTestSink(t, nil)
	r := record("gen-1", "m1", "/generate", 200)
	r.Start, r.FirstToken, r.End = 10*ms, 30*ms, 30*ms
	r.GRPC, r.PD = true, true
	ts.Submit(&r)
	ts.consumeAll()
	l := `router_type="grpc",backend_type="pd",model="m1",endpoint="generate"`
	ts.metric(t, `smg_router_requests_total{`+l+`,streaming="false"} 1`)
	ts.metric(t, `smg_router_ttft_seconds_count{`+l+`} 0`)
	ts.metric(t, `smg_router_request_duration_seconds_count{`+l+`} 1`)
	ts.metric(t, `smg_router_tokens_total{`+l+`,token_type="output"} 0`)
}

func TestErrorsRetriesAndRejectionsAreCountedByReason(t *testing.T) {
	ts := newTestSink(t, nil)
	w := testWorker(t, "http://w1:8000")
	for _, c := range []struct {
		status   int
		code     string
		attempts uint8
	}{
		{429, "admission_queue_full", 0},
		{429, "rate_limit_exceeded", 0},
		{503, "admission_queue_timeout", 0},
		{502, "worker_unreachable", 3},
		{500, "", 2}, // the worker's own answer, after a retry
		{499, "", 1},
		{200, "worker_stream_failed", 1}, // a stream broken off after its 200
	} {
		r := record("x", "m", "/v1/completions", c.status)
		r.ErrorCode, r.Attempts, r.Worker = c.code, c.attempts, w
		ts.Submit(&r)
	}
	ts.consumeAll()
	l := `router_type="http",backend_type="regular",model="m",endpoint="completions"`
	ts.metric(t, `smg_admission_rejections_total{reason="queue_full"} 1`)
	ts.metric(t, `smg_admission_rejections_total{reason="rate_limited"} 1`)
	ts.metric(t, `smg_admission_rejections_total{reason="queue_timeout"} 1`)
	ts.metric(t, `smg_router_request_errors_total{`+l+`,error_type="rate_limited"} 2`)
	ts.metric(t, `smg_router_request_errors_total{`+l+`,error_type="timeout"} 1`)
	ts.metric(t, `smg_router_request_errors_total{`+l+`,error_type="backend_error"} 3`)
	ts.metric(t, `smg_router_request_errors_total{`+l+`,error_type="client_closed"} 1`)
	ts.metric(t, `smg_worker_retries_total{worker_type="regular",endpoint="completions"} 3`)
}

// TestRetriesExhaustedAndBackoffs: a request that used its last retry counts once, and
// each pause taken before a retry is observed under its retry's number.
func TestRetriesExhaustedAndBackoffs(t *testing.T) {
	ts := newTestSink(t, nil)
	w := testWorker(t, "http://w1:8000")
	failed := record("a", "m", "/v1/chat/completions", 503)
	failed.Worker, failed.Attempts, failed.RetriesExhausted = w, 3, true
	failed.Tries[0].Backoff, failed.Tries[1].Backoff = 50*ms, 75*ms
	recovered := record("b", "m", "/v1/chat/completions", 200)
	recovered.Worker, recovered.Attempts = w, 2
	recovered.Tries[0].Backoff = 2 * ms
	ts.Submit(&failed)
	ts.Submit(&recovered)
	ts.consumeAll()
	ts.metric(t, `smg_worker_retries_exhausted_total{worker_type="regular",endpoint="chat"} 1`)
	ts.metric(t, `smg_worker_retry_backoff_seconds_count{attempt="1"} 2`)
	ts.metric(t, `smg_worker_retry_backoff_seconds_count{attempt="2"} 1`)
	ts.metric(t, `smg_worker_retry_backoff_seconds_bucket{attempt="1",le="0.005"} 1`)
	ts.metric(t, `smg_worker_retry_backoff_seconds_bucket{attempt="2",le="0.05"} 0`)
	ts.metric(t, `smg_worker_retry_backoff_seconds_bucket{attempt="2",le="0.1"} 1`)
}

// TestRateLimitDecisions: with admission limiting, every admitted request is allowed and
// every refusal rejected; without a limit there is no series.
func TestRateLimitDecisions(t *testing.T) {
	ts := newTestSink(t, func(c *Config) { c.AdmissionLimits = true })
	admitted := record("a", "m", "/generate", 200)
	admitted.Start, admitted.Admitted = 1, 2
	refused := record("b", "m", "/generate", 429)
	refused.ErrorCode = "rate_limit_exceeded"
	timedOut := record("c", "m", "/generate", 503)
	timedOut.ErrorCode = "admission_queue_timeout"
	notRouted := record("d", "", "", 400) // refused before admission: no decision
	for _, r := range []*Record{&admitted, &refused, &timedOut, &notRouted} {
		ts.Submit(r)
	}
	ts.consumeAll()
	ts.metric(t, `smg_http_rate_limit_total{result="allowed"} 1`)
	ts.metric(t, `smg_http_rate_limit_total{result="rejected"} 2`)

	off := newTestSink(t, nil)
	off.Submit(&admitted)
	off.consumeAll()
	var b bytes.Buffer
	off.set.WritePrometheus(&b)
	if strings.Contains(b.String(), "smg_http_rate_limit_total") {
		t.Fatalf("rate-limit series without a limit:\n%s", b.String())
	}
}

func TestAccessLogLine(t *testing.T) {
	ts := newTestSink(t, nil)
	r := record("chatcmpl-abc", "m1", "/v1/chat/completions", 200)
	r.Worker = testWorker(t, "http://w1:8000")
	r.Stream = true
	r.Start, r.FirstToken, r.End = 1000*ms, 1012*ms+345_000, 1100*ms
	r.PromptTokens, r.CompletionTokens = 5, 16
	r.TraceID[0] = 0xab
	ts.Submit(&r)
	ts.consumeAll()
	want := `level=INFO msg=Request request_id=chatcmpl-abc path=/v1/chat/completions model=m1 worker=http://w1:8000 status=200 error_code="" stream=true attempts=1 ttft_ms=12.345 duration_ms=100 prompt_tokens=5 completion_tokens=16 trace_id=ab000000000000000000000000000000`
	if !strings.Contains(ts.logs.String(), want+"\n") {
		t.Fatalf("log:\n%s\nwant the line\n%s", ts.logs.String(), want)
	}
}

func TestAccessLogOff(t *testing.T) {
	ts := newTestSink(t, func(c *Config) { c.AccessLog = false })
	ok := record("a", "m", "/generate", 200)
	bad := record("b", "m", "/generate", 503)
	bad.ErrorCode, bad.Cause = "no_available_workers", "no available workers for this request"
	ts.Submit(&ok)
	ts.Submit(&bad)
	ts.consumeAll()
	lines := strings.Split(strings.TrimSpace(ts.logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `level=ERROR msg="Request failed" request_id=b `) ||
		!strings.Contains(lines[0], `cause="no available workers for this request"`) {
		t.Fatalf("with the access log off, want only the error line; got:\n%s", ts.logs.String())
	}
}

func TestErrorLinesAreSampledPerCode(t *testing.T) {
	ts := newTestSink(t, func(c *Config) { c.AccessLog, c.ErrorLinesPerSecond = false, 2 })
	submit := func(n int, status int, code string) {
		for range n {
			r := record("id", "m", "/generate", status)
			r.ErrorCode = code
			ts.Submit(&r)
		}
	}
	submit(5, 502, "worker_unreachable")
	submit(1, 400, "invalid_request")
	ts.Start()
	waitFor(t, func() bool { return len(ts.Sink.queue) == 0 })
	ts.clock.Advance(time.Second) // the window ends: the ticker reports the suppressed lines
	submit(1, 502, "worker_unreachable")
	ts.Close()
	log := ts.logs.String()
	if n := strings.Count(log, `msg="Request failed"`); n != 4 {
		t.Fatalf("%d error lines, want 2 + 1 of worker_unreachable and 1 of invalid_request:\n%s", n, log)
	}
	if !strings.Contains(log, `level=WARN msg="Request failed" request_id=id path=/generate model=m worker="" status=400`) {
		t.Fatalf("a 4xx is logged at WARN:\n%s", log)
	}
	if !strings.Contains(log, `level=WARN msg="Request failure lines suppressed" error_code=worker_unreachable suppressed=3 logged=2 window=1s`) {
		t.Fatalf("no suppressed count:\n%s", log)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFullQueueDropsAndCounts(t *testing.T) {
	ts := newTestSink(t, func(c *Config) { c.QueueSize = 2 })
	r := record("a", "m", "/generate", 200)
	for i, want := range []bool{true, true, false, false} {
		if got := ts.Submit(&r); got != want {
			t.Fatalf("Submit %d = %v, want %v", i, got, want)
		}
	}
	ts.metric(t, `smg_telemetry_records_dropped_total 2`)
	ts.consumeAll()
	ts.metric(t, `smg_router_requests_total{router_type="http",backend_type="regular",model="m",endpoint="generate",streaming="false"} 2`)
}

type recordingExporter struct{ ids []string }

func (e *recordingExporter) Export(r *Record) { e.ids = append(e.ids, r.ID()) }

func TestExportersTakeEveryRecordInOrder(t *testing.T) {
	e := &recordingExporter{}
	ts := newTestSink(t, func(c *Config) { c.Exporters = []Exporter{e} })
	for _, id := range []string{"a", "b", "c"} {
		r := record(id, "m", "/generate", 200)
		ts.Submit(&r)
	}
	ts.consumeAll()
	if strings.Join(e.ids, ",") != "a,b,c" {
		t.Fatalf("exported %v", e.ids)
	}
}

func TestSubmitDoesNotAllocate(t *testing.T) {
	ts := newTestSink(t, func(c *Config) { c.QueueSize = 1 })
	r := record("chatcmpl-1", "m", "/generate", 200)
	ts.Submit(&r) // fills the queue: the rest are drops, which must not allocate either
	if n := testing.AllocsPerRun(100, func() { ts.Submit(&r) }); n != 0 {
		t.Fatalf("Submit allocates %v times", n)
	}
	ts.consumeAll()
}

func TestConfigValidate(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"queue":       func(c *Config) { c.QueueSize = 0 },
		"error lines": func(c *Config) { c.ErrorLinesPerSecond = 0 },
		"no logger":   func(c *Config) { c.Logger = nil },
		"nil exporter": func(c *Config) {
			c.Exporters = []Exporter{nil}
		},
	} {
		c := DefaultConfig()
		edit(&c)
		if c.Validate() == nil {
			t.Errorf("%s: Validate accepted an invalid config", name)
		}
	}
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
}

func TestEndpoint(t *testing.T) {
	for route, want := range map[string]string{
		"/v1/chat/completions": "chat", "/v1/completions": "completions", "/generate": "generate",
		"/v1/rerank": "rerank", "/rerank": "rerank", "/v1/messages": "messages", "": "other",
	} {
		if got := Endpoint(route); got != want {
			t.Errorf("Endpoint(%q) = %q, want %q", route, got, want)
		}
	}
}

func TestBrokenStreamIsLoggedAsAnError(t *testing.T) {
	ts := newTestSink(t, func(c *Config) { c.AccessLog = false })
	r := record("s1", "m", "/v1/chat/completions", 200)
	r.Stream, r.ErrorCode, r.Cause = true, "worker_stream_failed", "worker http://w:1's stream broke"
	left := record("s2", "m", "/v1/chat/completions", 499) // the client left: not an error line
	ts.Submit(&r)
	ts.Submit(&left)
	ts.consumeAll()
	lines := strings.Split(strings.TrimSpace(ts.logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `level=ERROR msg="Request failed" request_id=s1 `) ||
		!strings.Contains(lines[0], `error_code=worker_stream_failed`) {
		t.Fatalf("want one ERROR line for the broken stream; got:\n%s", ts.logs.String())
	}
}
