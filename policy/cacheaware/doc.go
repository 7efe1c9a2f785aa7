// Package cacheaware implements cache_aware, the default policy (spec: Cache-Aware): each
// request goes to a worker that already holds its prefix, and to the lowest expected wait when
// no worker holds enough of it or every holder is far busier than the fleet.
//
// # Decision flow
//
// Per model the Builder keeps a radix.TextTree of routing text and a radix.TokenTree of token
// ids in whole pages of --block-size tokens; tenants are Worker.Index. One descent of the tree
// (radix MatchAndInsert) finds the longest stored prefix and its holders, runs the decision
// below under the shard's lock, and inserts the request for the chosen worker. A holder whose
// engine must have evicted the prefix by now, by the trees' token clock and its load report's
// KV capacity (liveness.go), does not count: the match offered is the longest
// prefix some holder still caches, with those holders only.
//
//  1. The match ratio is matched over input length. At or below --cache-threshold the request
//     is a miss: the lowest expected wait among available workers takes it
//     (expected_wait_fallback).
//  2. Above it, the candidates are the available holders. A worker is hot when its in-flight
//     count exceeds both --balance-rel-threshold times the fleet mean and the mean plus the
//     smaller of --balance-abs-threshold and ratio/(1-ratio), what the hit is worth in
//     requests: on the holder the request and those queued there (hits too) cost (1-ratio) of
//     a prefill each, elsewhere it costs a whole one (the spec has the threshold alone;
//     docs/differences.md). The lowest expected wait among the candidates that are not hot
//     takes the request (tree_match); if every candidate is hot, the lowest expected wait
//     among the workers that are not hot does, or among all when every worker is hot (spill).
//     The spill target becomes another holder of the prefix, so a hot prefix replicates.
//     A holder that last used the prefix more than half its horizon ago (its engine may have
//     dropped it, liveness.go) is passed over too, for a worker with nothing awaiting its
//     first token, when the token work awaiting its first token there exceeds what the hit
//     would save, both weighed by how doubtful the hit is (spill): such a hit may be a whole
//     prefill queued behind others (decide). With no such worker (a busy fleet)
//     the holder keeps it.
//  3. When a retry moves a request, the gateway's Record call inserts the prefix for the worker
//     that finally served it.
//
// With --cache-index hash a placement map replaces the trees (placement.go): a request's
// token ids are hashed up to each --cache-boundaries position they reach, the deepest head
// with a holder sent it within --cache-ttl-secs gives the candidates for the same spill gate,
// and the chosen worker becomes a holder at every boundary (three holders a head at most).
// Requests without token ids, or shorter than the first boundary, are load-balanced and not
// recorded; the mesh does not synchronize the map (spec).
//
// The expected wait is score.Scorer with least_load's default tuning and least_load's rate
// (score.RateOf: a clearly slower engine drains its work at its own rate, so the spec's "same
// expected-wait score as least_load" holds on a heterogeneous fleet); the fleet mean is a
// policy.FleetMean, so a hit costs O(prefix) plus the scoring of at most eight holders, and
// only misses and spills score the whole fleet.
//
// Periodic work runs in Maintain (policy.Maintainer), off the hot path: every
// --eviction-interval seconds each tree over --max-tree-size evicts least-recently-used
// leaves, and the size gauges smg_cache_tree_chars, smg_cache_tree_tokens and
// smg_cache_tree_tenants are refreshed. A worker that leaves the registry has its tenancy
// purged from both trees in the next Build, before its index can be reused.
//
// # Concurrency
//
// Trees are safe for concurrent use (sharded locks, see package radix). The tree's LRU stamps
// come from a per-builder clock counted in prompt tokens (one atomic add per pick), so the hot
// path reads no wall clock. Build and Maintain run on control-plane goroutines; Pick and Record from any.
//
// # Ownership
//
// The trees copy what they store; a Pick keeps no reference to the request's bytes. The
// per-pick chooser is pooled, so a Pick allocates nothing in steady state.
package cacheaware
