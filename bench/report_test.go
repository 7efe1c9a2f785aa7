package bench

import (
	"math"
	"strings"
	"testing"
)

// fullReport is a report with every suite and every proxy, with round numbers so that the
// expected ratios are exact.
func fullReport() *Report {
	json := []Measurement{
		{Key: "direct", Name: "direct", RPS: 40000, P50MS: 0.5, P99MS: 2},
		{Key: "smg-cache_aware", Name: "smg (cache_aware)", RPS: 20000, P50MS: 1, P99MS: 3, CPUPerRequestUS: 30},
		{Key: "smg-round_robin", Name: "smg (round_robin)", RPS: 20000, P50MS: 1, P99MS: 3, CPUPerRequestUS: 27},
		{Key: "smg-evloop-cache_aware", Name: "smg evloop (cache_aware)", RPS: 30000, P50MS: 0.8, P99MS: 2, CPUPerRequestUS: 20},
		{Key: "smg-evloop-round_robin", Name: "smg evloop (round_robin)", RPS: 30000, P50MS: 0.8, P99MS: 2, CPUPerRequestUS: 16},
		{Key: "bare", Name: "bare", RPS: 20000, CPUPerRequestUS: 25},
		{Key: "nginx", Name: "nginx", RPS: 20000, CPUPerRequestUS: 40},
		{Key: "haproxy", Name: "haproxy", RPS: 20000, CPUPerRequestUS: 37.5},
	}
	sse := []Measurement{
		{Key: "direct", Name: "direct", RPS: 900, TTFTP50MS: 1},
		{Key: "smg-cache_aware", Name: "smg (cache_aware)", RPS: 800, TTFTP50MS: 1.5, CPUPerEventUS: 12},
		{Key: "smg-round_robin", Name: "smg (round_robin)", RPS: 800, TTFTP50MS: 1.5, CPUPerEventUS: 12},
		{Key: "smg-evloop-cache_aware", Name: "smg evloop (cache_aware)", RPS: 800, TTFTP50MS: 1.2, CPUPerEventUS: 6},
		{Key: "bare", Name: "bare", RPS: 800, CPUPerEventUS: 16},
		{Key: "nginx", Name: "nginx", RPS: 800, CPUPerEventUS: 24},
		{Key: "haproxy", Name: "haproxy", RPS: 800, CPUPerEventUS: 20},
	}
	paced := []Measurement{
		{Key: "direct", Name: "direct", RPS: 400, TTFTP50MS: 21, ITLP50MS: 20, ITLP99MS: 25, P99MS: 660},
		{Key: "smg-cache_aware", Name: "smg (cache_aware)", RPS: 390, TTFTP50MS: 22.5, ITLP50MS: 20, ITLP99MS: 30, P99MS: 670,
			CPUPerRequestUS: 720, CPUPerEventUS: 22.5},
		{Key: "smg-round_robin", Name: "smg (round_robin)", RPS: 390, TTFTP50MS: 22, CPUPerEventUS: 18},
		{Key: "smg-evloop-cache_aware", Name: "smg evloop (cache_aware)", RPS: 390, TTFTP50MS: 21.5, CPUPerEventUS: 16},
		{Key: "bare", Name: "bare fasthttp proxy", NotInstalled: bareSkipped},
		{Key: "nginx", Name: "nginx", RPS: 390, CPUPerEventUS: 15},
		{Key: "haproxy", Name: "haproxy", RPS: 390, CPUPerEventUS: 25},
	}
	r := &Report{
		Overhead: &OverheadResult{Config: OverheadConfig{StreamTokens: 32, StreamIntervalMS: 1, PDRounds: 1, PDPolicy: "round_robin",
			PacedRounds: 3, PacedIntervalMS: 20, PacedConnections: 256, PacedDuration: 4e9, PacedWarmup: 256}, JSON: json, SSE: sse, SSEPaced: paced,
			PD: &PDOverhead{
				JSON: []Measurement{
					{Key: "direct", Name: "loadgen straight to prefill + decode", RPS: 4000, P50MS: 2, P99MS: 5},
					{Key: "smg-round_robin", Name: "smg PD (round_robin)", RPS: 3000, P50MS: 2.5, P99MS: 6, CPUPerRequestUS: 54},
				},
				SSE: []Measurement{
					{Key: "direct", Name: "loadgen straight to prefill + decode", RPS: 800, TTFTP50MS: 2},
					{Key: "smg-round_robin", Name: "smg PD (round_robin)", RPS: 400, TTFTP50MS: 3, CPUPerRequestUS: 480, CPUPerEventUS: 15},
				},
			}},
		Micro:   []MicroResult{{Package: "p", Name: "BenchmarkA", HasAllocs: true}},
		Quality: qualityFixture(),
	}
	// The overhead suite's CPU and system-call rows.
	o := r.Overhead
	o.JSONOpen = []Measurement{
		{Key: "direct", Name: "direct", RPS: 2000, P50MS: 0.2},
		{Key: "smg-evloop-cache_aware", Name: "smg evloop (cache_aware)", RPS: 2000, P50MS: 0.3, CPUPerRequestUS: 30},
		{Key: "nginx", Name: "nginx", RPS: 2000, P50MS: 0.4, CPUPerRequestUS: 25},
	}
	o.SSEUnloaded = []Measurement{
		{Key: "direct", Name: "direct", RPS: 12, TTFTP50MS: 20},
		{Key: "smg-evloop-cache_aware", Name: "smg evloop (cache_aware)", RPS: 12, TTFTP50MS: 20.5},
		{Key: "bare", Name: "bare fasthttp proxy", NotInstalled: bareSkipped},
		{Key: "nginx", Name: "nginx", RPS: 12, TTFTP50MS: 20.25},
	}
	o.Syscalls = &SyscallRows{
		JSON: []Measurement{
			{Key: "smg-evloop-cache_aware", Name: "smg evloop (cache_aware)", SyscallsPerRequest: 4.5},
			{Key: "nginx", Name: "nginx", SyscallsPerRequest: 5},
		},
		SSEPaced: []Measurement{
			{Key: "smg-evloop-cache_aware", Name: "smg evloop (cache_aware)", SyscallsPerEvent: 1.6},
			{Key: "nginx", Name: "nginx", SyscallsPerEvent: 2},
		},
	}
	o.Scaling = []Measurement{
		{Key: "smg-evloop-cache_aware", Name: "smg evloop (cache_aware)", Cores: 1, RPS: 10000, CPUPerRequestUS: 20},
		{Key: "nginx", Name: "nginx", Cores: 1, RPS: 9000, CPUPerRequestUS: 18},
		{Key: "smg-evloop-cache_aware", Name: "smg evloop (cache_aware)", Cores: 2, RPS: 15000, CPUPerRequestUS: 22},
		{Key: "nginx", Name: "nginx", Cores: 2, RPS: 18000, CPUPerRequestUS: 18},
	}
	o.Tracing = []Measurement{
		{Key: "smg-evloop-cache_aware", Name: "smg (cache_aware), tracing off", RPS: 10000, CPUPerRequestUS: 40},
		{Key: "smg-evloop-cache_aware-traced", Name: "smg (cache_aware), traced", RPS: 9000, CPUPerRequestUS: 60},
	}
	r.Routes = routesFixture()
	for _, fam := range []string{"qwen3", "llama3"} {
		for _, size := range []int{4 << 10, 100 << 10} {
			r.Tokenizer = append(r.Tokenizer, TokenizerRow{Family: fam, PromptBytes: size, Prompts: 10,
				OursMBPerS: 30, HFMBPerS: 2, HFMode: "encode", Ratio: 15})
		}
	}
	r.GRPC = &GRPCResult{PromptBytes: 4096, StreamTokens: 128, Rows: []GRPCRow{
		{Key: "direct-grpc", TTFTP50MS: 0.2}, {Key: "direct-http", TTFTP50MS: 0.1},
		{Key: "smg-grpc", TTFTP50MS: 0.7, CPUMSPerRequest: 9}, {Key: "smg-http", TTFTP50MS: 0.2, CPUMSPerRequest: 8},
	}}
	return r
}

