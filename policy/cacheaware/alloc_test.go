//go:build !race

package cacheaware

import (
	"strings"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
)

// TestPickAllocatesNothing routes a 4 KB prompt (the measure) on the hit path and on
// the miss path, and a token request, after a warm-up that stores them.
// With KV capacities in the load reports the holders' liveness is checked too.
func TestPickAllocatesNothing(t *testing.T) {
	f := policytest.NewFleet(t, 16, "m")
	for _, threshold := range []float64{DefaultCacheThreshold, 1, -1} { // 1: every request a miss; -1: reports with capacities
		if threshold == -1 {
			threshold = DefaultCacheThreshold
			reportCapacity(f.Workers, 65_536)
		}
		cfg := DefaultConfig()
		cfg.CacheThreshold = threshold
		b, _ := newBuilder(t, cfg)
		p := b.Build(f.Group("m"))
		toks := make([]uint32, 1024)
		for i := range toks {
			toks[i] = uint32(i)
		}
		for _, req := range []*policy.Request{
			{Text: []byte(strings.Repeat("You are a helpful assistant. ", 142))[:4096]},
			{Tokens: toks},
		} {
			if _, err := p.Pick(req); err != nil {
				t.Fatal(err)
			}
			if n := testing.AllocsPerRun(500, func() {
				if _, err := p.Pick(req); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Fatalf("threshold %v: Pick allocates %v times per call, want 0", threshold, n)
			}
		}
	}
}

// TestHashIndexPickAllocatesNothing: a pick in hash mode, hit or miss, allocates nothing.
func TestHashIndexPickAllocatesNothing(t *testing.T) {
	f := policytest.NewFleet(t, 16, "m")
	b, _ := newBuilder(t, hashConfig())
	p := b.Build(f.Group("m"))
	req := head(1, 3000, 3000, 0)
	if _, err := p.Pick(req); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(500, func() {
		if _, err := p.Pick(req); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("hash-mode Pick allocates %v times per call, want 0", n)
	}
}

// TestEventModePickAllocatesNothing: a pick in event mode, hit or miss, allocates nothing.
func TestEventModePickAllocatesNothing(t *testing.T) {
	f, ev := eventFleet(t, 16)
	cfg := DefaultConfig()
	cfg.Events = ev
	b, _ := newBuilder(t, cfg)
	p := b.Build(f.Group("m"))
	req := tokens(1024)
	for _, d := range []uint32{64, 0} {
		ev.depth[f.Workers[5].URL] = d
		if _, err := p.Pick(req); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(500, func() {
			if _, err := p.Pick(req); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("depth %d: an event-mode Pick allocates %v times, want 0", d, n)
		}
	}
}
