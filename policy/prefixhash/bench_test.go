package prefixhash

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
)

// BenchmarkPick routes 1,024 distinct 2 KB prompts in turn (the default 256-token key hashes
// their first 1,024 characters), over a fleet with a few requests in flight everywhere.
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{8, 64, 512, 4096} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := policytest.NewFleet(b, n, "m")
			for i, w := range f.Workers {
				w.InFlight.Store(int64(i % 4))
			}
			p := New(DefaultConfig(), nil).Build(f.Group("m"))
			reqs := make([]policy.Request, 1024)
			for i := range reqs {
				reqs[i].Text = fmt.Appendf(nil, "%04d %2040s", i, "prompt")
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
