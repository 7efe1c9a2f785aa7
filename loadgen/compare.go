package loadgen

import (
	"fmt"
	"io"
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

// Better says which way a metric improves; Informational metrics are shown, never gated.
type Better int

const (
	Informational Better = iota
	HigherIsBetter
	LowerIsBetter
)

// MetricDiff is one metric of two results side by side.
type MetricDiff struct {
	Metric string
	Base   float64
	New    float64
	Better Better
	// Regressed is set when the metric got worse by more than the limit Diff was given.
	Regressed bool
	// Worse is how much worse New is than Base: relative (0.12 = 12% worse, negative when
	// better), absolute for error_rate; 0 when Base is 0 or the metric is informational.
	Worse float64
	// Absolute marks a metric whose Worse is an absolute difference, not a fraction of Base.
	Absolute bool
}

// Diff lists every metric of base and newer side by side, in a fixed order, and marks those
// worse than base by more than maxRegression (0.05 = 5%). Throughputs regress when they fall,
// latencies (mean, median, p90, p99 of TTFT, TPOT, ITL and end-to-end) when they rise, each
// relative to base; error_rate (failed / all requests) regresses when it rises by more than
// maxRegression absolute. A latency without samples on either side is left out; a gated
// metric that is zero in base is shown and never regresses.
func Diff(base, newer *Result, maxRegression float64) []MetricDiff {
	var out []MetricDiff
	add := func(name string, b, n float64, better Better) {
		d := MetricDiff{Metric: name, Base: b, New: n, Better: better}
		if b != 0 {
			switch better {
			case HigherIsBetter:
				d.Worse = (b - n) / b
			case LowerIsBetter:
				d.Worse = (n - b) / b
			}
		}
		d.Regressed = better != Informational && d.Worse > maxRegression
		out = append(out, d)
	}
	add("request_throughput", base.RequestThroughput, newer.RequestThroughput, HigherIsBetter)
	add("input_throughput", base.InputThroughput, newer.InputThroughput, HigherIsBetter)
	add("output_throughput", base.OutputThroughput, newer.OutputThroughput, HigherIsBetter)
	add("total_token_throughput", base.TotalTokenThroughput, newer.TotalTokenThroughput, Informational)
	for _, l := range []struct {
		name      string
		base, new Summary
	}{
		{"ttft_ms", base.TTFT, newer.TTFT},
		{"tpot_ms", base.TPOT, newer.TPOT},
		{"itl_ms", base.ITL, newer.ITL},
		{"e2e_latency_ms", base.E2E, newer.E2E},
	} {
		if l.base.Count == 0 || l.new.Count == 0 {
			continue
		}
		add(l.name+".mean", l.base.Mean, l.new.Mean, LowerIsBetter)
		add(l.name+".median", l.base.Median, l.new.Median, LowerIsBetter)
		add(l.name+".p90", l.base.P90, l.new.P90, LowerIsBetter)
		add(l.name+".p95", l.base.P95, l.new.P95, Informational)
		add(l.name+".p99", l.base.P99, l.new.P99, LowerIsBetter)
		add(l.name+".max", l.base.Max, l.new.Max, Informational)
	}
	rb, rn := errorRate(base), errorRate(newer)
	out = append(out, MetricDiff{Metric: "error_rate", Base: rb, New: rn, Better: LowerIsBetter, Worse: rn - rb,
		Absolute: true, Regressed: rn-rb > maxRegression})
	add("completed", float64(base.Completed), float64(newer.Completed), Informational)
	add("failed", float64(base.Failed), float64(newer.Failed), Informational)
	add("cache_hit_rate", base.CacheHitRate, newer.CacheHitRate, Informational)
	add("concurrency", base.Concurrency, newer.Concurrency, Informational)
	add("client_cpu_per_request_us", base.ClientCPUPerRequestUS, newer.ClientCPUPerRequestUS, Informational)
	return out
}

// Compare lists the metrics of newer that are worse than base by more than maxRegression,
// worst first (Diff says which metrics and how).
func Compare(base, newer *Result, maxRegression float64) []Regression {
	var out []Regression
	for _, d := range Diff(base, newer, maxRegression) {
		if d.Regressed {
			out = append(out, Regression{Metric: d.Metric, Base: d.Base, New: d.New, Change: d.Worse})
		}
	}
	sortRegressions(out)
	return out
}

// WriteDiffTable writes diffs as an aligned text table: metric, base, new, the change of new
// against base (relative, or in percentage points for error_rate) and a verdict: "worse" or
// "better" for gated metrics past a tenth of a percent, "REGRESSION" past the limit.
func WriteDiffTable(w io.Writer, diffs []MetricDiff) error {
	rows := [][]string{{"metric", "base", "new", "change", ""}}
	for _, d := range diffs {
		rows = append(rows, []string{d.Metric, formatValue(d.Base), formatValue(d.New), formatChange(d), verdict(d)})
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			switch {
			case i == 0:
				fmt.Fprintf(&b, "%-*s", widths[i], c)
			case i == len(r)-1:
				if c != "" {
					b.WriteString("  " + c)
				}
			default:
				fmt.Fprintf(&b, "  %*s", widths[i], c)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatValue prints a metric with four significant digits (all integer digits from 1000 on),
// without an exponent unless it is below 1e-4.
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1e-4:
		return strconv.FormatFloat(roundSig(v, 4), 'f', -1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func roundSig(v float64, digits int) float64 {
	scale := math.Pow(10, float64(digits)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*scale) / scale
}

// formatChange is new against base: "+12.3%", "-4.0%", "+0.5 pp" for error_rate, "n/a"
// when base is 0 and new is not.
func formatChange(d MetricDiff) string {
	if d.Absolute {
		return fmt.Sprintf("%+.1f pp", 100*(d.New-d.Base))
	}
	switch {
	case d.Base == d.New:
		return "0.0%"
	case d.Base == 0:
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*(d.New-d.Base)/math.Abs(d.Base))
}

func verdict(d MetricDiff) string {
	switch {
	case d.Regressed:
		return "REGRESSION"
	case d.Better == Informational:
		return ""
	case d.Worse > 0.001:
		return "worse"
	case d.Worse < -0.001:
		return "better"
	}
	return ""
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
