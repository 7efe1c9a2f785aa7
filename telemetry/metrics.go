package telemetry

import (
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/promlabel"
)

// The per-model series, named and labelled as the spec product names them (router_type,
// backend_type, model, endpoint), so its dashboards and alerts read them unchanged.
const (
	metricRequests   = "smg_router_requests_total"
	metricDuration   = "smg_router_request_duration_seconds"
	metricErrors     = "smg_router_request_errors_total"
	metricTTFT       = "smg_router_ttft_seconds"
	metricTPOT       = "smg_router_tpot_seconds"
	metricGeneration = "smg_router_generation_duration_seconds"
	metricTokens     = "smg_router_tokens_total"
	metricRetries    = "smg_worker_retries_total"
	metricExhausted  = "smg_worker_retries_exhausted_total"
	metricBackoff    = "smg_worker_retry_backoff_seconds"
	metricRejections = "smg_admission_rejections_total"
	metricRateLimit  = "smg_http_rate_limit_total"
)

// Buckets. Latency: from a sub-millisecond gateway error to a two-hour generation (the spec
// product's duration buckets). Time per output token: 1 ms to 2.5 s.
var (
	latencyBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
		10, 15, 30, 45, 60, 90, 120, 180, 240, 300, 480, 900, 1200, 1800, 2700, 3600, 5400, 7200}
	tpotBuckets = []float64{0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05,
		0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}
	// Retry pauses: from a millisecond to the 30 s --retry-max-backoff-ms default.
	backoffBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// seriesKey names one group of per-model series.
type seriesKey struct {
	model, endpoint string
	grpc, pd        bool
}

// modelSeries are one group's series, created on the group's first record.
type modelSeries struct {
	requests             [2]*metrics.Counter // by streaming: false, true
	duration, ttft, tpot *metrics.PrometheusHistogram
	generation           *metrics.PrometheusHistogram
	input, output        *metrics.Counter
	errors               map[string]*metrics.Counter // by error_type
	labels               string                      // the group's labels, for series made later
}

// modelMetrics turns records into the per-model series. Only the sink's goroutine uses it.
type modelMetrics struct {
	set        *metrics.Set
	series     map[seriesKey]*modelSeries
	retries    map[[2]string]*metrics.Counter // by worker_type, endpoint
	exhausted  map[[2]string]*metrics.Counter // by worker_type, endpoint
	backoff    []*metrics.PrometheusHistogram // by attempt - 1
	rejections map[string]*metrics.Counter    // by reason
	// allowed and rejected count admission's decisions when it limits anything (nil when not).
	allowed, rejected *metrics.Counter
}

func newModelMetrics(set *metrics.Set, admissionLimits bool) *modelMetrics {
	m := &modelMetrics{set: set, series: map[seriesKey]*modelSeries{},
		retries: map[[2]string]*metrics.Counter{}, exhausted: map[[2]string]*metrics.Counter{},
		rejections: map[string]*metrics.Counter{}}
	if admissionLimits {
		m.allowed = set.GetOrCreateCounter(metricRateLimit + `{result="allowed"}`)
		m.rejected = set.GetOrCreateCounter(metricRateLimit + `{result="rejected"}`)
	}
	return m
}

func (m *modelMetrics) observe(r *Record) {
	s := m.seriesOf(r)
	stream := 0
	if r.Stream {
		stream = 1
	}
	s.requests[stream].Inc()
	if r.End > r.Start {
		s.duration.Update(seconds(r.End - r.Start))
	}
	if r.Status < 400 && r.Stream && r.FirstToken > r.Start {
		// Only a stream shows its first token: a whole answer's comes with its last.
		s.ttft.Update(seconds(r.FirstToken - r.Start))
		if r.End > r.FirstToken {
			s.generation.Update(seconds(r.End - r.FirstToken))
			if r.CompletionTokens > 1 {
				s.tpot.Update(seconds(r.End-r.FirstToken) / float64(r.CompletionTokens-1))
			}
		}
	}
	if r.PromptTokens > 0 {
		s.input.Add(int(r.PromptTokens))
	}
	if r.CompletionTokens > 0 {
		s.output.Add(int(r.CompletionTokens))
	}
	if t := errorType(r); t != "" {
		c := s.errors[t]
		if c == nil {
			c = m.set.GetOrCreateCounter(metricErrors + `{` + s.labels + `,error_type=` + promlabel.Quote(t) + `}`)
			s.errors[t] = c
		}
		c.Inc()
	}
	if r.Attempts > 1 {
		m.workerCounter(m.retries, metricRetries, r).Add(int(r.Attempts) - 1)
	}
	if r.RetriesExhausted {
		m.workerCounter(m.exhausted, metricExhausted, r).Inc()
	}
	for i := range r.Tries {
		if b := r.Tries[i].Backoff; b > 0 {
			m.backoffHistogram(i + 1).Update(seconds(b))
		}
	}
	reason := rejectionReason(r.ErrorCode)
	if reason != "" {
		c := m.rejections[reason]
		if c == nil {
			c = m.set.GetOrCreateCounter(metricRejections + `{reason=` + promlabel.Quote(reason) + `}`)
			m.rejections[reason] = c
		}
		c.Inc()
	}
	switch {
	case m.allowed == nil:
	case reason != "":
		m.rejected.Inc()
	case r.Admitted != 0:
		m.allowed.Inc()
	}
}

