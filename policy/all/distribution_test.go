package all

import (
	"math"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/random"
	"github.com/smg-go/smg/policy/roundrobin"
)

// TestDistributions checks 100,000 picks with a fixed seed: round robin exactly even, random
// within five standard deviations of even. (power_of_two, least_load ties and consistent
// hashing have theirs in their packages.)
func TestDistributions(t *testing.T) {
	const n, picks = 5, 100_000
	f := policytest.NewFleet(t, n, "m")
	nb := builders(t, func(c *Config) { c.Rand = testutil.NewRand(2024) })
	for _, name := range []string{roundrobin.Name, random.Name} {
		b, err := nb(name, true)
		if err != nil {
			t.Fatal(err)
		}
		counts := policytest.Counts(t, b.Build(f.Group("m")), &policy.Request{}, picks)
		for _, w := range f.Workers {
			dev := math.Abs(float64(counts[w]) - picks/n)
			switch {
			case name == roundrobin.Name && dev != 0:
				t.Fatalf("round_robin: %s got %d, want exactly %d", w.URL, counts[w], picks/n)
			case dev > 5*math.Sqrt(picks*0.2*0.8): // 5 sd ≈ 632
				t.Fatalf("%s: %s got %d, want %d ± 632", name, w.URL, counts[w], picks/n)
			}
		}
	}
}
