package loadgen

import (
	"math"
	"slices"
)

// Summary describes a sample of latencies, in milliseconds. Percentiles interpolate
// linearly between the two nearest order statistics, like numpy.percentile's default
// ("linear", Hyndman–Fan type 7, which bench_serving uses): for sorted x[0..n-1] the p-th
// percentile is x[h] + (h-⌊h⌋)(x[⌊h⌋+1]-x[⌊h⌋]) with h = (n-1)·p/100. An empty sample is all
// zeros with Count 0.
type Summary struct {
	Count  int     `json:"count"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	P95    float64 `json:"p95"`
	P99    float64 `json:"p99"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Std    float64 `json:"std"` // population standard deviation, as numpy.std
}

// summarize sorts xs in place and describes it.
func summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var sq float64
	for _, x := range xs {
		sq += (x - mean) * (x - mean)
	}
	return Summary{
		Count:  len(xs),
		Mean:   mean,
		Median: percentileSorted(xs, 50),
		P90:    percentileSorted(xs, 90),
		P95:    percentileSorted(xs, 95),
		P99:    percentileSorted(xs, 99),
		Min:    xs[0],
		Max:    xs[len(xs)-1],
		Std:    math.Sqrt(sq / float64(len(xs))),
	}
}

// percentileSorted is the p-th percentile (0 ≤ p ≤ 100) of ascending, non-empty xs, by
// linear interpolation (see Summary).
func percentileSorted(xs []float64, p float64) float64 {
	h := float64(len(xs)-1) * p / 100
	lo := int(math.Floor(h))
	if lo >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	return xs[lo] + (h-float64(lo))*(xs[lo+1]-xs[lo])
}
