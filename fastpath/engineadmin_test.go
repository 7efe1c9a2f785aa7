package fastpath

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/smg-go/smg/internal/testutil"
)

// newEngineFake is an in-memory engine answering with h.
func newEngineFake(t testing.TB, h fasthttp.RequestHandler) *fakeWorker {
	fw := &fakeWorker{ln: fasthttputil.NewInmemoryListener(), srv: &fasthttp.Server{Handler: h}}
	go func() { _ = fw.srv.Serve(fw.ln) }()
	t.Cleanup(func() { _ = fw.srv.Shutdown(); _ = fw.ln.Close() })
	return fw
}

// sglangFake serves the admin routes as an SGLang engine does, with used tokens as its load.
func sglangFake(t testing.TB, used string, calls *atomic.Int64) *fakeWorker {
	return newEngineFake(t, func(ctx *fasthttp.RequestCtx) {
		if calls != nil {
			calls.Add(1)
		}
		switch string(ctx.Path()) {
		case "/v1/loads":
			ctx.SetBodyString(`{"dp_rank_count":2,"loads":[{"dp_rank":0,"num_used_tokens":` + used + `},{"dp_rank":1,"num_used_tokens":1}]}`)
		case "/flush_cache":
			ctx.SetBodyString("Cache flushed.")
		case "/metrics":
			ctx.SetBodyString("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 2\n")
		case "/get_model_info":
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"model_path":"m1"}`)
		case "/health_generate":
			ctx.SetBodyString("")
		default:
			ctx.SetStatusCode(404)
		}
	})
}

// vllmFake answers like a vLLM engine: no /v1/loads, no /health_generate, no /flush_cache.
func vllmFake(t testing.TB, completions *atomic.Int64) *fakeWorker {
	return newEngineFake(t, func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/v1/completions":
			completions.Add(1)
			if !strings.Contains(string(ctx.PostBody()), `"max_tokens":1`) || !strings.Contains(string(ctx.PostBody()), `"model":"m1"`) {
				ctx.SetStatusCode(400)
				return
			}
			ctx.SetBodyString(`{"choices":[{"text":"x"}]}`)
		case "/metrics":
			ctx.SetBodyString("vllm:num_requests_running 1\n")
		default:
			ctx.SetStatusCode(404)
		}
	})
}

func TestGetLoadsReportsEveryWorkerAndTheirFailures(t *testing.T) {
	hang := newEngineFake(t, func(ctx *fasthttp.RequestCtx) { time.Sleep(2 * time.Second) })
	var n atomic.Int64
	g := newGateway(t, "round_robin", Config{FanOut: FanOutConfig{Timeout: 300 * time.Millisecond}},
		sglangFake(t, "40", &n), vllmFake(t, &n), hang)
	resp := g.do("GET", "/get_loads", "")
	var body struct {
		Workers []struct {
			Worker  string
			Load    int64
			Details map[string]any
			Error   string
		}
	}
	decodeBody(t, resp.Body(), &body)
	if resp.StatusCode() != 200 || len(body.Workers) != 3 {
		t.Fatalf("%d %s", resp.StatusCode(), resp.Body())
	}
	w0, w1, w2 := body.Workers[0], body.Workers[1], body.Workers[2]
	if w0.Worker != "http://10.0.0.1:8000" || w0.Load != 41 || w0.Details["dp_rank_count"] != 2.0 || w0.Error != "" {
		t.Errorf("sglang worker: %+v", w0)
	}
	if w1.Load != -1 || !strings.Contains(w1.Error, "404") {
		t.Errorf("vllm worker (no /v1/loads): %+v", w1)
	}
	if w2.Load != -1 || !strings.Contains(w2.Error, "timeout") {
		t.Errorf("hanging worker: %+v", w2)
	}
}

func TestFlushCacheIsPartialWhenAWorkerFails(t *testing.T) {
	var n atomic.Int64
	g := newGateway(t, "round_robin", Config{}, sglangFake(t, "1", nil), sglangFake(t, "1", nil))
	resp := g.do("POST", "/flush_cache", "")
	if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), `"workers_flushed":2`) {
		t.Fatalf("all flushed: %d %s", resp.StatusCode(), resp.Body())
	}
	g.setFake("10.0.0.3:8000", vllmFake(t, &n))
	g.addWorker("http://10.0.0.3:8000", "m1")
	resp = g.do("POST", "/flush_cache", "")
	var body struct {
		Status     string
		Flushed    int `json:"workers_flushed"`
		Successful []string
		Failed     []struct{ Worker, Error string }
	}
	decodeBody(t, resp.Body(), &body)
	if resp.StatusCode() != 206 || body.Status != "partial_success" || body.Flushed != 2 || len(body.Successful) != 2 ||
		len(body.Failed) != 1 || body.Failed[0].Worker != "http://10.0.0.3:8000" || !strings.Contains(body.Failed[0].Error, "404") {
		t.Fatalf("partial flush: %d %s", resp.StatusCode(), resp.Body())
	}
}

func TestAdminRoutesAuthAndMethods(t *testing.T) {
	g := newGateway(t, "round_robin", Config{APIKey: "admin"}, sglangFake(t, "1", nil))
	for _, c := range []struct {
		method, path string
		hdr          []string
		status       int
	}{
		{"GET", "/get_loads", nil, 401},
		{"POST", "/flush_cache", nil, 401},
		{"GET", "/get_loads", []string{"Authorization", "Bearer admin"}, 200},
		{"POST", "/flush_cache", []string{"Authorization", "Bearer admin"}, 200},
		{"GET", "/get_model_info", nil, 200}, // public, as in the spec product
		{"GET", "/engine_metrics", nil, 200},
		{"GET", "/health_generate", nil, 200},
		{"POST", "/get_loads", []string{"Authorization", "Bearer admin"}, 405},
		{"GET", "/flush_cache", []string{"Authorization", "Bearer admin"}, 405},
		{"DELETE", "/get_server_info", nil, 405},
	} {
		if r := g.do(c.method, c.path, "", c.hdr...); r.StatusCode() != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, r.StatusCode(), r.Body(), c.status)
		}
	}
}

func TestOneWorkerRoutesSkipFailingWorkers(t *testing.T) {
	var n atomic.Int64
	g := newGateway(t, "round_robin", Config{}, vllmFake(t, &n), sglangFake(t, "1", nil))
	for range 4 { // the rotation starts at either worker; both must end at a working answer
		resp := g.do("GET", "/get_model_info", "")
		if resp.StatusCode() == 404 { // vLLM has no such route: its 404 is relayed as is
			continue
		}
		if resp.StatusCode() != 200 || string(resp.Body()) != `{"model_path":"m1"}` || string(resp.Header.Peek(headerRoutedWorker)) != "http://10.0.0.2:8000" {
			t.Fatalf("GET /get_model_info: %d %s from %s", resp.StatusCode(), resp.Body(), resp.Header.Peek(headerRoutedWorker))
		}
	}
	// /health_generate: SGLang runs its own, vLLM gets a one-token completion.
	for range 4 {
		resp := g.do("GET", "/health_generate", "")
		if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), `"status":"ok"`) {
			t.Fatalf("GET /health_generate: %d %s", resp.StatusCode(), resp.Body())
		}
	}
	if n.Load() == 0 {
		t.Fatal("the vLLM worker was never asked for a completion")
	}
	for _, w := range g.reg.Current().Workers {
		g.reg.SetStatus(w.ID, 2) // not ready
	}
	testutil.Eventually(t, "workers not ready", func() bool { return g.reg.Current().ReadyCount() == 0 })
	if r := g.do("GET", "/health_generate", ""); r.StatusCode() != 503 || string(r.Header.Peek(headerErrorCode)) != "no_available_workers" {
		t.Fatalf("without healthy workers: %d %s", r.StatusCode(), r.Body())
	}
}

func TestEngineMetricsLabelsEveryWorker(t *testing.T) {
	var n atomic.Int64
	broken := newEngineFake(t, func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(500) })
	g := newGateway(t, "round_robin", Config{}, broken, vllmFake(t, &n))
	resp := g.do("GET", "/engine_metrics", "")
	want := "# worker http://10.0.0.1:8000: /metrics answered 500: \n" +
		"vllm:num_requests_running{worker=\"http://10.0.0.2:8000\"} 1\n"
	if resp.StatusCode() != 200 || string(resp.Body()) != want {
		t.Fatalf("GET /engine_metrics: %d\n%s\nwant\n%s", resp.StatusCode(), resp.Body(), want)
	}
}
