package bucket

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
)

// BenchmarkPick routes 1 KB prompts; the balance check reads the least and most window load
// from the owners' order (O(log n); the spec's product scans them).
func BenchmarkPick(b *testing.B) {
	for _, n := range policytest.BenchFleetSizes {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			_, _, p := setup(b, n, DefaultConfig())
			req := &policy.Request{Text: []byte(strings.Repeat("x", 1024))}
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
