package poweroftwo

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
)

func BenchmarkPick(b *testing.B) {
	for _, metric := range Metrics {
		for _, n := range policytest.BenchFleetSizes {
			b.Run(fmt.Sprintf("metric=%s/workers=%d", metric, n), func(b *testing.B) {
				f := policytest.NewFleet(b, n, "m")
				for i, w := range f.Workers {
					if i%2 == 0 {
						policytest.SetReport(w, policytest.Report{WaitingTokens: int64(100 + i%7), TokenUsage: 0.3, Throughput: 1500}, time.Time{})
					}
					w.InFlight.Add(int64(i % 5))
				}
				p := New(Config{LoadMetric: metric}, nil).Build(f.Group("m"))
				req := &policy.Request{}
				if _, err := p.Pick(req); err != nil { // least_requests' first pick builds its order
					b.Fatal(err)
				}
				runtime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				stop := policytest.CPUPerOp(b)
				for b.Loop() {
					if _, err := p.Pick(req); err != nil {
						b.Fatal(err)
					}
				}
				stop()
			})
		}
	}
}
