package fastpath

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/promlabel"
)

// Routes the metrics distinguish. Requests to any other path count as routeOther.
const (
	routeChat = iota
	routeCompletions
	routeGenerate
	// The engine pass-through routes (server.go): forwarded like generation.
	routeEmbeddings
	routeRerank
	routeRerankNative
	routeClassify
	routeTokenize
	routeDetokenize
	routeResponses
	routeMessages
	routeModels
	routeWorkers
	routeProbe
	routeOther
	numRoutes
)

var routePaths = [numRoutes]string{"/v1/chat/completions", "/v1/completions", "/generate",
	"/v1/embeddings", "/v1/rerank", "/rerank", "/v1/classify", "/v1/tokenize", "/v1/detokenize", "/v1/responses", "/v1/messages",
	"/v1/models", "/workers", "/health", "other"}

// passThrough reports the engine pass-through routes: forwarded like generation, not
// through the PD handover.
func passThrough(route int) bool { return route >= routeEmbeddings && route <= routeMessages }

// Statuses with their own series; everything else is counted as "other".
var countedStatuses = [...]int{200, 202, 206, 400, 401, 404, 405, 409, 413, 429, 500, 501, 502, 503, 504}

const numStatusSlots = len(countedStatuses) + 1

func statusSlot(status int) int {
	for i, s := range countedStatuses {
		if s == status {
			return i
		}
	}
	return len(countedStatuses)
}

// httpMetrics are created once at start-up so that the hot path only increments.
type httpMetrics struct {
	// requests are created on a route/status pair's first request, so /metrics shows only
	// the statuses seen; after that the hot path only loads and increments.
	requests [numRoutes][numStatusSlots]atomic.Pointer[metrics.Counter]
	set      *metrics.Set
	duration [numRoutes]*metrics.PrometheusHistogram
	// grpcPrompt and grpcCached sum the prompt tokens of the gRPC engines' answers and those
	// the engines found in their prefix caches (their usage): the real hit rate, beside
	// cache_aware's predicted one in event mode.
	grpcPrompt, grpcCached *metrics.Counter
}

// Buckets of smg_http_request_duration_seconds: from sub-millisecond gateway errors to
// half-hour generations.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

func newHTTPMetrics(set *metrics.Set) *httpMetrics {
	m := &httpMetrics{
		set:        set,
		grpcPrompt: set.GetOrCreateCounter(`smg_grpc_prompt_tokens_total`),
		grpcCached: set.GetOrCreateCounter(`smg_grpc_cached_prompt_tokens_total`),
	}
	for r := range numRoutes {
		m.duration[r] = set.GetOrCreatePrometheusHistogramExt(`smg_http_request_duration_seconds{path=`+promlabel.Quote(routePaths[r])+`}`, durationBuckets)
	}
	return m
}

// observe counts a request on route that ended with status after d.
func (m *httpMetrics) observe(route, status int, d time.Duration) {
	m.requestCounter(route, statusSlot(status)).Inc()
	m.duration[route].Update(d.Seconds())
}

// requestCounter returns the counter of a route and status slot, registering it on first use.
func (m *httpMetrics) requestCounter(route, slot int) *metrics.Counter {
	if c := m.requests[route][slot].Load(); c != nil {
		return c
	}
	status := "other"
	if slot < len(countedStatuses) {
		status = fmt.Sprint(countedStatuses[slot])
	}
	c := m.set.GetOrCreateCounter(`smg_http_requests_total{path=` + promlabel.Quote(routePaths[route]) + `,status_code=` + promlabel.Quote(status) + `}`)
	m.requests[route][slot].Store(c)
	return c
}