func TestReportMetrics(t *testing.T) {
	m := fullReport().Metrics()
	want := map[string]float64{
		"overhead.json.cpu_us_per_request.smg-cache_aware":                     30,
		"overhead.json.cpu_us_per_request.nginx":                               40,
		"overhead.json.cpu_ratio.smg-cache_aware/bare":                         1.2,
		"overhead.json.cpu_ratio.smg-cache_aware/nginx":                        0.75,
		"overhead.json.cpu_ratio.smg-cache_aware/haproxy":                      0.8,
		"overhead.json.cpu_ratio.smg-round_robin/bare":                         1.08,
		"overhead.json.rps_ratio.smg-cache_aware/direct":                       0.5,
		"overhead.sse.cpu_us_per_event.bare":                                   16,
		"overhead.sse.cpu_ratio.smg-cache_aware/bare":                          0.75,
		"overhead.sse.cpu_ratio.smg-cache_aware/nginx":                         0.5,
		"overhead.sse.cpu_ratio.smg-cache_aware/haproxy":                       0.6,
		"quality.shared-prefix.sat.capacity_ratio.cache_aware/round_robin":     2.5,
		"quality.shared-prefix.load.ttft_p99_ratio_max.least_load/round_robin": 2,
		"micro.max_allocs_per_op":                                              0,
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok {
			t.Errorf("metric %s missing", k)
			continue
		}
		if math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %g, want %g", k, got, v)
		}
	}
	for k := range m {
		if strings.Contains(k, "direct/") || strings.Contains(k, "bare/") || strings.HasSuffix(k, "cpu_us_per_request.direct") {
			t.Errorf("metric %s: only gateway rows are divided by references, and direct has no proxy CPU", k)
		}
	}
}

