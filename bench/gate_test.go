package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBaselineCheck(t *testing.T) {
	b := &Baseline{Gates: []Gate{
		{Metric: "cpu", Baseline: 1.0, Tolerance: 0.15, Direction: LowerIsBetter, Why: "gateway CPU"},
		{Metric: "hit", Baseline: 3.0, Tolerance: 0.2, Direction: HigherIsBetter},
		{Metric: "absent", Baseline: 1, Tolerance: 0.1, Direction: LowerIsBetter},
	}}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		metrics map[string]float64
		fails   []string // metric names the error must name
		status  []string // per gate
	}{
		{"within tolerance", map[string]float64{"cpu": 1.149, "hit": 2.41}, nil, []string{"ok", "ok", "skipped"}},
		{"at the limit", map[string]float64{"cpu": 1.15, "hit": 2.4}, nil, []string{"ok", "ok", "skipped"}},
		{"better than baseline", map[string]float64{"cpu": 0.5, "hit": 9}, nil, []string{"ok", "ok", "skipped"}},
		{"cpu regressed", map[string]float64{"cpu": 1.16, "hit": 3}, []string{"cpu"}, []string{"REGRESSION", "ok", "skipped"}},
		{"hit regressed", map[string]float64{"cpu": 1, "hit": 2.39}, []string{"hit"}, []string{"ok", "REGRESSION", "skipped"}},
		{"both, and NaN", map[string]float64{"cpu": math.NaN(), "hit": 0}, []string{"cpu", "hit"}, []string{"REGRESSION", "REGRESSION", "skipped"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := b.Check(Measured{Values: tc.metrics})
			for i, v := range vs {
				if v.Status != tc.status[i] {
					t.Errorf("gate %s: status %s, want %s", v.Gate.Metric, v.Status, tc.status[i])
				}
			}
			if (err != nil) != (len(tc.fails) > 0) {
				t.Fatalf("Check error = %v, want failures on %v", err, tc.fails)
			}
			for _, m := range tc.fails {
				if !strings.Contains(err.Error(), "regression: "+m+" ") {
					t.Errorf("error %q does not name %s", err, m)
				}
			}
			if err != nil && strings.Contains(err.Error(), "absent") {
				t.Errorf("a skipped gate failed: %v", err)
			}
		})
	}
}

// TestConfirmedFailsOnlyWhatRegressedTwice: the confirmation run can clear a disturbed first
// run's metric, never hide one that regressed in both, and never worsen a metric.
func TestConfirmedFailsOnlyWhatRegressedTwice(t *testing.T) {
	b := &Baseline{Gates: []Gate{
		{Metric: "cpu", Baseline: 1.0, Tolerance: 0.15, Direction: LowerIsBetter},
		{Metric: "pd", Baseline: 2.3, Tolerance: 0.6, Direction: LowerIsBetter},
		{Metric: "hit", Baseline: 3.0, Tolerance: 0.2, Direction: HigherIsBetter},
		{Metric: "gone", Baseline: 1, Tolerance: 0.1, Direction: LowerIsBetter},
	}}
	first := map[string]float64{"cpu": 1.30, "pd": 3.95, "hit": 2.0, "gone": 1.0, "ungated": 7}
	second := map[string]float64{"cpu": 1.25, "pd": 1.60, "hit": 3.1, "ungated": 8}
	merged := b.Confirmed(Measured{Values: first}, Measured{Values: second}).Values
	want := map[string]float64{"cpu": 1.25, "pd": 1.60, "hit": 3.1, "gone": 1.0, "ungated": 7}
	for k, v := range want {
		if merged[k] != v {
			t.Errorf("%s = %v, want %v", k, merged[k], v)
		}
	}
	_, err := b.Check(Measured{Values: merged})
	if err == nil || !strings.Contains(err.Error(), "regression: cpu ") {
		t.Fatalf("cpu regressed in both runs and must fail: %v", err)
	}
	if strings.Contains(err.Error(), "pd") || strings.Contains(err.Error(), "hit") {
		t.Errorf("a metric cleared by the confirmation run still failed: %v", err)
	}
	// A better first value stays: the confirmation cannot make a metric worse.
	if got := b.Confirmed(Measured{Values: map[string]float64{"pd": 1.5}}, Measured{Values: map[string]float64{"pd": 9}}).Values["pd"]; got != 1.5 {
		t.Errorf("pd = %v after a worse confirmation, want 1.5", got)
	}
	if got := b.Confirmed(Measured{Values: map[string]float64{"hit": math.NaN()}}, Measured{Values: map[string]float64{"hit": 3}}).Values["hit"]; got != 3 {
		t.Errorf("hit = %v, want the confirmation's 3 over a NaN", got)
	}
}

