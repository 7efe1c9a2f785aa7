package bench

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	"github.com/smg-go/smg/internal/jsonx"
)

// Direction says which way a metric improves.
type Direction string

const (
	// LowerIsBetter fails when measured > baseline × (1 + tolerance): CPU ratios, latency ratios.
	LowerIsBetter Direction = "lower_is_better"
	// HigherIsBetter fails when measured < baseline × (1 - tolerance): hit-rate and throughput ratios.
	HigherIsBetter Direction = "higher_is_better"
)

// Gate is one gated metric of a baseline.
type Gate struct {
	// Metric names a value of Report.Metrics, e.g. "overhead.json.cpu_ratio.smg-cache_aware/bare".
	Metric string `json:"metric"`
	// Baseline is the value recorded when the baseline was last accepted.
	Baseline float64 `json:"baseline"`
	// Tolerance is the relative regression allowed, e.g. 0.15 for 15%.
	Tolerance float64   `json:"tolerance"`
	Direction Direction `json:"direction"`
	// Why says what the metric protects; printed with a failure.
	Why string `json:"why,omitempty"`
}

// Baseline is the committed file (bench/baseline.json, bench/baseline-smoke.json) the gate
// compares a run against. Only ratios measured within one run are gated, never absolute
// times, which vary across machines (docs/architecture.md); allocs/op is gated at exactly zero.
type Baseline struct {
	Note  string `json:"note,omitempty"`
	Gates []Gate `json:"gates"`
}

// LoadBaseline reads and validates a baseline file.
func LoadBaseline(path string) (*Baseline, error) {
	bl, err := jsonx.ReadFile[Baseline](path, "baseline")
	if err != nil {
		return nil, err
	}
	if err := bl.Validate(); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	return bl, nil
}

// Validate reports gates that cannot be evaluated.
func (b *Baseline) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, g := range b.Gates {
		switch {
		case g.Metric == "":
			errs = append(errs, fmt.Errorf("gate %d: metric is empty; name a metric smgbench prints in its metrics list", i))
		case seen[g.Metric]:
			errs = append(errs, fmt.Errorf("gate %s appears twice: keep one", g.Metric))
		}
		seen[g.Metric] = true
		if g.Direction != LowerIsBetter && g.Direction != HigherIsBetter {
			errs = append(errs, fmt.Errorf("gate %s: direction %q: use %q or %q", g.Metric, g.Direction, LowerIsBetter, HigherIsBetter))
		}
		if !(g.Tolerance >= 0 && g.Tolerance < 1) {
			errs = append(errs, fmt.Errorf("gate %s: tolerance %g: use a fraction in [0, 1), e.g. 0.15 for 15%%", g.Metric, g.Tolerance))
		}
		if !(g.Baseline > 0) || math.IsInf(g.Baseline, 0) {
			errs = append(errs, fmt.Errorf("gate %s: baseline %g: use the positive ratio a good run measured", g.Metric, g.Baseline))
		}
	}
	return errors.Join(errs...)
}

// Measured is what a run measured, as the gate reads it: every metric's value and, for the
// overhead suite's (the timings of the proxy and load cores), the hypervisor steal of the
// rows the value was computed from, in percent (Report.Measured). A metric without a steal
// entry (quality, routes, micro) is always judged.
type Measured struct {
	Values map[string]float64
	Steal  map[string]float64
}

// Gate statuses.
const (
	StatusOK         = "ok"
	StatusRegression = "REGRESSION"
	// StatusSkipped: the metric was not measured (a peer that is not installed, a suite
	// that did not run).
	StatusSkipped = "skipped"
	// StatusNotJudged: the metric was measured, but from a row the hypervisor stole more
	// than stealLimit of the cores' time from; its value says more about the host than
	// about the gateway, in either direction (a stolen peer row flatters the ratio).
	StatusNotJudged = "not judged"
)

// Verdict is one gate's outcome.
type Verdict struct {
	Gate     Gate
	Measured float64
	Limit    float64
	// StealPct is the steal of the rows behind Measured (0 when the metric carries none).
	StealPct float64
	// Status is StatusOK, StatusRegression, StatusSkipped or StatusNotJudged.
	Status string
	// timed: the metric carries a steal figure, so a disturbed host could make it not judged.
	timed bool
}

