package cacheaware

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/radix"
	"github.com/smg-go/smg/worker"
)

// reportCapacity gives every worker a load report of an idle engine caching kvTokens.
func reportCapacity(ws []*worker.Worker, kvTokens int64) { reportUsage(ws, kvTokens, 0) }

// reportUsage gives every worker a load report of an engine caching kvTokens with usage of
// its KV held by running requests.
func reportUsage(ws []*worker.Worker, kvTokens int64, usage float64) {
	for _, w := range ws {
		w.SetLoad(&worker.LoadReport{At: time.Now(), WaitingTokens: -1, KVCapacityTokens: kvTokens, TokenUsage: usage})
	}
}

// distinctText is a prompt of n tokens (charsPerToken characters each) that shares nothing.
func distinctText(i, tokens int) string {
	s := fmt.Sprintf("%04d distinct prompt %d. ", i, i)
	return (s + strings.Repeat("filler words ", tokens*charsPerToken/13+1))[:tokens*charsPerToken]
}

// TestHolderWhoseEngineHasEvictedIsNotOffered checks the clock: once more prompt than the
// holder's engine can cache has been routed since the holder last used a prefix, the prefix
// is a miss (expected_wait_fallback), not a tree match; before that it is a match.
func TestHolderWhoseEngineHasEvictedIsNotOffered(t *testing.T) {
	for _, c := range []struct {
		name   string
		others int     // distinct 250-token prompts routed after the conversation's turn
		usage  float64 // of the engines' KV, by running requests
		match  bool
	}{
		// Two workers caching 4,000 tokens each: the horizon is 8,000 clock tokens.
		{"10 prompts since (2,500 tokens): still cached", 10, 0, true},
		{"40 prompts since (10,000 tokens): evicted", 40, 0, false},
		// Running requests holding most of the KV do not shorten it: they may hold the very
		// prefix (shared-prefix at saturation lost hits when they did).
		{"10 prompts since, KV 99% used: still cached", 10, 0.99, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := policytest.NewFleet(t, 2, "m")
			reportUsage(f.Workers, 4000, c.usage)
			b, set := newBuilder(t, DefaultConfig())
			p := b.Build(f.Group("m"))
			turn1 := distinctText(9999, 500)
			holder := pick(t, p, text(turn1))
			for i := range c.others {
				pick(t, p, text(distinctText(i, 250)))
			}
			before := branch(set, BranchTreeMatch)
			got := pick(t, p, text(turn1+" and the next turn"))
			matched := branch(set, BranchTreeMatch) > before
			if matched != c.match {
				t.Fatalf("tree match %v (went to %s, holder %s), want %v", matched, got.URL, holder.URL, c.match)
			}
			if c.match && got != holder {
				t.Fatalf("went to %s, not the holder %s", got.URL, holder.URL)
			}
		})
	}
}

// TestHitsDoNotAgeTheirOwnPrefix checks that a prefix reused by recent hits stays cached: a
// shared system prompt asked many questions on its holder does not push itself out (the
// clock counts a hit's reused prefix only when it was old).
func TestHitsDoNotAgeTheirOwnPrefix(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	reportCapacity(f.Workers, 4000)
	b, set := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	system := distinctText(1, 1000)
	holder := pick(t, p, text(system))
	for q := range 100 { // 100,000 prompt tokens, 12.5 horizons
		if got := pick(t, p, text(fmt.Sprintf("%s question %03d?", system, q))); got != holder {
			t.Fatalf("question %d went to %s, not the holder %s (branches: match %d, miss %d)", q, got.URL, holder.URL,
				branch(set, BranchTreeMatch), branch(set, BranchExpectedWaitFallback))
		}
	}
}