// TestStolenMetricsAreNotJudged: a metric whose rows the hypervisor stole more than
// stealLimit from is neither passed nor failed, whatever its value; a run is failed when no
// timed gate could be judged, and passes when one could.
func TestStolenMetricsAreNotJudged(t *testing.T) {
	b := &Baseline{Gates: []Gate{
		{Metric: "overhead.json", Baseline: 1.0, Tolerance: 0.15, Direction: LowerIsBetter},
		{Metric: "overhead.pd", Baseline: 2.3, Tolerance: 0.6, Direction: LowerIsBetter},
		{Metric: "overhead.absent", Baseline: 1, Tolerance: 0.1, Direction: LowerIsBetter},
		{Metric: "quality.hit", Baseline: 3.0, Tolerance: 0.2, Direction: HigherIsBetter},
	}}
	run := Measured{
		Values: map[string]float64{"overhead.json": 1.9, "overhead.pd": 1.5, "quality.hit": 3},
		Steal:  map[string]float64{"overhead.json": 31, "overhead.pd": stealLimit},
	}
	vs, err := b.Check(run)
	if err != nil {
		t.Fatalf("a stolen metric past its limit failed the run: %v", err)
	}
	want := []string{StatusNotJudged, StatusOK, StatusSkipped, StatusOK}
	for i, v := range vs {
		if v.Status != want[i] {
			t.Errorf("gate %s: %s, want %s", v.Gate.Metric, v.Status, want[i])
		}
	}
	if vs[0].StealPct != 31 || !strings.Contains(VerdictTable(vs), "| not judged (steal 31%) |") {
		t.Errorf("the table must say why the gate was not judged:\n%s", VerdictTable(vs))
	}
	if err := NoneJudged(vs); err != nil {
		t.Errorf("overhead.pd was judged (steal exactly at the limit), yet: %v", err)
	}
	if got := NotJudged(vs); len(got) != 1 || got[0] != "overhead.json" {
		t.Errorf("NotJudged = %v, want [overhead.json]", got)
	}

	// A stolen metric below its limit is not judged either: a stolen peer row flatters it.
	run.Values["overhead.json"], run.Steal["overhead.pd"] = 0.5, 12
	vs, _ = b.Check(run)
	if vs[0].Status != StatusNotJudged || vs[1].Status != StatusNotJudged {
		t.Fatalf("statuses %s, %s: want both not judged", vs[0].Status, vs[1].Status)
	}
	// Every timed gate stolen: the run must fail and say why, even though the untimed
	// quality gate passed.
	err = NoneJudged(vs)
	if err == nil || !strings.Contains(err.Error(), "no overhead gate could be judged") ||
		!strings.Contains(err.Error(), "overhead.json (steal 31%)") || !strings.Contains(err.Error(), "overhead.pd (steal 12%)") {
		t.Errorf("NoneJudged = %v, want a failure naming both stolen gates", err)
	}
	// A run with no timed gate measured at all (micro or quality only) is not that failure.
	vs, _ = b.Check(Measured{Values: map[string]float64{"quality.hit": 3}})
	if err := NoneJudged(vs); err != nil {
		t.Errorf("no overhead metric measured: %v, want nil (the skipped gates say so)", err)
	}
}

