//go:build !race

package score_test

import (
	"testing"

	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/score"
)

// TestSpeedFlagsObserveDoesNotAllocate: Observe runs on every least_load pick, its refresh
// every max(16, n) of them.
func TestSpeedFlagsObserveDoesNotAllocate(t *testing.T) {
	fl := policytest.NewFleet(t, 64, "m")
	for i, w := range fl.Workers {
		setDecode(w, float64(9+i%3*9), score.MinDecodeSamples)
	}
	f := score.NewSpeedFlags(len(fl.Workers))
	if n := testing.AllocsPerRun(1000, func() { f.Observe(fl.Workers) }); n != 0 {
		t.Fatalf("Observe allocates %v times per call, want 0", n)
	}
}
