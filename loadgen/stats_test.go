package loadgen

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bruteOrderStatistic is the k-th smallest of xs (0-based) found without sorting: the value
// with fewer than k+1 values below it and at least k+1 at or below it.
func bruteOrderStatistic(xs []float64, k int) float64 {
	for _, cand := range xs {
		below, atOrBelow := 0, 0
		for _, x := range xs {
			if x < cand {
				below++
			}
			if x <= cand {
				atOrBelow++
			}
		}
		if below <= k && k < atOrBelow {
			return cand
		}
	}
	panic("no order statistic")
}

// brutePercentile is numpy's linear percentile from order statistics.
func brutePercentile(xs []float64, p float64) float64 {
	h := float64(len(xs)-1) * p / 100
	lo := int(math.Floor(h))
	a := bruteOrderStatistic(xs, lo)
	if lo+1 >= len(xs) {
		return a
	}
	return a + (h-float64(lo))*(bruteOrderStatistic(xs, lo+1)-a)
}

func TestPercentilesMatchBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 300 {
		n := 1 + rng.IntN(60)
		xs := make([]float64, n)
		for i := range xs {
			if trial%3 == 0 {
				xs[i] = float64(rng.IntN(5)) // many ties
			} else {
				xs[i] = rng.ExpFloat64() * 100
			}
		}
		orig := append([]float64(nil), xs...)
		s := summarize(xs)
		for _, c := range []struct {
			p   float64
			got float64
		}{{50, s.Median}, {90, s.P90}, {95, s.P95}, {99, s.P99}, {0, s.Min}, {100, s.Max}} {
			if want := brutePercentile(orig, c.p); math.Abs(c.got-want) > 1e-9*max(1, math.Abs(want)) {
				t.Fatalf("trial %d n=%d p%v = %v, brute force %v", trial, n, c.p, c.got, want)
			}
		}
		var sum float64
		for _, x := range orig {
			sum += x
		}
		if mean := sum / float64(n); math.Abs(s.Mean-mean) > 1e-9*max(1, mean) || s.Count != n {
			t.Fatalf("mean %v count %d, want %v %d", s.Mean, s.Count, mean, n)
		}
	}
}

func TestSummaryKnownValues(t *testing.T) {
	// numpy.percentile([1,2,3,4,5,6,7,8,9,10], [50,90,99]) = [5.5, 9.1, 9.91]; std = 2.8723
	s := summarize([]float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1})
	if s.Median != 5.5 || math.Abs(s.P90-9.1) > 1e-12 || math.Abs(s.P99-9.91) > 1e-12 || math.Abs(s.Std-2.8722813232690143) > 1e-12 {
		t.Fatalf("summary %+v", s)
	}
	if (summarize(nil) != Summary{}) {
		t.Fatal("empty sample must summarise to zeros")
	}
	if one := summarize([]float64{4}); one.P99 != 4 || one.Median != 4 || one.Std != 0 {
		t.Fatalf("single sample %+v", one)
	}
}
