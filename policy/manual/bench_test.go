package manual

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/sticky"
)

// BenchmarkPick routes 4,096 pinned keys in turn (the steady state: every key is a hit).
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{8, 64, 512, 4096} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := policytest.NewFleet(b, n, "m")
			bl, _ := newBuilder(b, sticky.AssignRandom)
			p := bl.Build(f.Group("m"))
			reqs := make([]policy.Request, 4096)
			for i := range reqs {
				reqs[i].RoutingKey = fmt.Appendf(nil, "session-%d", i)
				if _, err := p.Pick(&reqs[i]); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, err := p.Pick(&reqs[i&4095]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
