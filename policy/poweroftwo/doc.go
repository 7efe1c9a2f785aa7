// Package poweroftwo implements the power_of_two policy (spec: Power of Two Choices): take two
// distinct available workers and route to the better one, by expected wait (the default,
// scored like least_load with its default tuning) or, with --power-of-two-load-metric
// requests, by in-flight requests with the expected wait breaking a tie. The two are not
// drawn independently at random but dealt from a queue of the group's workers, least recently
// picked first (shuffled at build), and two expected waits within one request of each other
// count as equal, the candidate picked less recently winning: a deliberate difference
// (docs/differences.md) that spaces each worker's requests as round robin does while the
// awaiting work and the expected wait still steer. The expected wait turns token work into
// seconds at the rate of the whole group (policy.FleetRate, refreshed every n/16 picks), not
// the sampled worker's own report, so a pick still reads two workers' loads amortised. The
// least_requests metric gives up sampling and keeps the workers with the fewest in-flight
// requests across the fleet. A worker that decodes clearly more slowly than the group
// (score.SpeedFlags) is left out of the pairs while two others are usable and takes a request
// only when the pair's winner has more than score.SlowPenaltyRequests requests' work awaiting
// beyond its own.
//
// # Concurrency
//
// Pickers read only per-worker atomics but for the queue, which a short lock guards (two
// workers compared and moved per pick); any number of picks run at once.
//
// # Ownership
//
// The Picker keeps the Group's worker slice and a queue of its indexes. Pick allocates
// nothing: pairs live on the stack and the least_requests scratch slice is pooled.
package poweroftwo
