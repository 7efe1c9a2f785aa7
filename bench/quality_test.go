package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/smg-go/smg/loadgen"
)

// qualityFixture is a suite result with round numbers, so the expected ratios are exact: a
// shared-prefix case with saturation rows and two repeats of load rows, multi-turn and
// mixed-size cases with load rows only (as the smoke runs), and a heterogeneous case.
func qualityFixture() *QualityResult {
	withHits := func(r QualityRow, predicted, engine float64) QualityRow {
		r.PredictedHitRate, r.EngineHitRate = predicted, engine
		return r
	}
	sat := func(policy string, capacity, hit, p50, p99 float64) QualityRow {
		return QualityRow{Case: "shared-prefix", Policy: policy, Kind: KindSaturation, TimeScale: 1, Clients: 512,
			Capacity: capacity, CacheHitRate: hit, TTFTP50MS: p50, TTFTP99MS: p99, TPOTP50MS: 20, BusiestShare: 1.25, Completed: 1000, CPUCores: 0.5, MachineBusy: 1.1, StealPercent: 4}
	}
	load := func(kase, policy string, repeat int, p50, p99, hit, rate float64) QualityRow {
		offered := map[string]float64{"shared-prefix": 35, "multi-turn": 70, "mixed-size": 70, "heterogeneous": 105, "shared-prefix-grpc": 42, "kv-events-grpc": 42}[kase]
		return QualityRow{Case: kase, Policy: policy, Kind: KindLoad, Repeat: repeat, TimeScale: 4, OfferedRate: offered,
			Capacity: rate, SentRate: 35, CacheHitRate: hit, TTFTP50MS: p50, TTFTP99MS: p99, BusiestShare: 1, Completed: 2000, CPUCores: 0.25, MachineBusy: 0.75, ArrivalLagP99MS: 1.5}
	}
	cases := DefaultQualityCases()
	caSat := sat("cache_aware", 125, 1, 100, 1000)
	caSat.TimeScale, caSat.EventsPerRequest = 0.5, 34
	caSat.Rejected = []RejectedScale{{TimeScale: 1, Capacity: 100, WallEvents: 3400}}
	return &QualityResult{
		Config: QualityConfig{Workers: 8, KVTokens: 65536, SatDuration: 12e9, LoadDuration: 12e9, SatRampFraction: 0.25, LoadFraction: 0.7,
			Repeats: 2, WarmupSeconds: 16, LoadReportSeconds: 4},
		Cases: []QualityCaseResult{
			{Case: cases[0], Capacity: 50, LoadRate: 35,
				Saturation: []QualityRow{
					sat("round_robin", 50, 0.25, 1000, 2000),
					caSat,
					sat("least_load", 40, 0.25, 1200, 4000),
				},
				Load: []QualityRow{
					load("shared-prefix", "round_robin", 1, 200, 400, 0.25, 35),
					load("shared-prefix", "least_load", 1, 300, 800, 0.25, 35),
					load("shared-prefix", "cache_aware", 1, 20, 200, 1, 35),
					load("shared-prefix", "round_robin", 2, 200, 500, 0.3, 35),
					load("shared-prefix", "least_load", 2, 100, 250, 0.3, 28),
					load("shared-prefix", "cache_aware", 2, 40, 600, 0.9, 35),
					load("shared-prefix", "power_of_two", 1, 200, 400, 0.25, 35),
					load("shared-prefix", "power_of_two", 2, 200, 500, 0.3, 35),
				}},
			{Case: cases[1], Capacity: 100, LoadRate: 70,
				Load: []QualityRow{
					load("multi-turn", "round_robin", 1, 100, 400, 0.01, 70),
					load("multi-turn", "least_load", 1, 100, 500, 0.01, 70),
					load("multi-turn", "power_of_two", 1, 100, 450, 0.01, 70),
					load("multi-turn", "cache_aware", 1, 100, 420, 0.05, 70),
				}},
			{Case: cases[2], Capacity: 100, LoadRate: 70,
				Load: []QualityRow{
					load("mixed-size", "round_robin", 1, 100, 1000, 0, 70),
					load("mixed-size", "least_load", 1, 100, 500, 0, 70),
					load("mixed-size", "power_of_two", 1, 100, 700, 0, 70),
					load("mixed-size", "cache_aware", 1, 100, 1500, 0, 70),
				}},
			{Case: cases[3], Capacity: 150,
				Saturation: []QualityRow{
					{Case: "heterogeneous", Policy: "round_robin", Kind: KindSaturation, TimeScale: 4, Clients: 384, NoStream: true, Capacity: 150, EventsPerRequest: 66},
					{Case: "heterogeneous", Policy: "least_load", Kind: KindSaturation, TimeScale: 4, Clients: 384, NoStream: true, Capacity: 210, EventsPerRequest: 66},
				},
				Load: []QualityRow{
					load("heterogeneous", "round_robin", 1, 30, 100, 0, 105),
					load("heterogeneous", "least_load", 1, 30, 60, 0, 98),
					load("heterogeneous", "power_of_two", 1, 30, 70, 0, 105),
					load("heterogeneous", "cache_aware", 1, 30, 80, 0, 105),
				}},
			{Case: cases[4], Capacity: 60, LoadRate: 42,
				Saturation: []QualityRow{
					{Case: "shared-prefix-grpc", Policy: "round_robin", Kind: KindSaturation, TimeScale: 2, Clients: 384, Capacity: 60, CacheHitRate: 0.3, TTFTP99MS: 4000},
					{Case: "shared-prefix-grpc", Policy: "cache_aware", Kind: KindSaturation, TimeScale: 2, Clients: 384, Capacity: 240, CacheHitRate: 0.9, TTFTP99MS: 1000},
				},
				Load: []QualityRow{
					load("shared-prefix-grpc", "round_robin", 1, 150, 400, 0.3, 42),
					load("shared-prefix-grpc", "cache_aware", 1, 15, 40, 0.9, 42),
				}},
			{Case: cases[5], Capacity: 60, LoadRate: 42,
				Saturation: []QualityRow{
					{Case: "kv-events-grpc", Policy: "cache_aware", Kind: KindSaturation, TimeScale: 2, Clients: 384, Capacity: 100, CacheHitRate: 0.5, TTFTP99MS: 5000},
					{Case: "kv-events-grpc", Policy: EventsPolicy, Kind: KindSaturation, TimeScale: 2, Clients: 384, Capacity: 80, CacheHitRate: 0.4, TTFTP99MS: 5000,
						PredictedHitRate: 0.6, EngineHitRate: 0.4},
				},
				Load: []QualityRow{
					load("kv-events-grpc", "cache_aware", 1, 30, 300, 0.8, 42),
					withHits(load("kv-events-grpc", EventsPolicy, 1, 30, 180, 0.9, 42), 0.9, 0.9),
				}},
		},
	}
}

