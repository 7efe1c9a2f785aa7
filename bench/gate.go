package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"sort"
	"strings"
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
// times, which vary across machines (DESIGN.md §8); allocs/op is gated at exactly zero.
type Baseline struct {
	Note  string `json:"note,omitempty"`
	Gates []Gate `json:"gates"`
}

// LoadBaseline reads and validates a baseline file.
func LoadBaseline(path string) (*Baseline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read baseline: %w", err)
	}
	var bl Baseline
	if err := json.Unmarshal(b, &bl); err != nil {
		return nil, fmt.Errorf("cannot parse baseline %s: %w", path, err)
	}
	if err := bl.Validate(); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	return &bl, nil
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

// Verdict is one gate's outcome.
type Verdict struct {
	Gate     Gate
	Measured float64
	Limit    float64
	// Status is "ok", "REGRESSION" or "skipped" (the metric was not measured, e.g. a peer
	// that is not installed, or a suite that did not run).
	Status string
}

// Check evaluates every gate against the measured metrics. The error names each regressed
// metric; skipped gates do not fail.
func (b *Baseline) Check(metrics map[string]float64) ([]Verdict, error) {
	var vs []Verdict
	var errs []error
	for _, g := range b.Gates {
		v := Verdict{Gate: g, Status: "ok"}
		if g.Direction == LowerIsBetter {
			v.Limit = g.Baseline * (1 + g.Tolerance)
		} else {
			v.Limit = g.Baseline * (1 - g.Tolerance)
		}
		m, ok := metrics[g.Metric]
		switch {
		case !ok:
			v.Status = "skipped"
		case math.IsNaN(m) || math.IsInf(m, 0):
			v.Measured, v.Status = m, "REGRESSION"
		default:
			v.Measured = m
			// The slack keeps a value exactly at the limit from failing on floating-point
			// rounding of baseline × (1 ± tolerance).
			const slack = 1e-9
			if (g.Direction == LowerIsBetter && m > v.Limit*(1+slack)) || (g.Direction == HigherIsBetter && m < v.Limit*(1-slack)) {
				v.Status = "REGRESSION"
			}
		}
		if v.Status == "REGRESSION" {
			errs = append(errs, fmt.Errorf("regression: %s = %.3f, limit %.3f (baseline %.3f, %s, tolerance %.0f%%)%s",
				g.Metric, v.Measured, v.Limit, g.Baseline, g.Direction, g.Tolerance*100, why(g.Why)))
		}
		vs = append(vs, v)
	}
	return vs, errors.Join(errs...)
}

// Confirmed merges a run's metrics with a confirmation run's: each gated metric takes the
// value more favourable by its gate's direction (a missing value counts as no measurement),
// so it fails the merged check only when both runs put it past its limit. Ungated metrics
// keep the first run's value.
func (b *Baseline) Confirmed(first, second map[string]float64) map[string]float64 {
	merged := maps.Clone(first)
	for _, g := range b.Gates {
		v2, ok := second[g.Metric]
		if !ok || math.IsNaN(v2) {
			continue
		}
		v1, ok := merged[g.Metric]
		if !ok || math.IsNaN(v1) || (g.Direction == LowerIsBetter && v2 < v1) || (g.Direction == HigherIsBetter && v2 > v1) {
			merged[g.Metric] = v2
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
		meas := "–"
		if v.Status != "skipped" {
			meas = fmt.Sprintf("%.3f", v.Measured)
		}
		op := "≤"
		if v.Gate.Direction == HigherIsBetter {
			op = "≥"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s %.3f | %.3f | %s |\n", v.Gate.Metric, meas, op, v.Limit, v.Gate.Baseline, v.Status)
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
