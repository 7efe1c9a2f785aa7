package mockworker

import (
	"io"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/promlabel"
)

// workerMetrics is one worker's Prometheus /metrics, in its dialect's names, each series
// labelled model_name. Gauges read the worker's load when scraped; the vLLM latency
// histograms are fed by the engine driver (engine mode only).
type workerMetrics struct {
	set       *metrics.Set
	ttft, itl *metrics.PrometheusHistogram // nil unless vLLM dialect
}

// vLLM's default bucket bounds for the two latency histograms (vllm/engine/metrics.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itlBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
)

func newWorkerMetrics(w *Worker) *workerMetrics {
	m := &workerMetrics{set: metrics.NewSet()}
	label := `{model_name=` + promlabel.Quote(w.cfg.Model) + `}`
	gauge := func(name string, f func(l loadReport) float64) {
		m.set.NewGauge(name+label, func() float64 { return f(w.load()) })
	}
	usage := func(l loadReport) float64 { return float64(l.usedTokens) / float64(l.maxTotalTokens) }
	switch w.cfg.Dialect {
	case DialectVLLM:
		gauge("vllm:num_requests_running", func(l loadReport) float64 { return float64(l.running) })
		gauge("vllm:num_requests_waiting", func(l loadReport) float64 { return float64(l.waiting) })
		gauge("vllm:kv_cache_usage_perc", usage) // a fraction despite the name, as in vLLM
		m.set.NewGauge("vllm:prefix_cache_hits_total"+label, func() float64 { h, _ := w.cacheCounters(); return float64(h) })
		m.set.NewGauge("vllm:prefix_cache_queries_total"+label, func() float64 { _, q := w.cacheCounters(); return float64(q) })
		m.ttft = m.set.NewPrometheusHistogramExt("vllm:time_to_first_token_seconds"+label, ttftBuckets)
		m.itl = m.set.NewPrometheusHistogramExt("vllm:inter_token_latency_seconds"+label, itlBuckets)
	default:
		gauge("sglang:num_queue_reqs", func(l loadReport) float64 { return float64(l.waiting) })
		gauge("sglang:num_running_reqs", func(l loadReport) float64 { return float64(l.running) })
		gauge("sglang:token_usage", usage)
		gauge("sglang:gen_throughput", func(l loadReport) float64 { return l.genThroughput })
		gauge("sglang:cache_hit_rate", func(l loadReport) float64 { return l.cacheHitRate })
	}
	if w.cfg.Role != RoleUnified {
		// mockworker_pd_requests_total{role,result}: the counts of Worker.PDStats.
		for i, res := range pdResultNames {
			name := `mockworker_pd_requests_total{model_name=` + promlabel.Quote(w.cfg.Model) + `,role="` + string(w.cfg.Role) + `",result="` + res + `"}`
			m.set.NewGauge(name, func() float64 { return float64(w.pdCount[i].Load()) })
		}
	}
	return m
}

func (m *workerMetrics) observeTTFT(sec float64) {
	if m.ttft != nil {
		m.ttft.Update(sec)
	}
}

func (m *workerMetrics) observeITL(sec float64) {
	if m.itl != nil {
		m.itl.Update(sec)
	}
}

func (m *workerMetrics) write(w io.Writer) { m.set.WritePrometheus(w) }
