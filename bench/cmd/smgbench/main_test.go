package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/bench"
)

func mustParse(t *testing.T, args ...string) *options {
	t.Helper()
	o, err := parseArgs(args)
	if err != nil {
		t.Fatalf("parseArgs(%q): %v", args, err)
	}
	return o
}

func TestQualityConfigSmoke(t *testing.T) {
	cfg, err := qualityConfig(mustParse(t, "--smoke"), bench.Binaries{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Cases) != 1 || cfg.Cases[0].Name != "shared-prefix" || cfg.Policies == nil || len(cfg.Policies) != 0 ||
		strings.Join(cfg.LoadPolicies, ",") != "least_load,cache_aware" || cfg.Capacity != smokeCapacity || cfg.Repeats != 1 || cfg.Cases[0].LoadTimeScale != smokeLoadTimeScale {
		t.Errorf("smoke: cases %d (%v), saturation %v, load %v, capacity %g, repeats %d; want shared-prefix load rows only at the calibrated capacity",
			len(cfg.Cases), cfg.Cases, cfg.Policies, cfg.LoadPolicies, cfg.Capacity, cfg.Repeats)
	}
	// A flag given beside --smoke wins over the smoke's setting.
	cfg, err = qualityConfig(mustParse(t, "--smoke", "--quality-repeats", "2", "--quality-load-time-scale", "3"), bench.Binaries{}, nil)
	if err != nil || cfg.Repeats != 2 || cfg.Cases[0].LoadTimeScale != 3 {
		t.Errorf("smoke with --quality-repeats 2 --quality-load-time-scale 3: repeats %d, scale %g, %v", cfg.Repeats, cfg.Cases[0].LoadTimeScale, err)
	}
}

// TestRoutesConfigSmoke: the smoke's routes suite measures what its gates read, without the
// direct rows; make bench keeps them.
func TestRoutesConfigSmoke(t *testing.T) {
	if smoke := routesConfig(mustParse(t, "--smoke"), bench.Binaries{}, "wrk"); !smoke.SkipDirect {
		t.Error("the smoke's routes suite measures the direct rows")
	}
	if full := routesConfig(mustParse(t), bench.Binaries{}, "wrk"); full.SkipDirect {
		t.Error("make bench's routes suite skips the direct rows")
	}
}

func TestQualityConfigFlags(t *testing.T) {
	o := mustParse(t, "--quality-cases", "heterogeneous, mixed-size", "--quality-policies", "round_robin,random", "--quality-load-policies", "none", "--quality-sat-time-scale", "3")
	cfg, err := qualityConfig(o, bench.Binaries{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Cases) != 2 || cfg.Cases[0].Name != "heterogeneous" || cfg.Cases[1].SatTimeScale != 3 || cfg.Cases[1].LoadTimeScale != 2 ||
		strings.Join(cfg.Policies, ",") != "round_robin,random" || cfg.LoadPolicies == nil || len(cfg.LoadPolicies) != 0 || cfg.Capacity != 0 {
		t.Errorf("flags mapped to cases %v, policies %v, load policies %v, capacity %g", cfg.Cases, cfg.Policies, cfg.LoadPolicies, cfg.Capacity)
	}
	if _, err := qualityConfig(mustParse(t, "--quality-cases", "bogus"), bench.Binaries{}, nil); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown case: %v", err)
	}
}

// The Makefile's `make bench` and `make bench-smoke` command lines, and the docs' partial
// runs, map to the configurations they always ran (every flag's default is now its
// package's DefaultConfig value instead of a zero the suite filled), and
// every suite validates them.
func TestMakefileCommandLines(t *testing.T) {
	type want struct {
		baseline                                       string
		duration                                       time.Duration
		rounds, warmup, pdRounds, pacedRounds, retries int
		openLoop, unloaded, syscall, scaling           int
		pdSkipSSE                                      bool
		policies, cases, satPolicies, loadPolicies     string
		repeats                                        int
		loadDuration                                   time.Duration
		capacity, loadScale                            float64
		benchTime                                      string
	}
	full := want{baseline: "bench/baseline.json", duration: 3 * time.Second, rounds: 3, warmup: 2000, pdRounds: 0, pacedRounds: 0, retries: 2,
		openLoop: 2, unloaded: 2, syscall: 1, scaling: 2, policies: "cache_aware,round_robin",
		cases: "shared-prefix,multi-turn,mixed-size,heterogeneous,shared-prefix-grpc,kv-events-grpc", satPolicies: strings.Join(bench.DefaultQualityPolicies, ","),
		loadPolicies: "least_load,power_of_two,cache_aware", repeats: 3, loadDuration: 10 * time.Second, capacity: 0, loadScale: 2, benchTime: "5000x"}
	smoke := want{baseline: "bench/baseline-smoke.json", duration: 2 * time.Second, rounds: 3, warmup: 500, pdRounds: 3, pacedRounds: -1, retries: 1,
		openLoop: 2, unloaded: 2, syscall: 1, scaling: 2, pdSkipSSE: true, policies: "cache_aware",
		cases: "shared-prefix", satPolicies: "", loadPolicies: "least_load,cache_aware", repeats: 1, loadDuration: 6 * time.Second,
		capacity: smokeCapacity, loadScale: smokeLoadTimeScale, benchTime: "1000x"}
	partial := full // docs/benchmarks.md's partial runs (one suite, or a before/after pair)
	partial.baseline, partial.pdRounds, partial.pacedRounds = "none", 1, 1
	skips := full
	skips.baseline, skips.policies, skips.pdRounds, skips.pacedRounds, skips.openLoop, skips.unloaded, skips.syscall, skips.scaling = "none", "cache_aware", -1, -1, -1, -1, -1, -1
	for name, tc := range map[string]struct {
		args []string
		want want
	}{
		"make bench":       {[]string{"--bin", "bin", "--out", "bin/bench.json", "--quality-html", "bin/bench-quality.html"}, full},
		"make bench-smoke": {[]string{"--bin", "bin", "--smoke", "--out", "bin/bench-smoke.json", "--quality-html", "bin/bench-smoke-quality.html"}, smoke},
		"run H":            {[]string{"--bin", "bin", "--suites", "overhead", "--baseline", "none", "--pd-rounds", "1", "--paced-rounds", "1"}, partial},
		"skipped rows": {[]string{"--bin", "bin", "--suites", "overhead", "--baseline", "none", "--policies", "cache_aware", "--pd-rounds", "-1", "--paced-rounds", "-1",
			"--open-loop-rounds", "-1", "--unloaded-rounds", "-1", "--syscall-rounds", "-1", "--scaling-rounds", "-1", "--rounds", "3"}, skips},
	} {
		o := mustParse(t, tc.args...)
		oc := overheadConfig(o, bench.Binaries{})
		qc, err := qualityConfig(o, bench.Binaries{}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rc := routesConfig(o, bench.Binaries{}, "wrk")
		mc := microConfig(o)
		baseline := o.baseline
		if o.smoke && !o.set["baseline"] {
			baseline = "bench/baseline-smoke.json"
		}
		var cases []string
		for _, k := range qc.Cases {
			cases = append(cases, k.Name)
		}
		got := want{baseline: baseline, duration: oc.Duration, rounds: oc.Rounds, warmup: oc.Warmup, pdRounds: oc.PDRounds, pacedRounds: oc.PacedRounds,
			retries: oc.StealRetries, openLoop: oc.OpenLoopRounds, unloaded: oc.UnloadedRounds, syscall: oc.SyscallRounds, scaling: oc.ScalingRounds,
			pdSkipSSE: oc.PDSkipSSE, policies: strings.Join(oc.Policies, ","), cases: strings.Join(cases, ","), satPolicies: strings.Join(qc.Policies, ","),
			loadPolicies: strings.Join(qc.LoadPolicies, ","), repeats: qc.Repeats, loadDuration: qc.LoadDuration, capacity: qc.Capacity, loadScale: qc.Cases[0].LoadTimeScale, benchTime: mc.BenchTime}
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, tc.want)
		}
		if oc.Connections != 32 || oc.Workers != 4 || oc.PDPolicy != "round_robin" || oc.PacedIntervalMS != 20 || oc.PacedConnections != 256 ||
			oc.PacedDuration != 4*time.Second || oc.StreamTokens != 32 || oc.OpenLoopRate != 2000 || oc.LoadCore != 1 || oc.ProxyCore != 0 {
			t.Errorf("%s: overhead config %+v: the defaults changed", name, oc)
		}
		if qc.SatDuration != 8*time.Second || qc.LoadFraction != 0.7 || qc.KVTokens != 65536 || qc.Workers != 8 || qc.WarmupSeconds != 16 || qc.Seed != 1 {
			t.Errorf("%s: quality config %+v: the defaults changed", name, qc)
		}
		for suite, err := range map[string]error{"overhead": oc.Validate(), "quality": qc.Validate(), "routes": rc.Validate(), "micro": mc.Validate()} {
			if err != nil {
				t.Errorf("%s: the %s suite refuses its configuration: %v", name, suite, err)
			}
		}
	}
}