func TestQualityMetrics(t *testing.T) {
	m := map[string]float64{}
	qualityFixture().metrics(m)
	want := map[string]float64{
		"quality.shared-prefix.sat.capacity.round_robin":                          50,
		"quality.shared-prefix.sat.capacity.cache_aware":                          125,
		"quality.shared-prefix.sat.capacity_ratio.cache_aware/round_robin":        2.5,
		"quality.shared-prefix.sat.cache_hit_ratio.cache_aware/round_robin":       4,
		"quality.shared-prefix.sat.ttft_p99_ratio.cache_aware/round_robin":        0.5,
		"quality.shared-prefix.sat.capacity_ratio.least_load/round_robin":         0.8,
		"quality.shared-prefix.sat.busiest_share.least_load":                      1.25,
		"quality.shared-prefix.load.ttft_p99_ratio.least_load/round_robin.r1":     2,
		"quality.shared-prefix.load.ttft_p99_ratio.least_load/round_robin.r2":     0.5,
		"quality.shared-prefix.load.ttft_p99_ratio_max.least_load/round_robin":    2,
		"quality.shared-prefix.load.ttft_p99_ratio.cache_aware/round_robin.r1":    0.5,
		"quality.shared-prefix.load.ttft_p99_ratio.cache_aware/round_robin.r2":    1.2,
		"quality.shared-prefix.load.ttft_p99_ratio_max.cache_aware/round_robin":   1.2,
		"quality.shared-prefix.load.ttft_p50_ratio_max.cache_aware/round_robin":   0.2,
		"quality.shared-prefix.load.ttft_p50_ratio_max.least_load/round_robin":    1.5,
		"quality.shared-prefix.load.cache_hit_ratio_min.cache_aware/round_robin":  3,
		"quality.shared-prefix.load.throughput_ratio_min.least_load/round_robin":  0.8,
		"quality.mixed-size.load.ttft_p99_ratio_max.least_load/round_robin":       0.5,
		"quality.shared-prefix.load.completed_of_offered_min":                     0.8, // least_load's 28 of 35
		"quality.mixed-size.load.completed_of_offered_min":                        1,
		"quality.heterogeneous.load.completed_of_offered_min":                     98.0 / 105,
		"quality.heterogeneous.load.ttft_p99_ratio_median.least_load/round_robin": 0.6,
		"quality.max_cpu_cores": 0.5,
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok {
			t.Errorf("metric %s missing", k)
		} else if math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %g, want %g", k, got, v)
		}
	}
	for k := range m {
		switch {
		case strings.Contains(k, "round_robin/round_robin"):
			t.Errorf("metric %s: round robin is not divided by itself", k)
		case strings.Contains(k, "mixed-size.sat."):
			t.Errorf("metric %s: the mixed-size case ran no saturation rows", k)
		case strings.HasPrefix(k, "quality.mixed-size.load.cache_hit_ratio"):
			t.Errorf("metric %s: round robin's hit rate is 0, there is no ratio", k)
		}
	}
	// Without round robin's rows there is nothing to divide by, and no ratio is made up.
	q := qualityFixture()
	q.Cases[0].Saturation = q.Cases[0].Saturation[1:]
	q.Cases[0].Load = q.Cases[0].Load[1:2]
	m = map[string]float64{}
	q.metrics(m)
	for k := range m {
		if strings.HasPrefix(k, "quality.shared-prefix.") && strings.Contains(k, "/round_robin") {
			t.Errorf("metric %s without round robin's row", k)
		}
	}
}

