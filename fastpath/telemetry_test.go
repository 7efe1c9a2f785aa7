package fastpath

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/telemetry"
	"github.com/smg-go/smg/worker"
)

// usageStream is an engine's SSE answer whose last chunk carries its usage.
var usageStream = []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n" +
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"}}]}\n\n" +
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\n" +
	"data: [DONE]\n\n")

// newUsageWorker is a fake engine answering okBody (usage 1 + 1) whole, or usageStream
// (usage 7 + 3) for "stream":true, with the status in status (200 when 0).
func newUsageWorker(t testing.TB, name string, answer *atomic.Int32) *fakeWorker {
	fw := &fakeWorker{name: name, ln: newTestListener(t)}
	fw.srv = &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		status := 200
		if st := answer.Load(); st != 0 {
			status = int(st)
		}
		ctx.SetStatusCode(status)
		if status == 200 && bytesContains(ctx.PostBody(), `"stream":true`) {
			ctx.SetContentType("text/event-stream")
			ctx.Response.SetBodyRaw(usageStream)
			return
		}
		ctx.SetContentType("application/json")
		ctx.Response.SetBodyRaw(okBody)
	}}
	go func() { _ = fw.srv.Serve(fw.ln) }()
	t.Cleanup(func() { _ = fw.srv.Shutdown(); _ = fw.ln.Close() })
	return fw
}

// collector is a telemetry exporter keeping every record.
type collector struct {
	mu   sync.Mutex
	recs []telemetry.Record
}

func (c *collector) Export(r *telemetry.Record) {
	c.mu.Lock()
	c.recs = append(c.recs, *r)
	c.mu.Unlock()
}

// next waits for the record after the n already read.
func (c *collector) next(t *testing.T, n *int) telemetry.Record {
	t.Helper()
	var r telemetry.Record
	testutil.Eventually(t, "the request's telemetry record", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.recs) <= *n {
			return false
		}
		r = c.recs[*n]
		return true
	})
	*n++
	return r
}

