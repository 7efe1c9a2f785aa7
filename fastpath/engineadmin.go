package fastpath

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/enginemetrics"
	"github.com/smg-go/smg/worker"
)

// The spec product's admin routes that ask the engines (its Extension and Admin API pages):
// GET /get_loads and POST /flush_cache ask every worker and sit behind the worker API's
// --api-key; GET /get_model_info, /get_server_info and /health_generate ask one healthy
// worker and, with GET /engine_metrics, are public, as the spec product has them. They run on
// the control plane: they may allocate, never touch the hot path's pools, and every call to a
// worker is bounded by FanOutConfig.Timeout.

// FanOutConfig bounds the admin routes that ask workers.
type FanOutConfig struct {
	// Concurrency is how many workers one route asks at a time. Default 32.
	Concurrency int
	// Timeout bounds one pass over every worker, and each single-worker call: a worker that
	// has not answered by then is reported as failed. Default 5 s.
	Timeout time.Duration
	// MaxEngineSeries bounds the samples GET /engine_metrics returns. Default 50,000.
	MaxEngineSeries int
}

// Defaults of FanOutConfig.
const (
	DefaultFanOutConcurrency = 32
	DefaultFanOutTimeout     = 5 * time.Second
)

// DefaultFanOutConfig returns the defaults above.
func DefaultFanOutConfig() FanOutConfig {
	return FanOutConfig{Concurrency: DefaultFanOutConcurrency, Timeout: DefaultFanOutTimeout, MaxEngineSeries: enginemetrics.DefaultMaxSeries}
}

// Validate refuses bounds that are not positive.
func (c *FanOutConfig) Validate() error {
	if c.Concurrency <= 0 || c.Timeout <= 0 || c.MaxEngineSeries <= 0 {
		return fmt.Errorf("fan-out bounds must be positive: concurrency %d, timeout %v, max engine series %d; start from fastpath.DefaultFanOutConfig() (%d, %v, %d)",
			c.Concurrency, c.Timeout, c.MaxEngineSeries, DefaultFanOutConcurrency, DefaultFanOutTimeout, enginemetrics.DefaultMaxSeries)
	}
	return nil
}

// engineAnswer is one worker's answer to an admin call.
type engineAnswer struct {
	status      int
	body        []byte
	contentType string
	err         error
}

// ok reports a 2xx answer.
func (a *engineAnswer) ok() bool { return a.err == nil && a.status >= 200 && a.status < 300 }

// problem describes a failed answer for the client.
func (a *engineAnswer) problem(path string) string {
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("%s answered %d: %s", path, a.status, truncate(a.body, 200))
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// askWorker sends one admin request to w, bounded by deadline: over HTTP with its
// credentials, or, for a gRPC worker, as the engine's gRPC call that answers it
// (GRPCBackend.Admin).
func (s *Server) askWorker(w *worker.Worker, method, path string, body []byte, deadline time.Time) engineAnswer {
	g := s.cfg.GRPC
	if g == nil || g.Admin == nil || !g.IsGRPC(w) {
		return askHTTPWorker(w, method, path, body, deadline)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	status, b, ct, err := g.Admin(ctx, w, method, path)
	if err != nil {
		return engineAnswer{err: fmt.Errorf("%s %s%s over gRPC: %w", method, w.URL, path, err)}
	}
	return engineAnswer{status: status, body: b, contentType: ct}
}

// askHTTPWorker sends one admin request to w with its credentials, bounded by deadline.
func askHTTPWorker(w *worker.Worker, method, path string, body []byte, deadline time.Time) engineAnswer {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(w.URL + path)
	req.SetHost(w.Host)
	req.Header.SetMethod(method)
	if auth := w.AuthHeader(); auth != nil {
		req.Header.SetBytesV("Authorization", auth)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	if err := w.Client.DoDeadline(req, resp, deadline); err != nil {
		if errors.Is(err, fasthttp.ErrTimeout) {
			err = fmt.Errorf("no answer within the admin routes' timeout: %w", err)
		}
		return engineAnswer{err: fmt.Errorf("%s %s%s: %w", method, w.URL, path, err)}
	}
	return engineAnswer{status: resp.StatusCode(), body: append([]byte(nil), resp.Body()...), contentType: string(resp.Header.ContentType())}
}

// fanOut asks every worker of ws (method path body), at most Concurrency at a time, all
// within one Timeout: a worker not asked by the deadline is reported as not asked. Answers
// come back in the order of ws.
func (s *Server) fanOut(ws []*worker.Worker, method, path string, body []byte) []engineAnswer {
	out := make([]engineAnswer, len(ws))
	deadline := time.Now().Add(s.cfg.FanOut.Timeout)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(s.cfg.FanOut.Concurrency, len(ws)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ws) {
					return
				}
				if time.Now().After(deadline) {
					out[i] = engineAnswer{err: fmt.Errorf("not asked: the pass over %d workers ran out of its %v", len(ws), s.cfg.FanOut.Timeout)}
					continue
				}
				out[i] = s.askWorker(ws[i], method, path, body, deadline)
			}
		}()
	}
	wg.Wait()
	return out
}