// TestConfirmedPrefersAnUndisturbedValue: the confirmation run's value replaces a stolen one
// even when it is worse, a stolen value never replaces an undisturbed one even when it is
// better, and two values alike in steal merge by direction.
func TestConfirmedPrefersAnUndisturbedValue(t *testing.T) {
	b := &Baseline{Gates: []Gate{
		{Metric: "a", Baseline: 1.0, Tolerance: 0.15, Direction: LowerIsBetter},
		{Metric: "b", Baseline: 1.0, Tolerance: 0.15, Direction: LowerIsBetter},
		{Metric: "c", Baseline: 1.0, Tolerance: 0.15, Direction: LowerIsBetter},
		{Metric: "d", Baseline: 1.0, Tolerance: 0.15, Direction: LowerIsBetter},
	}}
	first := Measured{
		Values: map[string]float64{"a": 0.9, "b": 1.1, "c": 1.3, "d": 1.4},
		Steal:  map[string]float64{"a": 25, "b": 2, "c": 30, "d": 20},
	}
	second := Measured{
		Values: map[string]float64{"a": 1.3, "b": 0.8, "c": 1.2, "d": 1.5},
		Steal:  map[string]float64{"a": 1, "b": 40, "c": 35, "d": 3},
	}
	m := b.Confirmed(first, second)
	want := map[string][2]float64{"a": {1.3, 1}, "b": {1.1, 2}, "c": {1.2, 35}, "d": {1.5, 3}}
	for k, w := range want {
		if m.Values[k] != w[0] || m.Steal[k] != w[1] {
			t.Errorf("%s = %v (steal %v), want %v (steal %v)", k, m.Values[k], m.Steal[k], w[0], w[1])
		}
	}
	vs, err := b.Check(m)
	if err == nil || !strings.Contains(err.Error(), "regression: a ") || !strings.Contains(err.Error(), "regression: d ") || strings.Contains(err.Error(), ": b ") {
		t.Errorf("a and d regressed in their undisturbed runs, b did not: %v", err)
	}
	if vs[2].Status != StatusNotJudged {
		t.Errorf("c was stolen in both runs: %s, want not judged", vs[2].Status)
	}
}

func TestBaselineValidate(t *testing.T) {
	bad := &Baseline{Gates: []Gate{
		{Metric: "", Baseline: 1, Direction: LowerIsBetter},
		{Metric: "a", Baseline: 0, Direction: LowerIsBetter},
		{Metric: "b", Baseline: 1, Tolerance: 1.5, Direction: LowerIsBetter},
		{Metric: "c", Baseline: 1, Direction: "up"},
		{Metric: "c", Baseline: 1, Direction: HigherIsBetter},
	}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid baseline validated")
	}
	for _, hint := range []string{"metric is empty", "gate a: baseline 0", "gate b: tolerance 1.5", `gate c: direction "up"`, "gate c appears twice"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q lacks %q", err, hint)
		}
	}
}

