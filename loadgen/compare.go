package loadgen

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Regression is a metric that got worse by more than the allowed fraction.
type Regression struct {
	Metric string  `json:"metric"` // e.g. "ttft_ms.p99", "request_throughput", "error_rate"
	Base   float64 `json:"base"`
	New    float64 `json:"new"`
	// Change is the relative change in the bad direction (0.12 = 12% worse); for error_rate
	// it is the absolute increase of the failed fraction.
	Change float64 `json:"change"`
}

func (r Regression) String() string {
	return fmt.Sprintf("%s regressed by %.1f%%: base %.4g, new %.4g", r.Metric, r.Change*100, r.Base, r.New)
}

// Compare lists the metrics of newer that are worse than base by more than maxRegression
// (0.05 = 5%), worst first. Throughputs regress when they fall, latencies (mean, median,
// p90, p99 of TTFT, TPOT, ITL and end-to-end) when they rise, each relative to base;
// error_rate (failed / all requests) regresses when it rises by more than maxRegression
// absolute. Metrics without samples on either side, or zero in base, are skipped.
func Compare(base, newer *Result, maxRegression float64) []Regression {
	var out []Regression
	higherBetter := []struct {
		name      string
		base, new float64
	}{
		{"request_throughput", base.RequestThroughput, newer.RequestThroughput},
		{"input_throughput", base.InputThroughput, newer.InputThroughput},
		{"output_throughput", base.OutputThroughput, newer.OutputThroughput},
	}
	for _, m := range higherBetter {
		if m.base > 0 {
			if change := (m.base - m.new) / m.base; change > maxRegression {
				out = append(out, Regression{Metric: m.name, Base: m.base, New: m.new, Change: change})
			}
		}
	}
	latencies := []struct {
		name      string
		base, new Summary
	}{
		{"ttft_ms", base.TTFT, newer.TTFT},
		{"tpot_ms", base.TPOT, newer.TPOT},
		{"itl_ms", base.ITL, newer.ITL},
		{"e2e_latency_ms", base.E2E, newer.E2E},
	}
	for _, l := range latencies {
		if l.base.Count == 0 || l.new.Count == 0 {
			continue
		}
		for _, stat := range []struct {
			name      string
			base, new float64
		}{
			{"mean", l.base.Mean, l.new.Mean},
			{"median", l.base.Median, l.new.Median},
			{"p90", l.base.P90, l.new.P90},
			{"p99", l.base.P99, l.new.P99},
		} {
			if stat.base > 0 {
				if change := (stat.new - stat.base) / stat.base; change > maxRegression {
					out = append(out, Regression{Metric: l.name + "." + stat.name, Base: stat.base, New: stat.new, Change: change})
				}
			}
		}
	}
	if rb, rn := errorRate(base), errorRate(newer); rn-rb > maxRegression {
		out = append(out, Regression{Metric: "error_rate", Base: rb, New: rn, Change: rn - rb})
	}
	sortRegressions(out)
	return out
}

func errorRate(r *Result) float64 {
	if all := r.Completed + r.Failed; all > 0 {
		return float64(r.Failed) / float64(all)
	}
	return 0
}

func sortRegressions(rs []Regression) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Change > rs[j-1].Change; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// ParseFraction reads a regression limit: "5%" or "0.05" both mean 0.05.
func ParseFraction(s string) (float64, error) {
	t := strings.TrimSpace(s)
	percent := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%q is not a non-negative fraction: write e.g. 5%% or 0.05", s)
	}
	if percent {
		v /= 100
	}
	return v, nil
}
