package all

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/consistenthash"
	"github.com/smg-go/smg/policy/manual"
	"github.com/smg-go/smg/policy/policytest"
)

// BenchmarkPick measures every policy's Pick at 8, 64, 512 and 4,096 workers in one run, the
// table of docs/benchmarks-policy.md. Half the workers report loads and every worker has a
// few requests in flight. Requests cycle through 256 distinct 4 KB prompts (each routed once
// before timing, so cache_aware measures its hit path) and, for consistent_hashing and
// manual, 256 routing keys (pinned before timing).
func BenchmarkPick(b *testing.B) {
	reqs := make([]policy.Request, 256)
	keyed := make([]policy.Request, 256)
	for i := range reqs {
		reqs[i].Text = []byte(fmt.Sprintf("%04d ", i) + strings.Repeat("You are a helpful assistant. ", 142))[:4096]
		keyed[i].RoutingKey = fmt.Appendf(nil, "session-%d", i)
	}
	for _, n := range policytest.BenchFleetSizes {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := policytest.NewFleet(b, n, "m")
			for i, w := range f.Workers {
				if i%2 == 0 {
					policytest.SetReport(w, policytest.Report{WaitingTokens: int64(100 + i%7), TokenUsage: 0.3, Throughput: 1500}, time.Time{})
				}
				w.InFlight.Store(int64(i % 5))
			}
			g := f.Group("m")
			nb := builders(b, func(c *Config) { c.PDMode = true })
			for _, name := range Names() {
				b.Run("policy="+name, func(b *testing.B) {
					bl, err := nb(name, true)
					if err != nil {
						b.Fatal(err)
					}
					p := bl.Build(g)
					rs := reqs
					if name == consistenthash.Name || name == manual.Name {
						rs = keyed
					}
					for i := range rs {
						if _, err := p.Pick(&rs[i]); err != nil {
							b.Fatal(err)
						}
					}
					runtime.GC()
					b.ReportAllocs()
					b.ResetTimer()
					i := 0
					for b.Loop() {
						if _, err := p.Pick(&rs[i&255]); err != nil {
							b.Fatal(err)
						}
						i++
					}
				})
			}
		})
	}
}
