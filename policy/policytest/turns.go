package policytest

import (
	"math/rand/v2"
	"time"
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