func TestQualityTable(t *testing.T) {
	table := qualityFixture().Table()
	for _, want := range []string{
		"## 3. Routing quality", "### shared-prefix", "### mixed-size",
		"Saturation (closed loop, 512 clients):",
		"| cache_aware | 125.0 | 2.50× | 1.000 | 4.00× | 100 | 1000 | 0.50× | 20.0 | 1.25 | 1000 | 0 | 0.5 | 2125 | 0.50 (1.10, 4%) |",
		"Measured again at a lower time scale: cache_aware first measured 100.0 req/s at time scale 1 (3400 events/s wall, over the budget).",
		"| round_robin | 50.0 | – | 0.250 | – |",
		"At 70% of round robin's capacity (35.0 of 50.0 req/s of model time; 140 req/s wall at time scale 4), 2 repeat(s):",
		"| least_load | 800, 250 | 2.00, 0.50 | **2.00** | 1.25 | 300, 100 | 0.250, 0.300 | 35.0 (35.0), 28.0 (35.0) |",
		"| cache_aware | 200, 600 | 0.50, 1.20 | **1.20** | 0.85 |",
		"| round_robin | 400, 500 | – | – | – |",
		"| least_load | 500 | 0.50 | **0.50** | 0.50 |",
		"| capacity (requests/s) | 2.50× | 1.9× |", "| cache hit rate | 4.00× | 3.8× |",
		// Not streamed: no TTFT or TPOT, one response a request.
		"| least_load | 210.0 | 1.40× | 0.000 | – | – | – | – | – | 0.00 | 0 | 0 | 4 | 840 |",
		"Not streamed (one response per request, counted as one event): no TTFT or TPOT at saturation.",
		"Each closed loop ran 6s before its measured run, to settle",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Index(table, "### shared-prefix") > strings.Index(table, "### mixed-size") {
		t.Error("cases out of order")
	}
}

func TestSteadyRates(t *testing.T) {
	// 1 s buckets of a 12 s closed loop: a ramp, a steady 100 requests/s, a drain after 12 s.
	var tl []loadgen.TimelinePoint
	for i, n := range []int64{10, 60, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 40, 5} {
		tl = append(tl, loadgen.TimelinePoint{StartS: float64(i), Completed: n, OutputThroughput: float64(n) * 32})
	}
	req, tok, ok := steadyRates(tl, 3, 12)
	if !ok || req != 100 || tok != 3200 {
		t.Errorf("steadyRates = %g, %g, %v; want 100 requests/s and 3200 tokens/s over [3, 12)", req, tok, ok)
	}
	// The whole run, ramp and drain excluded by nothing but the window: [0, 12).
	if req, _, _ := steadyRates(tl, 0, 12); math.Abs(req-1070.0/12) > 1e-9 {
		t.Errorf("steadyRates over [0, 12) = %g, want %g", req, 1070.0/12)
	}
	if _, _, ok := steadyRates(tl[:2], 3, 12); ok {
		t.Error("a timeline with no bucket inside the window reported a rate")
	}
}

func TestQualityRowFill(t *testing.T) {
	// 12 s of 100 completions/s wall, then 3 s of drain: the whole-run figure loadgen
	// reports (completed ÷ 15 s) is below the rate the run sustained.
	r := &loadgen.Result{Completed: 1300, Failed: 1, CacheHitRate: 0.5, RequestThroughput: 1300.0 / 15, OutputThroughput: 1300.0 * 32 / 15, TotalOutputTokens: 41600,
		TTFT: loadgen.Summary{Median: 10, P99: 50}, TPOT: loadgen.Summary{Median: 5}, ArrivalLag: loadgen.Summary{P99: 2},
		Workers: map[string]int64{"a": 600, "b": 300}}
	for i := range 15 {
		n := int64(100)
		if i >= 12 {
			n = 100 / 3
		}
		r.Timeline = append(r.Timeline, loadgen.TimelinePoint{StartS: float64(i), Completed: n, OutputThroughput: float64(n) * 32})
	}
	load := QualityRow{Kind: KindLoad, TimeScale: 4}
	load.fill(r, 2, 3, 12)
	if load.Capacity != 25 || load.OutputThroughput != 800 || load.SentRate != 1301.0/12/4 || load.TTFTP50MS != 40 || load.TTFTP99MS != 200 || load.TPOTP50MS != 20 ||
		load.BusiestShare != 600*2.0/900 || load.ArrivalLagP99MS != 2 || load.Completed != 1300 || load.Failed != 1 || load.CacheHitRate != 0.5 ||
		load.EventsPerRequest != 34 || load.wallEvents() != 25*4*34 {
		t.Errorf("load row %+v: want the steady 100/s wall (drain left out) = 25/s of model time, sent %g, latencies × 4", load, 1301.0/12/4)
	}
	// A saturation row's capacity is the timeline's steady part too: 100/s wall = 25/s of model time.
	sat := QualityRow{Kind: KindSaturation, TimeScale: 4}
	sat.fill(r, 2, 3, 12)
	if sat.Capacity != 25 || sat.OutputThroughput != 800 || sat.SentRate != 0 {
		t.Errorf("saturation row capacity %g, output %g, sent %g: want 25 and 800 from the timeline, no sent rate", sat.Capacity, sat.OutputThroughput, sat.SentRate)
	}
	// Not streamed: no first token to time, and one response per request relayed.
	flat := QualityRow{Kind: KindSaturation, TimeScale: 4, NoStream: true}
	flat.fill(r, 2, 3, 12)
	if flat.TTFTP50MS != 0 || flat.TTFTP99MS != 0 || flat.TPOTP50MS != 0 || flat.EventsPerRequest != 34 || flat.wallEvents() != 25*4 {
		t.Errorf("non-streamed row %+v: want no TTFT/TPOT, 34 events a streamed answer would have, %d responses/s wall", flat, 25*4)
	}
}

func TestWriteQualityHTML(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteQualityHTML(&buf, qualityFixture()); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	// shared-prefix: capacity, saturation TTFT p99, load TTFT p99; multi-turn and mixed-size:
	// load only; heterogeneous: capacity (not streamed at saturation: no TTFT chart) and load;
	// shared-prefix-grpc and kv-events-grpc: as shared-prefix.
	if n := strings.Count(html, "<svg "); n != 13 {
		t.Errorf("%d charts, want 13", n)
	}
	if n := strings.Count(html, "<rect "); n != 3+3+8+4+4+2+4+2+2+2+2+2+2 {
		t.Errorf("%d bars, want 40 (3 + 3 saturation, 8 + 4 + 4 load, 2 + 4 heterogeneous, 2 + 2 + 2 shared-prefix-grpc, 2 + 2 + 2 kv-events-grpc)", n)
	}
	for _, want := range []string{
		"<h2>shared-prefix</h2>", "<h2>mixed-size</h2>", "Capacity at saturation (requests/s of model time)",
		"TTFT p99 at 70% of round robin&#39;s capacity", "■ repeat 1", "■ repeat 2", `fill="#9d9d9d"`, ">125<", "cache_aware, capacity: 125",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// Offline: no script, nothing fetched (the SVG namespace is a name, not a fetch).
	if strings.Contains(html, "<script") || strings.Count(html, "http") != strings.Count(html, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Error("the page runs a script or refers to the network")
	}
}

func TestFitScale(t *testing.T) {
	for _, tc := range []struct{ scale, events, budget, want float64 }{
		{2, 4000, 8000, 2},       // within the budget
		{2, 9000, 8000, 2},       // within 15% of it
		{2, 29000, 8000, 0.55},   // 0.5517… rounded down to two digits
		{1, 100000, 8000, 0.08},  // 0.08 exactly
		{4, 10000, 8000, 3.2},    // 3.2
		{0.5, 27680, 8000, 0.14}, // 0.1445… → 0.14
	} {
		if got := fitScale(tc.scale, tc.events, tc.budget); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("fitScale(%g, %g, %g) = %g, want %g", tc.scale, tc.events, tc.budget, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{9, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median = %g, want %g", got, tc.want)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0, 1}, {0.03, 0.05}, {1, 1}, {1.2, 2}, {3, 5}, {7, 10}, {56, 100}, {123, 200}, {2000, 2000}} {
		if got := niceCeil(tc.in); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("niceCeil(%g) = %g, want %g", tc.in, got, tc.want)
		}
	}
}

func TestMachineBusySeconds(t *testing.T) {
	s, err := machineBusySeconds()
	if err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	if !(s > 0) {
		t.Errorf("machine busy %g s since boot: the CPU fields were not read", s)
	}
}
