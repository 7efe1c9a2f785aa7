//go:build !race

package manual

import (
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/sticky"
)

func TestPickAllocatesNothing(t *testing.T) {
	f := policytest.NewFleet(t, 16, "m")
	for _, mode := range sticky.AssignmentModes {
		b, _ := newBuilder(t, mode)
		p := b.Build(f.Group("m"))
		for _, req := range []*policy.Request{keyed("pinned-key"), {}} {
			if _, err := p.Pick(req); err != nil { // pin first: steady state is a hit
				t.Fatal(err)
			}
			if n := testing.AllocsPerRun(1000, func() {
				if _, err := p.Pick(req); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Fatalf("%s: Pick allocates %v times per call, want 0", mode, n)
			}
		}
	}
}