// TestCommittedBaselines: the baselines make bench and make bench-smoke load are valid, gate
// only metrics the report can produce, and hold the gates.
func TestCommittedBaselines(t *testing.T) {
	known := fullReport().Metrics()
	for _, name := range []string{"baseline.json", "baseline-smoke.json"} {
		t.Run(name, func(t *testing.T) {
			b, err := LoadBaseline(name)
			if err != nil {
				t.Fatal(err)
			}
			gated := map[string]bool{}
			for _, g := range b.Gates {
				gated[g.Metric] = true
				if _, ok := known[g.Metric]; !ok {
					t.Errorf("gate %s names a metric the report never produces", g.Metric)
				}
			}
			for _, m := range []string{
				"overhead.json.cpu_ratio.smg-evloop-cache_aware/bare",
				"overhead.json.cpu_ratio.smg-evloop-cache_aware/nginx",
				"overhead.sse.cpu_ratio.smg-evloop-cache_aware/nginx",
				"quality.shared-prefix.load.cache_hit_ratio_min.cache_aware/round_robin",
				// The system-call target on the event-loop plane.
				"overhead.syscalls.json.ratio.smg-evloop-cache_aware/nginx",
				// The pass-through routes and EPD, in CI too.
				"routes.pass_through.max_cpu_ratio.smg-evloop/chat",
				"routes.epd.cpu_ratio.smg-evloop/pd",
				// The tokenizer's speed against Hugging Face and its allocation-free encode.
				"tokenizer.encode.speed_ratio.qwen3.4k",
				"tokenizer.encode.speed_ratio.qwen3.100k",
				"tokenizer.encode.speed_ratio.llama3.4k",
				"tokenizer.encode.speed_ratio.llama3.100k",
				"tokenizer.encode.max_allocs_per_encode",
				// The cost of tracing every request.
				"overhead.tracing.cpu_ratio.smg-evloop-cache_aware",
			} {
				if !gated[m] {
					t.Errorf("%s is not gated", m)
				}
			}
			// The CPU and latency targets: the full run only (the smoke's 2 s rows
			// see the machine's slow modes, docs/benchmarks-history.md).
			for _, m := range []string{
				"overhead.json.cpu_ratio.smg-evloop-cache_aware/nginx",
				"overhead.sse.cpu_ratio.smg-evloop-cache_aware/nginx",
				"overhead.json_open.cpu_ratio.smg-evloop-cache_aware/nginx",
				"overhead.json_open.p50_ratio.smg-evloop-cache_aware/nginx",
				"overhead.sse_unloaded.ttft_p50_ratio.smg-evloop-cache_aware/nginx",
				// The loops against HAProxy and the bare proxy (the fasthttp plane's gates).
				"overhead.json.cpu_ratio.smg-evloop-cache_aware/haproxy",
				"overhead.sse.cpu_ratio.smg-evloop-cache_aware/haproxy",
				"overhead.sse.cpu_ratio.smg-evloop-cache_aware/bare",
				"overhead.sse_paced.cpu_ratio.smg-evloop-cache_aware/haproxy",
			} {
				if name == "baseline.json" && !gated[m] {
					t.Errorf("%s is not gated", m)
				}
			}
			if name == "baseline-smoke.json" && !gated["quality.shared-prefix.load.ttft_p50_ratio_max.least_load/round_robin"] {
				t.Error("the smoke's herding check (least_load against round robin at 70% load) is not gated")
			}
			if name == "baseline.json" && !gated["quality.shared-prefix.sat.capacity_ratio.cache_aware/round_robin"] {
				t.Error("cache_aware's capacity at saturation (its 1.9x) is not gated")
			}
		})
	}
}

func TestLoadBaselineErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadBaseline(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "cannot read baseline") {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(p, []byte(`{"gates":[{"metric":"x","baseline":1,"direction":"sideways"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBaseline(p); err == nil || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("bad direction: %v", err)
	}
}

// TestQualityRegressionIsNamed: a routing-quality ratio past its committed gate fails the run
// with the metric's name, as make bench reports it.
func TestQualityRegressionIsNamed(t *testing.T) {
	b, err := LoadBaseline("baseline.json")
	if err != nil {
		t.Fatal(err)
	}
	m := fullReport().Metrics()
	const metric = "quality.shared-prefix.sat.capacity_ratio.cache_aware/round_robin"
	if _, err := b.Check(Measured{Values: m}); err != nil && strings.Contains(err.Error(), metric) {
		t.Fatalf("the fixture's 2.5x already fails: %v", err)
	}
	m[metric] = 1.5
	if _, err := b.Check(Measured{Values: m}); err == nil || !strings.Contains(err.Error(), "regression: "+metric+" = 1.500") {
		t.Errorf("capacity ratio 1.5 against the 1.9 gate: %v, want a regression naming %s", err, metric)
	}
}
