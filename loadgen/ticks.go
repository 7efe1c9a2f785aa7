package loadgen

import (
	"math"
	"strconv"
	"strings"
)

// Axis limits: values are clamped to ±maxAxisValue (31 700 years in milliseconds) and a step
// is never finer than minAxisStep or a 10⁻⁴ of the axis' magnitude, so that every label
// fits the chart's left margin in at most maxTickLabel characters.
const (
	maxAxisValue = 1e15
	minAxisStep  = 1e-3
	maxTickLabel = 8
)

// scale is a linear axis from Min to Max with a tick every Step; Step is 1, 2 or 5 times a
// power of ten and Min and Max are multiples of it, so every tick reads as a round number.
type scale struct {
	Min, Max, Step float64
}

// niceScale is the tightest scale with at most maxTicks (at least 2) intervals whose range
// holds [lo, hi].
func niceScale(lo, hi float64, maxTicks int) scale {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		lo, hi = 0, 1
	}
	lo, hi = clampAxis(lo), clampAxis(hi)
	if lo > hi {
		lo, hi = hi, lo
	}
	if hi == lo { // one value: an axis from it to its double (or to 1 for 0)
		hi = lo + max(math.Abs(lo), 1)
	}
	maxTicks = max(maxTicks, 2) // a range across 0 needs two
	magnitude := max(math.Abs(lo), math.Abs(hi))
	step := niceStepAtLeast(max((hi-lo)/float64(maxTicks), minAxisStep, magnitude*1e-4))
	for {
		s := scale{Min: math.Floor(lo/step) * step, Max: math.Ceil(hi/step) * step, Step: step}
		if s.Min > lo { // 6.8 / 0.05 * 0.05 = 6.800000000000001
			s.Min -= step
		}
		if s.Max < hi {
			s.Max += step
		}
		if s.Max == s.Min {
			s.Max += step
		}
		if s.intervals() <= maxTicks {
			return s
		}
		step = niceStepAtLeast(step * 1.5) // rounding put lo or hi one step out: the next nice step
	}
}

// intervals is the number of steps from Min to Max.
func (s scale) intervals() int { return int(math.Round((s.Max - s.Min) / s.Step)) }

// ticks are the values Min, Min+Step, ..., Max, each computed from its index so that no
// error accumulates.
func (s scale) ticks() []float64 {
	n := s.intervals()
	out := make([]float64, 0, n+1)
	for i := 0; i <= n; i++ {
		v := s.Min + float64(i)*s.Step
		if math.Abs(v) < s.Step*1e-9 {
			v = 0 // not -0 or 1e-17
		}
		out = append(out, v)
	}
	return out
}

// pos maps v in [Min, Max] to [0, 1].
func (s scale) pos(v float64) float64 { return (v - s.Min) / (s.Max - s.Min) }

// label prints tick v of s: the step's decimals and no more, thousands as k, M, G or T once
// the axis reaches 10 000, never an exponent.
func (s scale) label(v float64) string {
	div, suffix := 1.0, ""
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if max(math.Abs(s.Min), math.Abs(s.Max)) >= 10*u.div {
			div, suffix = u.div, u.suffix
			break
		}
	}
	out := strconv.FormatFloat(v/div, 'f', decimals(s.Step/div), 64)
	if strings.TrimLeft(out, "-0.") == "" {
		return "0"
	}
	return out + suffix
}

// decimals is how many decimal places print step exactly (step is 1, 2 or 5 times a power of
// ten, so at most that power's).
func decimals(step float64) int {
	for d := 0; d < 15; d++ {
		x := step * math.Pow(10, float64(d))
		if math.Abs(x-math.Round(x)) < 1e-6*x {
			return d
		}
	}
	return 15
}

// niceStepAtLeast is the smallest of 1, 2, 5 × 10^k that is at least x (x > 0).
func niceStepAtLeast(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-12) {
			return m * p
		}
	}
	return 10 * p
}

func clampAxis(v float64) float64 { return max(-maxAxisValue, min(maxAxisValue, v)) }

// logTicks are the values 1, 2 and 5 × 10^k within [lo, hi] (lo > 0) for a logarithmic axis;
// when the range spans more than three decades only the powers of ten are kept, so that
// labels do not collide.
func logTicks(lo, hi float64) []float64 {
	var out []float64
	mults := []float64{1, 2, 5}
	if hi/lo > 1e3 {
		mults = []float64{1}
	}
	for p := math.Pow(10, math.Floor(math.Log10(lo))); p <= hi; p *= 10 {
		for _, m := range mults {
			if v := m * p; v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
				out = append(out, v)
			}
		}
	}
	return out
}

// logLabel prints a tick of logTicks with the digits its power of ten needs.
func logLabel(v float64) string {
	return scale{Min: v, Max: v, Step: math.Pow(10, math.Floor(math.Log10(v)+1e-9))}.label(v)
}
