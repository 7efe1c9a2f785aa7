package loadmon

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// TestEngineMetricsAreReExportedBoundedAndGoWithTheWorker: with --engine-metrics (and load
// monitoring disabled, which must not stop it) each round keeps every worker's /metrics;
// WriteEngineMetrics labels them by worker, bounds them, and drops a removed worker's at once.
func TestEngineMetricsAreReExportedBoundedAndGoWithTheWorker(t *testing.T) {
	a, b := startEngine(t), startEngine(t)
	a.metrics.Store(str("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{dp=\"0\"} 3\nsglang:token_usage 0.5\n"))
	b.metrics.Store(str("vllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.25\nvllm:extra 9\n"))
	reg, ws := register(t, a.url, b.url)
	set := metrics.NewSet()
	cfg := DefaultConfig()
	cfg = cfg.WithInterval(time.Second)
	cfg.Disable, cfg.EngineMetrics, cfg.MaxEngineSeries, cfg.Metrics = true, true, 4, set
	m, err := New(cfg, reg.Current)
	if err != nil {
		t.Fatal(err)
	}
	if !m.active() {
		t.Fatal("--engine-metrics must keep the monitor polling under --disable-load-monitoring")
	}
	m.PollOnce(context.Background())
	if a.count(pathLoads) != 0 || ws[0].Load() != nil {
		t.Fatal("load reports were polled although load monitoring is disabled and nothing needs them")
	}
	var out bytes.Buffer
	m.WriteEngineMetrics(&out)
	want := "# TYPE sglang:num_running_reqs gauge\n" +
		"sglang:num_running_reqs{worker=\"" + a.url + "\",dp=\"0\"} 3\n" +
		"sglang:token_usage{worker=\"" + a.url + "\"} 0.5\n" +
		"vllm:kv_cache_usage_perc{worker=\"" + b.url + "\"} 0.25\n" +
		"vllm:num_requests_running{worker=\"" + b.url + "\"} 1\n"
	if out.String() != want {
		t.Fatalf("re-exported:\n%s\nwant (4 of 5 samples: the bound):\n%s", out.String(), want)
	}
	var exp bytes.Buffer
	set.WritePrometheus(&exp)
	if !strings.Contains(exp.String(), "smg_engine_metrics_dropped_samples_total 1") ||
		!strings.Contains(exp.String(), `smg_load_monitor_polls_total{source="engine_metrics",outcome="ok"} 2`) {
		t.Fatalf("counters:\n%s", exp.String())
	}

	if _, err := reg.Remove(context.Background(), ws[1].ID); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	m.WriteEngineMetrics(&out)
	if strings.Contains(out.String(), b.url) || !strings.Contains(out.String(), a.url) {
		t.Fatalf("after removing %s:\n%s", b.url, out.String())
	}
	a.metrics.Store(nil) // the engine stops answering: its series go, they do not freeze
	m.PollOnce(context.Background())
	out.Reset()
	m.WriteEngineMetrics(&out)
	if out.Len() != 0 {
		t.Fatalf("series of a worker whose /metrics fails:\n%s", out.String())
	}
}

func TestEngineMetricsBoundsAreChecked(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EngineMetrics, cfg.MaxEngineSeries = true, 0
	if err := cfg.Validate(); err == nil {
		t.Fatal("--engine-metrics with a bound of 0 series was accepted")
	}
}

func TestEngineMetricsOffWritesNothing(t *testing.T) {
	a := startEngine(t)
	a.metrics.Store(str("x 1\n"))
	reg, _ := register(t, a.url)
	m, err := New(DefaultConfig(), reg.Current)
	if err != nil {
		t.Fatal(err)
	}
	m.PollOnce(context.Background())
	var out bytes.Buffer
	m.WriteEngineMetrics(&out)
	if out.Len() != 0 {
		t.Fatalf("without --engine-metrics: %q", out.String())
	}
}
