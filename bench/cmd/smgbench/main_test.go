package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/smg-go/smg/bench"
)

func TestQualityConfigSmoke(t *testing.T) {
	cfg, err := qualityConfig(&options{smoke: true}, bench.Binaries{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Cases) != 1 || cfg.Cases[0].Name != "shared-prefix" || cfg.Policies == nil || len(cfg.Policies) != 0 ||
		strings.Join(cfg.LoadPolicies, ",") != "least_load,cache_aware" || cfg.Capacity != smokeCapacity || cfg.Repeats != 1 || cfg.Cases[0].LoadTimeScale != smokeLoadTimeScale {
		t.Errorf("smoke: cases %d (%v), saturation %v, load %v, capacity %g, repeats %d; want shared-prefix load rows only at the calibrated capacity",
			len(cfg.Cases), cfg.Cases, cfg.Policies, cfg.LoadPolicies, cfg.Capacity, cfg.Repeats)
	}
}

// TestRoutesConfigSmoke: the smoke's routes suite measures what its gates read, without the
// direct rows; make bench keeps them.
func TestRoutesConfigSmoke(t *testing.T) {
	noInstall := func(string, ...any) {}
	if smoke := routesConfig(&options{smoke: true}, bench.Binaries{}, noInstall); !smoke.SkipDirect {
		t.Error("the smoke's routes suite measures the direct rows")
	}
	if full := routesConfig(&options{}, bench.Binaries{}, noInstall); full.SkipDirect {
		t.Error("make bench's routes suite skips the direct rows")
	}
}

func TestQualityConfigFlags(t *testing.T) {
	o := &options{qualityCases: "heterogeneous, mixed-size", qualityPolicies: "round_robin,random", qualityLoadPolicies: "none", qualitySatScale: 3}
	cfg, err := qualityConfig(o, bench.Binaries{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Cases) != 2 || cfg.Cases[0].Name != "heterogeneous" || cfg.Cases[1].SatTimeScale != 3 || cfg.Cases[1].LoadTimeScale != 2 ||
		strings.Join(cfg.Policies, ",") != "round_robin,random" || cfg.LoadPolicies == nil || len(cfg.LoadPolicies) != 0 || cfg.Capacity != 0 {
		t.Errorf("flags mapped to cases %v, policies %v, load policies %v, capacity %g", cfg.Cases, cfg.Policies, cfg.LoadPolicies, cfg.Capacity)
	}
	if _, err := qualityConfig(&options{qualityCases: "bogus"}, bench.Binaries{}, nil); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown case: %v", err)
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
