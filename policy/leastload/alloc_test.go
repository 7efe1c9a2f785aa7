//go:build !race

package leastload

import (
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker/workertest"
)

func TestPickAllocatesNothing(t *testing.T) {
	f := policytest.NewFleet(t, 64, "m")
	for i, w := range f.Workers[:32] {
		// Steps of 1-4 ms: the slower workers drain at their own rate (score.Rate).
		policytest.SetReport(w, policytest.Report{WaitingTokens: int64(i % 3), Running: 1 + i%4, Throughput: 1000}, t0)
	}
	for i, w := range f.Workers { // every eighth decodes twice as slowly: the speed flags' path too
		w.ClearDecode()
		for range 16 {
			workertest.NoteDecode(w, int64(9e6*(1+i%8/7)))
		}
	}
	p := New(DefaultConfig(), nil).Build(f.Group("m"))
	req := &policy.Request{}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := p.Pick(req); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Pick allocates %v times per call, want 0", n)
	}
}
