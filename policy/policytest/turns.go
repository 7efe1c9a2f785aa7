package policytest

import (
	"math/rand/v2"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// OpenLoopTurns is the arrival side of loadgen's multi-turn run, for SimConfig.Conversations:
// int(rate×16) arrivals at 0 (the closed-loop warm-up: each waits for a ready conversation),
// then Poisson arrivals at rate for d from openAt; set SimConfig.Warmup to openAt so that the
// drained warm-up is left out. Only the arrival times matter: the requests are the turns
// Conversations hands out.
func OpenLoopTurns(seed uint64, rate float64, openAt, d time.Duration) []SimRequest {
	trace := make([]SimRequest, int(rate*16))
	for _, r := range PoissonTrace(seed, rate, d, func(*rand.Rand) SimRequest { return SimRequest{} }) {
		r.At += openAt
		trace = append(trace, r)
	}
	return trace
}

// SimulateMultiTurn runs p over ws on the routing-quality suite's multi-turn case in its
// earlier, larger shape (the suite now runs 256 conversations, which fit in the fleet's
// KV; this shape, whose working set overflows it, is kept as the harder case): 512
// conversations of 6 rounds (a 645-token system prompt, 161-token turns, 32-token
// answers, each turn resending the conversation; Conversations), engines whose prefix caches
// hold 65,536 tokens (the mocks' KV), a closed-loop warm-up that has drained by 12 s, then 30 s
// of Poisson arrivals at rate (OpenLoopTurns), reports every 4 s spread over 50 ms.
func SimulateMultiTurn(p policy.Picker, ws []*worker.Worker, seed uint64, rate float64) SimResult {
	const openAt = 12 * time.Second
	engines := DefaultEngines(len(ws))
	for i := range engines {
		engines[i].CacheTokens = 65_536
	}
	cfg := DefaultSimConfig(engines)
	cfg.Warmup, cfg.ReportSpread, cfg.Seed = openAt, 50*time.Millisecond, seed
	cfg.Conversations = NewConversations(512, 6, 645, 161, 32)
	return Simulate(p, ws, OpenLoopTurns(seed, rate, openAt, 30*time.Second), cfg)
}