// backoffHistogram is the histogram of the pauses before retry number attempt.
func (m *modelMetrics) backoffHistogram(attempt int) *metrics.PrometheusHistogram {
	for len(m.backoff) < attempt {
		n := len(m.backoff) + 1
		m.backoff = append(m.backoff, m.set.GetOrCreatePrometheusHistogramExt(
			metricBackoff+`{attempt="`+strconv.Itoa(n)+`"}`, backoffBuckets))
	}
	return m.backoff[attempt-1]
}

func (m *modelMetrics) seriesOf(r *Record) *modelSeries {
	k := seriesKey{model: r.Model, endpoint: Endpoint(r.Route), grpc: r.GRPC, pd: r.PD}
	if s := m.series[k]; s != nil {
		return s
	}
	routerType, backendType := "http", "regular"
	if k.grpc {
		routerType = "grpc"
	}
	if k.pd {
		backendType = "pd"
	}
	l := `router_type=` + promlabel.Quote(routerType) + `,backend_type=` + promlabel.Quote(backendType) +
		`,model=` + promlabel.Quote(k.model) + `,endpoint=` + promlabel.Quote(k.endpoint)
	s := &modelSeries{
		labels:     l,
		duration:   m.set.GetOrCreatePrometheusHistogramExt(metricDuration+`{`+l+`}`, latencyBuckets),
		ttft:       m.set.GetOrCreatePrometheusHistogramExt(metricTTFT+`{`+l+`}`, latencyBuckets),
		tpot:       m.set.GetOrCreatePrometheusHistogramExt(metricTPOT+`{`+l+`}`, tpotBuckets),
		generation: m.set.GetOrCreatePrometheusHistogramExt(metricGeneration+`{`+l+`}`, latencyBuckets),
		input:      m.set.GetOrCreateCounter(metricTokens + `{` + l + `,token_type="input"}`),
		output:     m.set.GetOrCreateCounter(metricTokens + `{` + l + `,token_type="output"}`),
		errors:     map[string]*metrics.Counter{},
	}
	for i, streaming := range [2]string{"false", "true"} {
		s.requests[i] = m.set.GetOrCreateCounter(metricRequests + `{` + l + `,streaming="` + streaming + `"}`)
	}
	m.series[k] = s
	return s
}

// workerCounter is r's counter of family name in byKey, by worker_type and endpoint.
func (m *modelMetrics) workerCounter(byKey map[[2]string]*metrics.Counter, name string, r *Record) *metrics.Counter {
	workerType := "regular"
	if r.Worker != nil && r.Worker.Type() != "" {
		workerType = r.Worker.Type()
	}
	k := [2]string{workerType, Endpoint(r.Route)}
	c := byKey[k]
	if c == nil {
		c = m.set.GetOrCreateCounter(name + `{worker_type=` + promlabel.Quote(k[0]) + `,endpoint=` + promlabel.Quote(k[1]) + `}`)
		byKey[k] = c
	}
	return c
}

func seconds(ns int64) float64 { return float64(ns) / float64(time.Second) }

// Endpoint names a route as the spec product's endpoint label does: "/v1/chat/completions"
// is "chat", "/generate" is "generate", "/v1/rerank" and "/rerank" are "rerank".
func Endpoint(route string) string {
	switch route {
	case "/v1/chat/completions":
		return "chat"
	case "":
		return "other"
	}
	return strings.TrimPrefix(strings.TrimPrefix(route, "/v1"), "/")
}

// errorType classes a failed request as the spec product's error_type label does, plus
// rate_limited (a 429: admission or the engine refused it) and client_closed (the client
// left first); "" for a success. A stream that began with 200 and that the worker broke off
// (an ErrorCode with a 2xx status) is a backend_error.
func errorType(r *Record) string {
	switch {
	case r.Status == 499:
		return "client_closed"
	case r.Status < 400 && r.ErrorCode == "":
		return ""
	}
	switch r.ErrorCode {
	case "no_available_workers", "invalid_target_worker", "model_not_found":
		return "no_workers"
	case "worker_timeout", "admission_queue_timeout", "request_timeout":
		return "timeout"
	case "internal_error":
		return "internal_error"
	}
	switch {
	case r.Status == 429:
		return "rate_limited"
	case r.Status >= 400 && r.Status < 500:
		return "validation_error"
	}
	return "backend_error" // 5xx, or a stream the worker broke off after its 200
}

// rejectionReason is the reason label of an admission refusal's error code, "" for any
// other code.
func rejectionReason(code string) string {
	switch code {
	case "admission_queue_full":
		return "queue_full"
	case "admission_queue_timeout":
		return "queue_timeout"
	case "rate_limit_exceeded":
		return "rate_limited"
	}
	return ""
}
