//go:build !race

package consistenthash

import (
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
)

func TestPickAllocatesNothing(t *testing.T) {
	f := policytest.NewFleet(t, 16, "m")
	p := New(Config{RoutingKeyOverride: true}, nil).Build(f.Group("m"))
	for _, req := range []*policy.Request{
		{RoutingKey: []byte("session-1")},
		{Rid: []byte("conv_t2_r1")},
		{Cookie: []byte("c=1")},
		{TargetWorker: []byte("3")},
		{},
	} {
		if n := testing.AllocsPerRun(1000, func() {
			if _, err := p.Pick(req); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("Pick(%+v) allocates %v times per call, want 0", req, n)
		}
	}
}
