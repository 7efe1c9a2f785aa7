// Package score is the expected-wait score that least_load, power_of_two and cache_aware's
// load-balancing fallback rank workers by (spec: Least Load; the fleet-rate change is in
// docs/differences.md): Config and its defaults, Scorer.ReportedWait (the reference formula)
// and Scorer.Lowest (the hand-inlined selection the pickers run, checked against it in
// score_test.go), with ties broken uniformly at random; Scorer.LowestInTurn, the same
// selection with equal workers taken in the caller's turn order (the one picked longest ago
// first); SpeedFlags, the verdicts on which workers decode clearly more slowly than their group
// (speed.go), which LowestInTurnAt and power_of_two read; Ranking (ranking.go), a group kept
// in LowestInTurnAt's order (or, for power_of_two's least_requests, by in-flight count first)
// as its workers' load changes, so that a pick over 10,000 workers costs a few µs where the
// scan costs over a hundred; it picks exactly as the scan.
//
// # Concurrency and ownership
//
// A Scorer is immutable and safe for concurrent use; Lowest reads the workers' atomics live
// and allocates nothing in steady state (its tie buffers are pooled). LowestInTurn reads the
// caller's turns atomically; the caller records its pick's turn after it (a pick racing in
// the same instant may see the older turn, as it may see the pre-dispatch score). A Ranking
// serialises its picks on a mutex; the workers' writers only mark what changed
// (worker.Changes), and the next pick re-weighs those.
package score