// Check evaluates every gate against the measured metrics. The error names each regressed
// metric; skipped and not-judged gates do not fail (NoneJudged says when nothing could be).
func (b *Baseline) Check(run Measured) ([]Verdict, error) {
	var vs []Verdict
	var errs []error
	for _, g := range b.Gates {
		v := Verdict{Gate: g, Status: StatusOK}
		if g.Direction == LowerIsBetter {
			v.Limit = g.Baseline * (1 + g.Tolerance)
		} else {
			v.Limit = g.Baseline * (1 - g.Tolerance)
		}
		m, ok := run.Values[g.Metric]
		v.StealPct, v.timed = run.Steal[g.Metric]
		switch {
		case !ok:
			v.Status = StatusSkipped
		case v.StealPct > stealLimit:
			v.Measured, v.Status = m, StatusNotJudged
		case math.IsNaN(m) || math.IsInf(m, 0):
			v.Measured, v.Status = m, StatusRegression
		default:
			v.Measured = m
			// The slack keeps a value exactly at the limit from failing on floating-point
			// rounding of baseline × (1 ± tolerance).
			const slack = 1e-9
			if (g.Direction == LowerIsBetter && m > v.Limit*(1+slack)) || (g.Direction == HigherIsBetter && m < v.Limit*(1-slack)) {
				v.Status = StatusRegression
			}
		}
		if v.Status == StatusRegression {
			errs = append(errs, fmt.Errorf("regression: %s = %.3f, limit %.3f (baseline %.3f, %s, tolerance %.0f%%)%s",
				g.Metric, v.Measured, v.Limit, g.Baseline, g.Direction, g.Tolerance*100, why(g.Why)))
		}
		vs = append(vs, v)
	}
	return vs, errors.Join(errs...)
}

// NoneJudged fails a run in which the host disturbed every measured overhead gate: each one's
// rows had more than stealLimit steal, so the run measured the machine, and passing would
// say the gateway was checked when it was not. One judged timing gate is enough to pass
// (each not-judged gate is still listed, and named on stderr by the caller).
func NoneJudged(vs []Verdict) error {
	var stolen []string
	for _, v := range vs {
		if !v.timed || v.Status == StatusSkipped {
			continue
		}
		if v.Status != StatusNotJudged {
			return nil
		}
		stolen = append(stolen, fmt.Sprintf("%s (steal %.0f%%)", v.Gate.Metric, v.StealPct))
	}
	if len(stolen) == 0 {
		return nil
	}
	return fmt.Errorf("no overhead gate could be judged: the hypervisor stole more than %d%% of the proxy and load cores' time in the rows behind every one of them (%s); the run measured the host, not the gateway: run it again when the machine is quieter",
		stealLimit, strings.Join(stolen, ", "))
}

// NotJudged names the gates a disturbed host kept from being judged.
func NotJudged(vs []Verdict) []string {
	var names []string
	for _, v := range vs {
		if v.Status == StatusNotJudged {
			names = append(names, v.Gate.Metric)
		}
	}
	return names
}

// Confirmed merges a run's metrics with a confirmation run's. For each gated metric a value
// the gate can judge (steal at most stealLimit) beats one it cannot; between two judged
// values (or two not judged) the one more favourable by the gate's direction wins, with its
// steal. So a metric fails the merged check only when both runs put it past its limit, and
// is not judged only when both runs were disturbed. A missing or NaN value counts as no
// measurement. Ungated metrics keep the first run's value.
func (b *Baseline) Confirmed(first, second Measured) Measured {
	merged := Measured{Values: maps.Clone(first.Values), Steal: maps.Clone(first.Steal)}
	if merged.Steal == nil {
		merged.Steal = map[string]float64{}
	}
	for _, g := range b.Gates {
		v2, ok := second.Values[g.Metric]
		if !ok || math.IsNaN(v2) {
			continue
		}
		s2, timed2 := second.Steal[g.Metric]
		v1, ok := merged.Values[g.Metric]
		s1 := merged.Steal[g.Metric]
		judged1, judged2 := s1 <= stealLimit, s2 <= stealLimit
		favourable := (g.Direction == LowerIsBetter && v2 < v1) || (g.Direction == HigherIsBetter && v2 > v1)
		if !ok || math.IsNaN(v1) || (judged2 && !judged1) || (judged1 == judged2 && favourable) {
			merged.Values[g.Metric] = v2
			if timed2 {
				merged.Steal[g.Metric] = s2
			} else {
				delete(merged.Steal, g.Metric)
			}
		}
	}
	return merged
}

func why(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// VerdictTable renders verdicts as Markdown.
func VerdictTable(vs []Verdict) string {
	var sb strings.Builder
	sb.WriteString("| gated metric | measured | limit | baseline | status |\n|---|---|---|---|---|\n")
	for _, v := range vs {
		meas, status := "–", v.Status
		if v.Status != StatusSkipped {
			meas = fmt.Sprintf("%.3f", v.Measured)
		}
		if v.Status == StatusNotJudged {
			status = fmt.Sprintf("%s (steal %.0f%%)", v.Status, v.StealPct)
		}
		op := "≤"
		if v.Gate.Direction == HigherIsBetter {
			op = "≥"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s %.3f | %.3f | %s |\n", v.Gate.Metric, meas, op, v.Limit, v.Gate.Baseline, status)
	}
	return sb.String()
}

// sortedKeys returns m's keys in order, for stable output.
func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
