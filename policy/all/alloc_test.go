//go:build !race

package all

import (
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
)

// TestEveryPickAllocatesNothing runs each of the ten policies, plain and wrapped in sticky
// sessions, on a 4 KB prompt, a keyed request and a bare one, after a warm-up pick of each.
func TestEveryPickAllocatesNothing(t *testing.T) {
	f := policytest.NewFleet(t, 16, "m")
	for i, w := range f.Workers[:8] {
		policytest.SetReport(w, policytest.Report{WaitingTokens: int64(i), Throughput: 1000}, time.Time{})
	}
	g := f.Group("m")
	reqs := []*policy.Request{
		{Text: []byte(strings.Repeat("You are a helpful assistant. ", 142))[:4096]},
		{RoutingKey: []byte("session-1"), Text: []byte("hi")},
		{Rid: []byte("conv_t2"), Text: []byte("hello")},
		{},
	}
	for _, override := range []bool{false, true} {
		nb := builders(t, func(c *Config) { c.PDMode, c.RoutingKeyOverride = true, override })
		for _, name := range Names() {
			b, err := nb(name, true)
			if err != nil {
				t.Fatal(err)
			}
			p := b.Build(g)
			for _, req := range reqs {
				if _, err := p.Pick(req); err != nil {
					t.Fatal(err)
				}
				if n := testing.AllocsPerRun(300, func() {
					if _, err := p.Pick(req); err != nil {
						t.Fatal(err)
					}
				}); n != 0 {
					t.Errorf("%s (sticky %v): Pick(%q…) allocates %v times per call", name, override, string(req.Text[:min(len(req.Text), 10)]), n)
				}
			}
		}
	}
}