func TestReportMetricsSkipMissingPeers(t *testing.T) {
	r := fullReport()
	for i := range r.Overhead.JSON {
		if r.Overhead.JSON[i].Key == "nginx" {
			r.Overhead.JSON[i] = Measurement{Key: "nginx", Name: "nginx", NotInstalled: "not installed"}
		}
	}
	m := r.Metrics()
	if _, ok := m["overhead.json.cpu_ratio.smg-cache_aware/nginx"]; ok {
		t.Error("a ratio against a peer that did not run was produced")
	}
	if _, ok := m["overhead.sse.cpu_ratio.smg-cache_aware/nginx"]; !ok {
		t.Error("the SSE run of nginx lost its ratio")
	}
	table := r.Table()
	if !strings.Contains(table, "| nginx | not installed |") {
		t.Errorf("table lacks the not-installed row:\n%s", table)
	}
}

func TestReportTable(t *testing.T) {
	table := fullReport().Table()
	for _, want := range []string{
		"## 1. Overhead", "### SSE relay (32 events per stream, 1 ms apart",
		"| smg (cache_aware) | 20000 | 1.000 | 3.000 | +0.500 | +1.000 | 30.0 | 0.300 | 1.20 | 0.75 | 0.80 |",
		"| smg (cache_aware) | 800 | 1.500 | +0.500 |",
		"## 2. Micro", "| p | BenchmarkA | 0.0 | 0 | 0 |",
		"## 3. Routing quality", "| cache hit rate | 4.00× | 3.8× |", "| capacity (requests/s) | 2.50× | 1.9× |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestBusiestShare(t *testing.T) {
	for _, tc := range []struct {
		per     map[string]int64
		workers int
		want    float64
	}{
		{map[string]int64{"a": 10, "b": 10}, 2, 1},
		{map[string]int64{"a": 30, "b": 10}, 2, 1.5},
		{map[string]int64{"a": 8}, 8, 8},
		{nil, 8, 0},
	} {
		if got := busiestShare(tc.per, tc.workers); got != tc.want {
			t.Errorf("busiestShare(%v, %d) = %g, want %g", tc.per, tc.workers, got, tc.want)
		}
	}
}

func TestReportPDMetricsAndTable(t *testing.T) {
	r := fullReport() // its PD rows
	m := r.Metrics()
	for k, v := range map[string]float64{
		"overhead.pd.json.cpu_us_per_request.smg-round_robin":                54,
		"overhead.pd.json.rps_ratio.smg-round_robin/direct":                  0.75,
		"overhead.pd.json.cpu_ratio.smg-round_robin/regular-smg-round_robin": 2,
		"overhead.pd.json.cpu_ratio.smg-round_robin/regular-smg-cache_aware": 1.8,
		"overhead.pd.sse.cpu_us_per_event.smg-round_robin":                   15,
		"overhead.pd.sse.rps_ratio.smg-round_robin/direct":                   0.5,
		"overhead.pd.sse.cpu_ratio.smg-round_robin/regular-smg-round_robin":  1.25,
		"overhead.json.cpu_ratio.smg-round_robin/bare":                       1.08, // regular rows unchanged
	} {
		got, ok := m[k]
		if !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if _, ok := m["overhead.pd.json.cpu_us_per_request.direct"]; ok {
		t.Error("the direct PD run has no proxy CPU metric")
	}
	table := r.Table()
	for _, want := range []string{
		"### PD disaggregation",
		// Beside the regular row of the same policy (smg-evloop-round_robin), else the first
		// smg row.
		"| smg PD (round_robin) | 3000 | 2.500 | 6.000 | +0.500 | +1.000 | 54.0 | 16.0 (round_robin) | 3.38 |",
		"| smg PD (round_robin) | 400 | 3.000 | +1.000 | 0.000 | 480.0 | 15.00 | 12.00 (cache_aware) | 1.25 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestPDDefaults(t *testing.T) {
	c := DefaultOverheadConfig()
	c.Rounds = 2
	c.derive()
	if c.PDRounds != 2 || c.PDPolicy != "round_robin" {
		t.Errorf("PD defaults: rounds %d policy %q, want 2 and round_robin", c.PDRounds, c.PDPolicy)
	}
}

func TestReportPacedMetricsAndTable(t *testing.T) {
	r := fullReport()
	m := r.Metrics()
	for k, v := range map[string]float64{
		"overhead.sse_paced.cpu_us_per_event.smg-cache_aware":               22.5,
		"overhead.sse_paced.cpu_us_per_event.nginx":                         15,
		"overhead.sse_paced.cpu_us_per_event.haproxy":                       25,
		"overhead.sse_paced.cpu_ratio.smg-cache_aware/nginx":                1.5,
		"overhead.sse_paced.cpu_ratio.smg-cache_aware/haproxy":              0.9,
		"overhead.sse_paced.cpu_ratio.smg-round_robin/nginx":                1.2,
		"overhead.sse_paced.rps_ratio.smg-cache_aware/direct":               0.975,
		"overhead.sse.cpu_ratio.smg-cache_aware/nginx":                      0.5, // the instant rows unchanged
		"overhead.pd.sse.cpu_ratio.smg-round_robin/regular-smg-round_robin": 1.25,
	} {
		got, ok := m[k]
		if !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	for k := range m {
		if strings.HasPrefix(k, "overhead.sse_paced.") && (strings.Contains(k, "bare") || strings.HasSuffix(k, ".direct")) {
			t.Errorf("metric %s: the bare proxy is not measured paced and direct has no proxy CPU", k)
		}
		if strings.HasPrefix(k, "overhead.pd.sse_paced") {
			t.Errorf("metric %s: the PD rows have no paced run", k)
		}
	}
	table := r.Table()
	for _, want := range []string{
		"### SSE relay with paced tokens (32 events per stream, 20 ms apart at the mock)",
		"256 connections, 4s per run after 256 warm-up streams, 3 round(s)",
		"| ITL p50 ms | ITL p99 ms |",
		"| direct | 400 | 21.000 | – | 20.000 | 25.000 | 660.000 | – | – | – | – |",
		"| smg (cache_aware) | 390 | 22.500 | +1.500 | 20.000 | 30.000 | 670.000 | 720.0 | 22.50 | 1.50 | 0.90 |",
		"| bare fasthttp proxy | " + bareSkipped + " |",
		"| nginx | 390 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	// Without paced rows (the smoke) the section is absent.
	r.Overhead.SSEPaced = nil
	if strings.Contains(r.Table(), "SSE relay with paced tokens") {
		t.Error("a report without paced rows renders a paced section")
	}
	if _, ok := r.Metrics()["overhead.sse_paced.cpu_ratio.smg-cache_aware/nginx"]; ok {
		t.Error("paced metrics without paced rows")
	}
}

// TestIssue14Metrics: the open-loop, unloaded-stream, system-call and scaling rows become
// the metrics the baselines gate, and their tables render.
func TestIssue14Metrics(t *testing.T) {
	r := fullReport()
	m := r.Metrics()
	want := map[string]float64{
		"overhead.json.cpu_ratio.smg-cache_aware/smg-round_robin":               30.0 / 27,
		"overhead.json.cpu_ratio.smg-evloop-cache_aware/smg-evloop-round_robin": 1.25,
		"overhead.sse.cpu_ratio.smg-evloop-cache_aware/nginx":                   0.25,
		"overhead.json_open.cpu_ratio.smg-evloop-cache_aware/nginx":             1.2,
		"overhead.json_open.added_p50_ms.smg-evloop-cache_aware":                0.1,
		"overhead.json_open.added_p50_ms.nginx":                                 0.2,
		"overhead.json_open.p50_ratio.smg-evloop-cache_aware/nginx":             0.75,
		"overhead.sse_unloaded.added_ttft_p50_ms.smg-evloop-cache_aware":        0.5,
		"overhead.sse_unloaded.ttft_p50_ratio.smg-evloop-cache_aware/nginx":     20.5 / 20.25,
		"overhead.syscalls.json.per_request.nginx":                              5,
		"overhead.syscalls.json.ratio.smg-evloop-cache_aware/nginx":             0.9,
		"overhead.syscalls.sse_paced.ratio.smg-evloop-cache_aware/nginx":        0.8,
		"overhead.scaling.rps_ratio.smg-evloop-cache_aware":                     1.5,
		"overhead.scaling.cpu_ratio.smg-evloop-cache_aware":                     1.1,
		"overhead.scaling.rps_ratio.nginx":                                      2,
		"overhead.tracing.cpu_ratio.smg-evloop-cache_aware":                     1.5,
		"overhead.tracing.rps_ratio.smg-evloop-cache_aware":                     0.9,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok {
			t.Errorf("metric %s missing", k)
		} else if math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %g, want %g", k, got, v)
		}
	}
	for _, k := range []string{"overhead.sse_unloaded.added_ttft_p50_ms.bare", "overhead.pd.json_open.cpu_us_per_request.smg-round_robin"} {
		if _, ok := m[k]; ok {
			t.Errorf("metric %s: not measured, must be absent", k)
		}
	}
	table := r.Table()
	for _, s := range []string{"### Open loop (", "### Unloaded paced stream", "| smg evloop (cache_aware) | 4.50 | 0.90 | 1.60 | 0.80 |", "| nginx | 9000 | 18000 | 2.00 | 18.0 | 18.0 | 1.00 |",
		"### Tracing: smg with `--enable-trace", "| smg (cache_aware), tracing off | 10000 | 9000 | 0.90 | 40.0 | 60.0 | 1.50 |"} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q:\n%s", s, table)
		}
	}
}
