// Package leastload implements the least_load policy (spec: Least Load): every available worker
// is scored by its expected wait, the work queued on it and sent to it since its last load
// report over the fleet's generation rate, plus a KV-pressure penalty, and the lowest score
// wins; exact ties are broken uniformly at random. The spec divides each worker's work by its
// own reported throughput, which made busy workers look cheap between reports (herding); the
// one fleet rate is a deliberate difference (score.Config, docs/differences.md), and so is the
// KV-pressure term's usage, the report's moved by the in-flight change since it was polled
// (worker.LoadReport.KVOccupancyAt), where the spec reads the report alone. Workers equal
// for all the gateway can tell (awaiting work within half a request when every worker is
// computing a prefill; expected waits within one request among those computing none) are
// taken in turn, the one picked longest ago first (score.Scorer.LowestInTurn): its prefill
// started first, so it ends first, where the fewest awaiting tokens say nothing of progress
// (the multi-turn tail; docs/differences.md). A worker that decodes clearly more slowly
// than the group, by the steps the gateway times on the streams it relays
// (worker.DecodeTimer, score.SpeedFlags), ranks as if score.SlowPenaltyRequests requests
// awaited there: it takes work only when the others queue (a heterogeneous fleet).
//
// The score itself (score.Scorer) is shared with power_of_two and cache_aware, which use its
// defaults; only this policy takes the --least-load-* flags, including the waiting-queue cap.
//
// # Concurrency
//
// The spec's product serialises every selection on one lock to keep its since-report credit
// consistent and scans every worker under it. A pick here reads the group's kept order
// (score.Ranking): the workers' writers (in-flight count, since-report counters, the
// load-report pointer, the state word) only mark their place, and a pick, under the order's
// lock, re-weighs the marked workers and descends a tree, O(log n) instead of O(n).
// The gateway credits the chosen worker after the pick (worker.Hold.Begin), so two picks
// racing within the same microsecond may both see the pre-credit score; the next pick sees both.
//
// # Ownership
//
// The Picker keeps the Group's worker slice, which is immutable, one atomic turn per worker
// (the pick count at its last pick), the group's speed flags (the estimates they are
// refreshed from live on the workers, so a rebuilt picker keeps them) and its order, built by
// its first pick (the workers hold it weakly: a dropped picker is collected). Pick allocates
// nothing in steady state.
package leastload
