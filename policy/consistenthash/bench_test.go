package consistenthash

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
)

// BenchmarkPick looks up 1,024 distinct routing keys in turn, so the ring's memory is touched
// as under real traffic rather than one hot cache line.
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{8, 64, 512, 4096} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := policytest.NewFleet(b, n, "m")
			p := New(Config{}, nil).Build(f.Group("m"))
			reqs := make([]policy.Request, 1024)
			for i := range reqs {
				reqs[i].RoutingKey = fmt.Appendf(nil, "session-%d", i)
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, err := p.Pick(&reqs[i&1023]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
