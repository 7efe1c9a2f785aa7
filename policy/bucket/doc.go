// Package bucket implements the bucket policy (spec: Bucket), the prefill-leg policy of PD
// disaggregation: each prefill worker owns a range of request lengths (characters of prompt
// text, or tokens when the request carries token ids), the last range open-ended, and requests
// go to the owner of their length.
//
// Ranges start as an even split of 0–4,096 and adapt: Maintain re-checks them every 5 seconds,
// and on the first check that sees traffic, and afterwards whenever the load per worker has
// changed by more than a factor of two since the last adjustment, recomputes them from the
// sizes of recent requests so that each range carries a similar share of the characters.
//
// Before using a request's bucket the policy checks balance: the load compared is the
// characters (or tokens) routed to each worker over the last 5 seconds; when the busiest and
// the least busy differ by more than --balance-abs-threshold and the busiest exceeds
// --balance-rel-threshold times the least busy, the request goes to the least busy worker.
//
// The policy only makes sense on a PD prefill leg; policy/all refuses --policy bucket outside
// PD mode with a clear message (the spec product silently picks at random instead).
//
// # Concurrency
//
// Loads are per-worker rings of five one-second slots of atomics; recent sizes a fixed ring of
// atomics. The balance check does not scan the workers: the owners' loads are kept in a
// tournament tree of least and most load (order.go), updated as picks add load, as Maintain
// (one goroutine) rotates the slots every second, and as the owners' routability changes
// (their writers mark them, worker.Changes), so a pick costs O(log n). Picks and rotations
// hold the tree's mutex; Maintain publishes new boundaries through an atomic pointer.
//
// # Ownership
//
// A Pick reads the request's length and keeps nothing; it allocates nothing.
package bucket