func TestSuitesToMeasureAgainAreTheTimingSuites(t *testing.T) {
	verdicts := []bench.Verdict{
		{Gate: bench.Gate{Metric: "overhead.pd.json.cpu_ratio.smg-round_robin/regular-smg-cache_aware"}, Status: bench.StatusRegression},
		{Gate: bench.Gate{Metric: "overhead.json.cpu_ratio.smg-cache_aware/bare"}, Status: bench.StatusOK},
		{Gate: bench.Gate{Metric: "quality.shared-prefix.load.throughput_ratio_min.least_load/round_robin"}, Status: bench.StatusSkipped},
		{Gate: bench.Gate{Metric: "micro.allocs.BenchmarkPick"}, Status: bench.StatusRegression},
		{Gate: bench.Gate{Metric: "routes.x"}, Status: bench.StatusOK},
	}
	if got := slices.Sorted(maps.Keys(suitesToMeasureAgain(verdicts))); !slices.Equal(got, []string{"overhead"}) {
		t.Errorf("suites to re-measure = %v, want [overhead] (micro allocs are deterministic, skipped and ok gates need nothing)", got)
	}
	verdicts[2].Status = bench.StatusRegression
	if got := slices.Sorted(maps.Keys(suitesToMeasureAgain(verdicts))); !slices.Equal(got, []string{"overhead", "quality"}) {
		t.Errorf("suites to re-measure = %v, want [overhead quality]", got)
	}
	// A gate the host's steal kept from being judged is measured again too.
	verdicts[0].Status, verdicts[2].Status, verdicts[3].Status, verdicts[4].Status = bench.StatusOK, bench.StatusOK, bench.StatusOK, bench.StatusNotJudged
	if got := slices.Sorted(maps.Keys(suitesToMeasureAgain(verdicts))); !slices.Equal(got, []string{"routes"}) {
		t.Errorf("suites to re-measure = %v, want [routes] (a not-judged gate)", got)
	}
	if got := describeAgain(verdicts); got != "routes.x not judged (hypervisor steal)" {
		t.Errorf("describeAgain = %q", got)
	}
}