// newTelemetrySink is a started sink over set, the access log off, with exporters.
func newTelemetrySink(t testing.TB, set *metrics.Set, exporters ...telemetry.Exporter) *telemetry.Sink {
	cfg := telemetry.DefaultConfig()
	cfg.Metrics, cfg.Logger, cfg.AccessLog, cfg.Exporters = set, testutil.Quiet, false, exporters
	s, err := telemetry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func TestEveryGenerationRequestHandsOneRecord(t *testing.T) {
	var status atomic.Int32
	c := &collector{}
	sink := newTelemetrySink(t, metrics.NewSet(), c)
	g := newGateway(t, "round_robin", Config{Telemetry: sink, Retry: fastRetries()},
		newUsageWorker(t, "a", &status), newUsageWorker(t, "b", &status), newUsageWorker(t, "c", &status))
	n := 0
	checkTimes := func(r telemetry.Record) {
		t.Helper()
		if !(r.Start > 0 && r.Start <= r.Admitted && r.Admitted <= r.Picked && r.Picked <= r.FirstToken && r.FirstToken <= r.End) {
			t.Fatalf("times out of order: start %d admitted %d picked %d first token %d end %d", r.Start, r.Admitted, r.Picked, r.FirstToken, r.End)
		}
	}

	resp := g.do("POST", "/v1/chat/completions", chatBody)
	r := c.next(t, &n)
	if r.Status != 200 || r.Model != "m1" || r.Route != "/v1/chat/completions" || r.Stream || r.Attempts != 1 ||
		r.Worker == nil || !strings.HasPrefix(r.Worker.URL, "http://10.0.0.") || r.PromptTokens != 1 || r.CompletionTokens != 1 || r.ErrorCode != "" {
		t.Fatalf("whole answer: record %+v", r)
	}
	if tr := r.Tries[0]; tr.Worker != r.Worker || tr.Status != 200 || tr.Sent < r.Picked || tr.Ended < tr.Sent || tr.Ended > r.End || tr.Backoff != 0 || r.RetriesExhausted {
		t.Fatalf("whole answer: try %+v, exhausted %v", tr, r.RetriesExhausted)
	}
	if id := string(resp.Header.Peek("X-Request-Id")); id == "" || r.ID() != id {
		t.Fatalf("record id %q, the client saw %q", r.ID(), id)
	}
	checkTimes(r)

	g.do("POST", "/v1/chat/completions", `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "client-id-1")
	r = c.next(t, &n)
	if r.Status != 200 || !r.Stream || r.ID() != "client-id-1" || r.PromptTokens != 7 || r.CompletionTokens != 3 {
		t.Fatalf("stream: record %+v", r)
	}
	checkTimes(r)

	resp = g.do("POST", "/v1/chat/completions", `{"model":"nope","messages":[]}`)
	r = c.next(t, &n)
	if r.Status != 404 || r.ErrorCode != "model_not_found" || r.Cause == "" || r.Model != "" || r.Attempts != 0 || r.Worker != nil {
		t.Fatalf("model not found: record %+v", r)
	}
	if id := string(resp.Header.Peek("X-Request-Id")); id == "" || r.ID() != id {
		t.Fatalf("error answer: record id %q, the client saw %q", r.ID(), id)
	}

	status.Store(503) // tried on each of the three workers, then the last one's answer
	g.do("POST", "/v1/completions", `{"model":"m1","prompt":"hi"}`)
	r = c.next(t, &n)
	if r.Status != 503 || r.Attempts != 3 || r.ErrorCode != "" || r.PromptTokens != -1 {
		t.Fatalf("retried worker error: record %+v", r)
	}
	if !r.RetriesExhausted || r.Policy != "round_robin" || r.CacheInput != 0 {
		t.Fatalf("retried worker error: exhausted %v, policy %q", r.RetriesExhausted, r.Policy)
	}
	seen := map[*worker.Worker]bool{}
	for i, try := range r.Tries[:3] {
		if try.Worker == nil || seen[try.Worker] || try.Status != 503 || try.Failure != telemetry.TryAnswered ||
			try.Sent < r.Picked || try.Ended < try.Sent || try.Backoff <= 0 || (i > 0 && try.Sent < r.Tries[i-1].Ended) {
			t.Fatalf("try %d of the retried request: %+v", i, try)
		}
		seen[try.Worker] = true
	}
	if r.Tries[3] != (telemetry.Try{}) {
		t.Fatalf("a fourth try: %+v", r.Tries[3])
	}

	status.Store(0)

	// No request above handed a second record: the next one is the next request's.
	g.do("POST", "/v1/chat/completions", chatBody, "X-Request-Id", "sentinel")
	if r = c.next(t, &n); r.ID() != "sentinel" {
		t.Fatalf("a record of an earlier request came after it: %+v", r)
	}
}

func TestUnreachableWorkerHandsARecord(t *testing.T) {
	c := &collector{}
	sink := newTelemetrySink(t, metrics.NewSet(), c)
	g := newGateway(t, "round_robin", Config{Telemetry: sink, Retry: fastRetries()})
	g.addWorker("http://10.0.0.8:8000", "m1") // nothing listens: refused
	g.addWorker("http://10.0.0.9:8000", "m1")
	g.do("POST", "/generate", `{"text":"hi"}`)
	n := 0
	r := c.next(t, &n)
	if r.Status != 502 || r.ErrorCode != "worker_unreachable" || r.Attempts != 2 || r.Cause == "" || r.Model != "m1" {
		t.Fatalf("unreachable worker: record %+v", r)
	}
	if !r.RetriesExhausted || r.Tries[0].Failure != telemetry.TryUnreachable || r.Tries[1].Failure != telemetry.TryUnreachable || r.Tries[0].Backoff <= 0 {
		t.Fatalf("unreachable workers: exhausted %v, tries %+v", r.RetriesExhausted, r.Tries[:2])
	}
}

func TestAdmissionRejectHandsARecord(t *testing.T) {
	c := &collector{}
	sink := newTelemetrySink(t, metrics.NewSet(), c)
	g := newGateway(t, "round_robin", Config{Telemetry: sink, Admission: AdmissionConfig{MaxConcurrent: 1, QueueTimeout: time.Millisecond}},
		newUsageWorker(t, "a", new(atomic.Int32)))
	var holder parkedWaiter
	if _, st := g.srv.adm.admitOrPark(&holder, evloop.Unparker{}); st != admitted {
		t.Fatal("the free slot was refused")
	}
	defer g.srv.adm.release()
	resp := g.do("POST", "/v1/chat/completions", chatBody)
	n := 0
	r := c.next(t, &n)
	if resp.StatusCode() != 503 || r.Status != 503 || r.ErrorCode != "admission_queue_timeout" || r.Admitted != 0 || r.Attempts != 0 || r.Model != "m1" {
		t.Fatalf("admission reject: status %d, record %+v", resp.StatusCode(), r)
	}
}

func TestPDRequestHandsOneRecord(t *testing.T) {
	c := &collector{}
	sink := newTelemetrySink(t, metrics.NewSet(), c)
	g := newPDGatewayConfig(t, Config{Telemetry: sink, Retry: DefaultRetryConfig()},
		[]*pdFake{newPDFake(t, nil)}, []*pdFake{newPDFake(t, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"})
	resp := g.do("POST", "/v1/chat/completions", chatBody)
	n := 0
	r := c.next(t, &n)
	if resp.StatusCode() != 200 || r.Status != 200 || !r.PD || r.Model != "m1" || r.Attempts != 1 ||
		r.Worker == nil || r.Worker.Type() != worker.TypeDecode || r.ID() != string(resp.Header.Peek("X-Request-Id")) {
		t.Fatalf("PD: status %d, record %+v", resp.StatusCode(), r)
	}
	g.do("POST", "/v1/chat/completions", chatBody, "X-Request-Id", "second")
	if r = c.next(t, &n); r.ID() != "second" {
		t.Fatalf("the PD request handed a second record: %+v", r)
	}
}

// TestClientGoneMidStreamHandsOneRecord: a client that hangs up in the middle of a relayed
// stream ends its request once, with a record of the stream and its first token, and the
// status 499 (client closed request) rather than the 200 the stream began with.
func TestClientGoneMidStreamHandsOneRecord(t *testing.T) {
	c := &collector{}
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{Telemetry: newTelemetrySink(t, metrics.NewSet(), c)}, fw)
	conn, br := openStream(t, g)
	fw.events <- `{"n":1}`
	readEvent(t, br)
	conn.Close()
	go func() { // the worker goes on until the gateway drops its stream
		for {
			select {
			case fw.events <- `{"n":2}`:
			case <-fw.closed:
				return
			}
		}
	}()
	n := 0
	r := c.next(t, &n)
	if !r.Stream || r.Status != 499 || r.FirstToken == 0 || r.End < r.FirstToken || r.Attempts != 1 || r.ErrorCode != "" || r.RetriesExhausted {
		t.Fatalf("client gone mid-stream: record %+v", r)
	}
	testutil.Eventually(t, "nothing in flight", func() bool { return g.inFlight() == 0 })
	g.do("POST", "/v1/chat/completions", chatBody, "X-Request-Id", "after")
	if r = c.next(t, &n); r.ID() != "after" {
		t.Fatalf("the stream handed a second record: %+v", r)
	}
}

// TestRecordCarriesTheCacheMatch: with cache_aware the record carries the longest cached
// prefix its first pick found and the prompt's length (the trace's pick span reports them).
func TestRecordCarriesTheCacheMatch(t *testing.T) {
	c := &collector{}
	g := newGateway(t, "cache_aware", Config{Telemetry: newTelemetrySink(t, metrics.NewSet(), c)},
		newUsageWorker(t, "a", new(atomic.Int32)), newUsageWorker(t, "b", new(atomic.Int32)))
	body := `{"model":"m1","messages":[{"role":"user","content":"` + strings.Repeat("the same long question ", 20) + `"}]}`
	n := 0
	g.do("POST", "/v1/chat/completions", body)
	if r := c.next(t, &n); r.Policy != "cache_aware" || r.CacheMatched != 0 || r.CacheInput <= 0 {
		t.Fatalf("first request: policy %q, matched %d of %d; want nothing matched of a positive length", r.Policy, r.CacheMatched, r.CacheInput)
	}
	g.do("POST", "/v1/chat/completions", body)
	if r := c.next(t, &n); r.CacheInput <= 0 || r.CacheMatched != r.CacheInput {
		t.Fatalf("the same request again: matched %d of %d; want all of it", r.CacheMatched, r.CacheInput)
	}
}