// serveAdmin serves an admin route with serve once the request's method (HEAD passes for
// GET) and, for a protected route, the worker API's --api-key check out; else it answers the
// client itself. Either way the request is observed as routeOther when it ends.
func (s *Server) serveAdmin(ctx *fasthttp.RequestCtx, method string, protected bool, serve func(*Server, *fasthttp.RequestCtx)) {
	defer func() { s.observe(routeOther, ctx.Response.StatusCode(), s.bridgedStart(ctx)) }()
	if string(ctx.Method()) != method && !(method == fasthttp.MethodGet && ctx.IsHead()) {
		s.methodNotAllowed(ctx, routeOther, method)
		return
	}
	if protected && !s.authorized(ctx) {
		return
	}
	serve(s, ctx)
}

// serveGetLoads is GET /get_loads: every worker's /v1/loads, with "load" the KV-cache tokens
// in use summed over its DP ranks, or -1 and the error when it did not answer (spec
// product's Admin API). A worker's failure is reported, never the route's.
func (s *Server) serveGetLoads(ctx *fasthttp.RequestCtx) {
	type workerLoad struct {
		Worker  string          `json:"worker"`
		Load    int64           `json:"load"`
		Details json.RawMessage `json:"details,omitempty"`
		Error   string          `json:"error,omitempty"`
	}
	ws := s.reg.Current().Workers
	answers := s.fanOut(ws, fasthttp.MethodGet, "/v1/loads", nil)
	out := make([]workerLoad, len(ws))
	for i, a := range answers {
		out[i] = workerLoad{Worker: ws[i].URL, Load: -1}
		if !a.ok() {
			out[i].Error = a.problem("/v1/loads")
			continue
		}
		used, err := usedTokens(a.body)
		if err != nil {
			out[i].Error = "/v1/loads answered a document that is not a load report: " + err.Error()
			continue
		}
		out[i].Load, out[i].Details = used, a.body
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"workers": out})
}