// TestShorterPrefixStillCachedIsOffered: when the holder's engine has dropped the tail of a
// prompt (its last use old) but another worker used the shared head recently, the head's
// holder is offered with the head's match.
func TestShorterPrefixStillCachedIsOffered(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	reportCapacity(f.Workers, 4000)
	b, _ := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	head := distinctText(1, 1000)
	old := head + distinctText(2, 200)
	b.Build(f.Group("m")).(policy.Recorder).Record(text(old), f.Workers[0])
	for i := range 40 { // 10,000 tokens: worker 0's hold on old lapses
		pick(t, p, text(distinctText(100+i, 250)))
	}
	p.(policy.Recorder).Record(text(head+" recent"), f.Workers[1])
	if got := pick(t, p, text(old+" again")); got != f.Workers[1] {
		t.Fatalf("went to %s, want %s, which used the head last", got.URL, f.Workers[1].URL)
	}
}

// TestOldBeliefWithoutCapacityOrFromAPeer: without max_total_num_tokens in the reports, and
// for paths a mesh peer taught (stamp peerStamp), the tree's belief stands.
func TestOldBeliefWithoutCapacityOrFromAPeer(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	b, set := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	turn1 := distinctText(9999, 500)
	holder := pick(t, p, text(turn1))
	for i := range 40 {
		pick(t, p, text(distinctText(i, 250)))
	}
	if got := pick(t, p, text(turn1+" more")); got != holder || branch(set, BranchTreeMatch) != 1 {
		t.Fatalf("no capacity reported: went to %s (holder %s), %d tree matches", got.URL, holder.URL, branch(set, BranchTreeMatch))
	}

	reportCapacity(f.Workers, 4000)
	peerPath := distinctText(5000, 500)
	b.TextTree().Insert([]byte(peerPath), radix.Tenant(f.Workers[1].Index), peerStamp) // as mesh.RadixTrees does
	for i := range 40 {
		pick(t, p, text(distinctText(100+i, 250)))
	}
	if got := pick(t, p, text(peerPath+" more")); got != f.Workers[1] {
		t.Fatalf("a peer's path: went to %s, want its holder %s", got.URL, f.Workers[1].URL)
	}
}

// TestMultiTurnOnSimulatedFleet runs the routing-quality suite's multi-turn workload (512
// conversations of 6 rounds in a fixed cycle) on 8 simulated engines whose LRU prefix caches
// hold 40 conversations each: a conversation's previous turn is always evicted before its
// next comes round (the hit rate is 0 whatever the routing). cache_aware must see that and
// route nearly every turn as a miss, by expected wait; before the clock it sent 78% of them
// to the holder of the evicted turn (tree_match), where the spill gate let it queue for a hit
// that did not exist.
func TestMultiTurnOnSimulatedFleet(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	engines := policytest.DefaultEngines(8)
	for i := range engines {
		engines[i].CacheGroups = 40
		engines[i].KVTokens = 40 * 1400 // conversations are 640-1,640 tokens, 1,200 mean
	}
	for _, rate := range []float64{40, 60} {
		trace := policytest.PoissonTrace(1, rate, 60*time.Second, policytest.MultiTurn(512, 6, 640, 160, 40))
		b, set := newBuilder(t, DefaultConfig())
		res := policytest.Simulate(b.Build(f.Group("m")), f.Workers, trace, policytest.DefaultSimConfig(engines))
		match, miss := branch(set, BranchTreeMatch), branch(set, BranchExpectedWaitFallback)
		t.Logf("rate %v: tree_match %d, spill %d, miss %d; hit rate %.3f, TTFT p99 %v", rate, match, branch(set, BranchSpill), miss, res.HitRate, res.TTFTQuantile(0.99))
		if res.HitRate != 0 {
			t.Fatalf("rate %v: the simulated engines hit %.3f: the workload does not evict as intended", rate, res.HitRate)
		}
		if total := match + branch(set, BranchSpill) + miss; float64(match) > 0.1*float64(total) {
			t.Errorf("rate %v: %d of %d picks went to a holder whose engine had evicted the prefix", rate, match, total)
		}
	}
}
