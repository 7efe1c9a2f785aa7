//go:build !race

package prefixhash

import (
	"strings"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
)

func TestPickAllocatesNothing(t *testing.T) {
	f := policytest.NewFleet(t, 16, "m")
	cfg := DefaultConfig()
	cfg.CacheBoundaries = []int{16, 64}
	p := New(cfg, nil).Build(f.Group("m"))
	f.Workers[3].InFlight.Store(50) // some requests take the overload walk
	text := []byte(strings.Repeat("a long shared system prompt ", 200))
	tokens := make([]uint32, 300)
	for _, req := range []*policy.Request{{Text: text}, {Tokens: tokens}, {RoutingKey: []byte("k")}, {}} {
		if n := testing.AllocsPerRun(500, func() {
			if _, err := p.Pick(req); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("Pick allocates %v times per call, want 0", n)
		}
	}
}
