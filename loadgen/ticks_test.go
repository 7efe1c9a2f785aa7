package loadgen

import (
	"math"
	"strings"
	"testing"
)

func TestNiceScale(t *testing.T) {
	for _, tc := range []struct {
		lo, hi   float64
		maxTicks int
		want     string
	}{
		{0, 19, 4, "0 5 10 15 20"}, // not 4.75 / 9.5 / 14.25
		{0, 90, 4, "0 50 100"},
		{0, 1, 4, "0 0.5 1.0"},
		{0, 0.0031, 4, "0 0.001 0.002 0.003 0.004"},
		{3.2, 47.9, 5, "0 10 20 30 40 50"},
		{0, 123456, 4, "0 50k 100k 150k"},
		{0, 2.5e9, 5, "0 500M 1000M 1500M 2000M 2500M"},
		{1234.5, 1234.6, 4, "1234.4 1234.6"}, // no finer than 10⁻⁴ of the magnitude
		{0, 0, 4, "0 0.5 1.0"},
		{-7, 7, 4, "-10 -5 0 5 10"},
		{0, 12000, 5, "0 5k 10k 15k"},
	} {
		s := niceScale(tc.lo, tc.hi, tc.maxTicks)
		var labels []string
		for _, v := range s.ticks() {
			labels = append(labels, s.label(v))
		}
		if got := strings.Join(labels, " "); got != tc.want {
			t.Errorf("niceScale(%v, %v, %d) ticks %q, want %q", tc.lo, tc.hi, tc.maxTicks, got, tc.want)
		}
	}
}

func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{3, 800, "5 10 20 50 100 200 500"},
		{0.4, 12000, "1 10 100 1000 10k"}, // over three decades: powers of ten only
		{0.012, 0.9, "0.02 0.05 0.1 0.2 0.5"},
	} {
		var labels []string
		for _, v := range logTicks(tc.lo, tc.hi) {
			labels = append(labels, logLabel(v))
		}
		if got := strings.Join(labels, " "); got != tc.want {
			t.Errorf("logTicks(%v, %v) = %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// FuzzNiceScale: for any finite range the scale holds it (clamped to ±maxAxisValue), has
// 1 to maxTicks intervals of a 1-2-5 step, and labels every tick distinctly, without an
// exponent, in at most maxTickLabel characters.
func FuzzNiceScale(f *testing.F) {
	for _, seed := range []struct {
		lo, hi float64
		n      uint8
	}{{0, 19, 4}, {0, 1e-9, 4}, {-3, 1e15, 5}, {7, 7, 4}, {0.001, 1e6, 5}, {1e300, -1e300, 3}, {0, 99999.99, 4}, {5, 4.999999, 1}} {
		f.Add(seed.lo, seed.hi, seed.n)
	}
	f.Fuzz(func(t *testing.T, lo, hi float64, n uint8) {
		if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
			return
		}
		maxTicks := int(n%8) + 1 // niceScale takes 1 as 2
		s := niceScale(lo, hi, maxTicks)
		a, b := clampAxis(min(lo, hi)), clampAxis(max(lo, hi))
		if s.Min > a || s.Max < b || s.Max <= s.Min {
			t.Fatalf("niceScale(%v, %v) = %+v does not hold the range", lo, hi, s)
		}
		if k := s.intervals(); k < 1 || k > max(maxTicks, 2) {
			t.Fatalf("niceScale(%v, %v, %d) = %+v: %d intervals", lo, hi, maxTicks, s, k)
		}
		mant := s.Step / math.Pow(10, math.Floor(math.Log10(s.Step)+1e-9))
		if math.Abs(mant-1) > 1e-9 && math.Abs(mant-2) > 1e-9 && math.Abs(mant-5) > 1e-9 {
			t.Fatalf("step %v is not 1, 2 or 5 times a power of ten", s.Step)
		}
		seen := map[string]bool{}
		for _, v := range s.ticks() {
			l := s.label(v)
			if strings.ContainsAny(l, "eE") || len(l) > maxTickLabel || seen[l] {
				t.Fatalf("niceScale(%v, %v, %d) = %+v: tick %v labelled %q (labels so far %v)", lo, hi, maxTicks, s, v, l, seen)
			}
			seen[l] = true
		}
	})
}
