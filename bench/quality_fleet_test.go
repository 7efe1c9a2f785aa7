package bench

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/smg-go/smg/loadgen"
)

// TestEventModeMetrics: a case with cache_aware and EventsPolicy rows gets event mode's
// ratios to the approximate tree, repeat against repeat, beside the usual ones to round
// robin, and the gap between the predicted and the engines' hit in points; the table shows
// them beside the targets.
func TestEventModeMetrics(t *testing.T) {
	sat := func(policy string, capacity, p99, predicted, engine float64) QualityRow {
		return QualityRow{Case: "kv", Policy: policy, Kind: KindSaturation, TimeScale: 1, Clients: 8, Capacity: capacity,
			CacheHitRate: 0.5, TTFTP99MS: p99, PredictedHitRate: predicted, EngineHitRate: engine}
	}
	load := func(policy string, rep int, p99, predicted, engine float64) QualityRow {
		return QualityRow{Case: "kv", Policy: policy, Kind: KindLoad, Repeat: rep, TimeScale: 1, OfferedRate: 10, Capacity: 10,
			TTFTP50MS: p99 / 4, TTFTP99MS: p99, CacheHitRate: 0.5, PredictedHitRate: predicted, EngineHitRate: engine}
	}
	q := &QualityResult{Config: DefaultQualityConfig(), Cases: []QualityCaseResult{{
		Case: QualityCase{Name: "kv"}, Capacity: 10, LoadRate: 7,
		Saturation: []QualityRow{sat("round_robin", 10, 400, 0, 0), sat("cache_aware", 20, 200, 0.9, 0.6), sat(EventsPolicy, 30, 100, 0.8, 0.7)},
		Load: []QualityRow{load("round_robin", 1, 400, 0, 0), load("cache_aware", 1, 200, 0.7, 0.6), load(EventsPolicy, 1, 100, 0.6, 0.62),
			load("round_robin", 2, 400, 0, 0), load("cache_aware", 2, 100, 0.7, 0.5), load(EventsPolicy, 2, 100, 0.5, 0.53)},
	}}}
	m := map[string]float64{}
	q.metrics(m)
	for k, v := range map[string]float64{
		"quality.kv.sat.capacity_ratio.cache_aware_events/cache_aware":         1.5,
		"quality.kv.sat.ttft_p99_ratio.cache_aware_events/cache_aware":         0.5,
		"quality.kv.sat.capacity_ratio.cache_aware_events/round_robin":         3,
		"quality.kv.sat.hit_gap_pp.cache_aware_events":                         10,
		"quality.kv.load.ttft_p99_ratio.cache_aware_events/cache_aware.r1":     0.5,
		"quality.kv.load.ttft_p99_ratio.cache_aware_events/cache_aware.r2":     1,
		"quality.kv.load.ttft_p99_ratio_median.cache_aware_events/cache_aware": 0.75,
		"quality.kv.load.hit_gap_pp_max.cache_aware_events":                    3,
		"quality.kv.sat.hit_gap_pp.cache_aware":                                30, // the tree's
		"quality.kv.load.hit_gap_pp_max.cache_aware":                           20,
	} {
		if got, ok := m[k]; !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %g (present %v), want %g", k, got, ok, v)
		}
	}
	if _, ok := m["quality.kv.sat.capacity_ratio.cache_aware/cache_aware"]; ok {
		t.Error("cache_aware divided by itself")
	}
	if _, ok := m["quality.kv.sat.hit_gap_pp.round_robin"]; ok {
		t.Error("a hit gap for round robin, which foretells nothing")
	}
	table := q.Table()
	for _, want := range []string{"| event mode / approximate tree | measured | target |", "| capacity at saturation | 1.50 | ≥ 1.2 |",
		"cache_aware_events at saturation: predicted hit 0.800, engines' hit 0.700",
		"cache_aware at saturation: predicted hit 0.900, engines' hit 0.600", "| the tree's predicted vs engine hit, points apart, saturation | 30.00 | – |"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

// TestMergeResults: two loadgens' results add up their counts, rates and timelines; the hit
// rate is weighted by prompt tokens, the TTFT median by completed requests, and the p99 is the
// larger one.
func TestMergeResults(t *testing.T) {
	a := &loadgen.Result{Completed: 30, Failed: 1, TotalInputTokens: 1000, CacheHitRate: 0.5, RequestThroughput: 3,
		TTFT: loadgen.Summary{Median: 10, P99: 100}, Workers: map[string]int64{"w0": 30},
		Timeline: []loadgen.TimelinePoint{{StartS: 0, Completed: 10}, {StartS: 1, Completed: 20}}}
	b := &loadgen.Result{Completed: 10, TotalInputTokens: 3000, CacheHitRate: 0.9, RequestThroughput: 1,
		TTFT: loadgen.Summary{Median: 50, P99: 300}, Workers: map[string]int64{"w0": 4, "w1": 6},
		Timeline: []loadgen.TimelinePoint{{StartS: 0, Completed: 5}}}
	m := mergeResults([]*loadgen.Result{a, b})
	if m.Completed != 40 || m.Failed != 1 || m.RequestThroughput != 4 || m.Workers["w0"] != 34 || m.Workers["w1"] != 6 {
		t.Fatalf("counts %+v", m)
	}
	if math.Abs(m.CacheHitRate-0.8) > 1e-9 || m.TTFT.Median != 20 || m.TTFT.P99 != 300 {
		t.Fatalf("hit %g, TTFT median %g p99 %g; want 0.8, 20, 300", m.CacheHitRate, m.TTFT.Median, m.TTFT.P99)
	}
	if len(m.Timeline) != 2 || m.Timeline[0].Completed != 15 || m.Timeline[1].Completed != 20 || m.Timeline[1].StartS != 1 {
		t.Fatalf("timeline %+v", m.Timeline)
	}
	if one := mergeResults([]*loadgen.Result{a}); one != a {
		t.Fatal("one result is not returned as is")
	}
}

// TestReadHits: the predicted and engine hits are the gateways' counters summed over their
// series and gateways; a metric name that only starts like a wanted one is not counted.
func TestReadHits(t *testing.T) {
	page := func(predicted, prompt, cached, grpcPrompt int) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "smg_cache_aware_event_mode_predicted_cached_tokens_total %d\n", predicted)
			fmt.Fprintf(w, "smg_cache_aware_event_mode_prompt_tokens_total %d\n", prompt)
			fmt.Fprintf(w, "smg_cache_aware_event_mode_prompt_tokens_total_other 999\n")
			fmt.Fprintf(w, "smg_grpc_cached_prompt_tokens_total{worker=\"grpc://a:1\"} %d\n", cached)
			fmt.Fprintf(w, "smg_grpc_cached_prompt_tokens_total{worker=\"grpc://b:1\"} %d\n", cached)
			fmt.Fprintf(w, "smg_grpc_prompt_tokens_total %d\n", grpcPrompt)
		}))
	}
	a, b := page(60, 100, 20, 100), page(20, 100, 10, 100)
	defer a.Close()
	defer b.Close()
	var row QualityRow
	if err := row.readHits([]gateway{{metrics: a.URL}, {metrics: b.URL}}); err != nil {
		t.Fatal(err)
	}
	if math.Abs(row.PredictedHitRate-0.4) > 1e-9 || math.Abs(row.EngineHitRate-0.3) > 1e-9 {
		t.Fatalf("predicted %g, engine %g; want 0.4 and 0.3", row.PredictedHitRate, row.EngineHitRate)
	}
	if math.Abs(row.hitGapPoints()-10) > 1e-9 {
		t.Fatalf("gap %g points, want 10", row.hitGapPoints())
	}
}

// TestLoopArgsShareTheLoad: each of n loadgens gets 1/n of the clients, warm-up and rate.
func TestLoopArgsShareTheLoad(t *testing.T) {
	got := strings.Join(loop{clients: 384, warmup: 384}.args(2), " ")
	if got != "--max-concurrency 192 --warmup 192" {
		t.Errorf("closed loop halves: %s", got)
	}
	got = strings.Join(loop{clients: 1024, warmup: 100, rate: 90}.args(2), " ")
	if got != "--max-concurrency 512 --warmup 50 --request-rate 45.00" {
		t.Errorf("open loop halves: %s", got)
	}
	if n := workloadSize(sharedPrefixArgs); n != 64*16 {
		t.Errorf("shared-prefix workload size %d, want 1024", n)
	}
}
