//go:build !race

package policy_test

import (
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/passthrough"
	"github.com/smg-go/smg/policy/random"
	"github.com/smg-go/smg/policy/roundrobin"
)

func TestBasicPicksDoNotAllocate(t *testing.T) {
	reg, _ := fleet(t, 8)
	for name, b := range map[string]policy.Builder{
		"round_robin": roundrobin.New(), "random": random.New(nil), "passthrough": passthrough.New(testutil.Quiet),
	} {
		p := b.Build(group(reg))
		req := policy.Request{Model: []byte("m"), Text: []byte("hello")}
		if a := testing.AllocsPerRun(1000, func() { _, _ = p.Pick(&req) }); a != 0 {
			t.Errorf("%s: %.1f allocs per Pick", name, a)
		}
	}
	r := newRouter(t, reg, "round_robin")
	if a := testing.AllocsPerRun(1000, func() { _, _ = r.Current().Lookup([]byte("m")) }); a != 0 {
		t.Errorf("Lookup: %.1f allocs", a)
	}
}
