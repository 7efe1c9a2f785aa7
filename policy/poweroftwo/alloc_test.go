//go:build !race

package poweroftwo

import (
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker/workertest"
)

func TestPickAllocatesNothing(t *testing.T) {
	f := policytest.NewFleet(t, 32, "m")
	for i, w := range f.Workers[:16] {
		policytest.SetReport(w, policytest.Report{WaitingTokens: int64(i % 2), Throughput: 1000}, time.Time{})
	}
	for i, w := range f.Workers { // every eighth decodes twice as slowly: the speed flags' path too
		w.ClearDecode()
		for range 16 {
			workertest.NoteDecode(w, int64(9e6*(1+i%8/7)))
		}
	}
	for _, metric := range Metrics {
		p := New(Config{LoadMetric: metric}, nil).Build(f.Group("m"))
		req := &policy.Request{}
		if n := testing.AllocsPerRun(1000, func() {
			if _, err := p.Pick(req); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("%s: Pick allocates %v times per call, want 0", metric, n)
		}
	}
}
