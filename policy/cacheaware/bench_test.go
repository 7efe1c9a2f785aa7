package cacheaware

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
)

// BenchmarkPick routes 256 distinct 4 KB prompts in turn, each already in the tree.
// path=hit is the common case (a holder takes it: O(prefix) plus at most eight holders
// scored); path=miss sets --cache-threshold 1 so every request also scores the whole fleet,
// the worst case.
func BenchmarkPick(b *testing.B) {
	for _, path := range []string{"hit", "miss"} {
		for _, n := range policytest.BenchFleetSizes {
			b.Run(fmt.Sprintf("path=%s/workers=%d", path, n), func(b *testing.B) {
				f := policytest.NewFleet(b, n, "m")
				for i, w := range f.Workers {
					if i%2 == 0 {
						policytest.SetReport(w, policytest.Report{WaitingTokens: int64(100 + i%7), TokenUsage: 0.3, Throughput: 1500}, time.Time{})
					}
					w.InFlight.Store(int64(i % 5))
				}
				cfg := DefaultConfig()
				if path == "miss" {
					cfg.CacheThreshold = 1
				}
				bl, _ := newBuilder(b, cfg)
				p := bl.Build(f.Group("m"))
				reqs := make([]policy.Request, 256)
				for i := range reqs {
					reqs[i].Text = []byte(fmt.Sprintf("%04d ", i) + strings.Repeat("You are a helpful assistant. ", 142))[:4096]
					if _, err := p.Pick(&reqs[i]); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				i := 0
				stop := policytest.CPUPerOp(b)
				for b.Loop() {
					if _, err := p.Pick(&reqs[i&255]); err != nil {
						b.Fatal(err)
					}
					i++
				}
				stop()
			})
		}
	}
}
