// Package prefixhash implements the prefix_hash policy (spec: Prefix Hash): the head of each
// request is hashed onto a consistent-hash ring, so requests that start the same way land on
// the same worker, and a request moves off that worker only when the worker is clearly
// overloaded.
//
// The hash key is the first of: a valid routing-key header (hashed as is); the first
// --prefix-token-count token ids; the first 4 × --prefix-token-count characters of the text.
// With --cache-boundaries the head is cut at the deepest boundary the request reaches (4
// characters per token for text), and an overloaded target is retried at each shallower
// boundary. A request with no key goes to the least-loaded worker.
//
// Load check: a ring worker is overloaded when its in-flight count exceeds both
// --prefix-hash-load-factor times the fleet mean and the mean plus
// --prefix-hash-balance-abs-threshold. The mean is a policy.FleetMean, refreshed in amortised
// O(1), and the check is skipped outright when the target's count is within the absolute
// margin, so the common pick costs a hash and a ring lookup whatever the fleet size.
//
// # Concurrency
//
// Rings are built in Build on the registry's writer goroutine and are immutable; picks only read
// them and the workers' atomics.
//
// # Ownership
//
// Pick hashes views of the request's bytes and keeps none of them; it allocates nothing.
package prefixhash