// usedTokens sums num_used_tokens over the ranks of a /v1/loads document.
func usedTokens(body []byte) (int64, error) {
	var doc struct {
		Loads []struct {
			Used *float64 `json:"num_used_tokens"`
		} `json:"loads"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, err
	}
	if len(doc.Loads) == 0 {
		return 0, errors.New(`no "loads" entries`)
	}
	// Summed as floats and capped: an engine reporting 1e19 tokens (or ranks whose counts
	// add past 2^63) must not wrap to a negative load (found by FuzzUsedTokens).
	var sum float64
	for _, l := range doc.Loads {
		if l.Used != nil && *l.Used > 0 {
			sum += math.Trunc(*l.Used)
		}
	}
	if sum >= math.MaxInt64 {
		return math.MaxInt64, nil
	}
	return int64(sum), nil
}

// serveFlushCache is POST /flush_cache: every worker's POST /flush_cache; 200 when all
// succeeded, 206 with the failures named when some did not (spec product's Admin API).
func (s *Server) serveFlushCache(ctx *fasthttp.RequestCtx) {
	type failure struct {
		Worker string `json:"worker"`
		Error  string `json:"error"`
	}
	ws := s.reg.Current().Workers
	answers := s.fanOut(ws, fasthttp.MethodPost, "/flush_cache", nil)
	successful, failed := []string{}, []failure{}
	for i, a := range answers {
		if a.ok() {
			successful = append(successful, ws[i].URL)
		} else {
			failed = append(failed, failure{ws[i].URL, a.problem("/flush_cache")})
		}
	}
	body := map[string]any{
		"status": "success", "workers_flushed": len(successful),
		"total_http_workers": len(ws), "total_workers": len(ws),
		"message": fmt.Sprintf("Successfully flushed cache on all %d HTTP workers", len(ws)),
	}
	status := fasthttp.StatusOK
	if len(failed) > 0 {
		status = fasthttp.StatusPartialContent
		body["status"], body["successful"], body["failed"] = "partial_success", successful, failed
		body["message"] = fmt.Sprintf("Flushed cache on %d of %d HTTP workers", len(successful), len(ws))
	}
	writeJSON(ctx, status, body)
}

// oneWorkerTries bounds how many healthy workers a single-worker admin route tries.
const oneWorkerTries = 3

// healthyWorkers lists the routable workers that serve model (all of them when model is
// empty; a worker whose models are unknown serves any), starting at a rotating offset so
// that successive calls spread over the fleet.
func (s *Server) healthyWorkers(model string) []*worker.Worker {
	ws := s.reg.Current().Workers
	var out []*worker.Worker
	start := int(s.adminCursor.Add(1))
	for i := range ws {
		w := ws[(start+i)%len(ws)]
		if model != "" && len(w.Models) > 0 && !serves(w, model) {
			continue
		}
		if w.Routable() && w.Type() != worker.TypePrefill {
			out = append(out, w)
		}
	}
	return out
}

// serveFromOneWorker is GET /get_model_info and /get_server_info: the answer of one healthy
// worker (?model= picks among the workers of a model), relayed as is. A worker that cannot
// be reached or answers 5xx is replaced by the next, up to oneWorkerTries.
func (s *Server) serveFromOneWorker(ctx *fasthttp.RequestCtx) {
	path := string(routePath(ctx))
	ws := s.healthyWorkers(string(ctx.QueryArgs().Peek("model")))
	if len(ws) == 0 {
		writeError(ctx, errNoWorkers, "no healthy worker to ask for "+path)
		return
	}
	var last engineAnswer
	for _, w := range ws[:min(len(ws), oneWorkerTries)] {
		last = s.askWorker(w, fasthttp.MethodGet, path, nil, time.Now().Add(s.cfg.FanOut.Timeout))
		if last.err == nil && last.status < 500 {
			ctx.SetStatusCode(last.status)
			ctx.SetContentType(last.contentType)
			ctx.Response.Header.Set(headerRoutedWorker, w.URL)
			ctx.SetBody(last.body)
			return
		}
	}
	writeError(ctx, errUpstreamUnreachable, "no healthy worker answered "+path+": "+last.problem(path))
}

// serveHealthGenerate is GET /health_generate: a tiny generation through one healthy worker.
// SGLang engines serve their own GET /health_generate (a one-token generation); an engine
// without it (vLLM: 404) is asked for a one-token completion instead.
func (s *Server) serveHealthGenerate(ctx *fasthttp.RequestCtx) {
	ws := s.healthyWorkers("")
	if len(ws) == 0 {
		writeError(ctx, errNoWorkers, "no healthy worker to run a generation on")
		return
	}
	var problem string
	for _, w := range ws[:min(len(ws), oneWorkerTries)] {
		deadline := time.Now().Add(s.cfg.FanOut.Timeout)
		a := s.askWorker(w, fasthttp.MethodGet, "/health_generate", nil, deadline)
		path := "/health_generate"
		if a.err == nil && (a.status == fasthttp.StatusNotFound || a.status == fasthttp.StatusMethodNotAllowed) {
			path = "/v1/completions"
			a = s.askWorker(w, fasthttp.MethodPost, path, tinyCompletion(w), deadline)
		}
		if a.ok() {
			writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok", "worker": w.URL, "route": path})
			return
		}
		problem = w.URL + ": " + a.problem(path)
	}
	writeError(ctx, apiError{fasthttp.StatusServiceUnavailable, "service_unavailable", "health_generate_failed"}, "the test generation failed: "+problem)
}

// tinyCompletion is a one-token completion for w's model.
func tinyCompletion(w *worker.Worker) []byte {
	b := []byte(`{"prompt":"ping","max_tokens":1`)
	if len(w.Models) > 0 {
		b = append(b, `,"model":`...)
		b = strconv.AppendQuote(b, w.Models[0])
	}
	return append(b, '}')
}

// serveEngineMetrics is GET /engine_metrics: every worker's Prometheus /metrics, each sample
// labelled worker="<url>", families merged (worker/enginemetrics). A worker that did not
// answer is named in a comment line; the route itself answers 200.
func (s *Server) serveEngineMetrics(ctx *fasthttp.RequestCtx) {
	ws := s.reg.Current().Workers
	answers := s.fanOut(ws, fasthttp.MethodGet, "/metrics", nil)
	m := enginemetrics.Merger{MaxSeries: s.cfg.FanOut.MaxEngineSeries}
	var notes bytes.Buffer
	for i, a := range answers {
		if !a.ok() {
			fmt.Fprintf(&notes, "# worker %s: %s\n", ws[i].URL, oneLine(a.problem("/metrics")))
			continue
		}
		m.Add(ws[i].URL, a.body)
	}
	if m.Dropped > 0 {
		fmt.Fprintf(&notes, "# %d samples dropped beyond the bound of %d series\n", m.Dropped, s.cfg.FanOut.MaxEngineSeries)
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	w := ctx.Response.BodyWriter()
	_, _ = w.Write(notes.Bytes())
	_, _ = m.WriteTo(w)
}

func oneLine(s string) string { return string(bytes.ReplaceAll([]byte(s), []byte("\n"), []byte(" "))) }
