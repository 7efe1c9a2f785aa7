// Package poweroftwo implements the power_of_two policy (spec: Power of Two Choices): sample two
// distinct available workers at random (dealt from a shuffled deck of the group's workers, so
// consecutive picks do not redraw the workers just drawn: a deliberate difference,
// docs/differences.md) and take the better one, by expected wait (the default,
// scored like least_load with its default tuning) or, with --power-of-two-load-metric requests,
// by in-flight requests with the expected wait breaking a tie. The expected wait turns token
// work into seconds at the rate of the whole group (policy.FleetRate, refreshed every
// n/16 picks), not the sampled worker's own report, so a pick still reads two workers'
// loads amortised. The least_requests metric gives
// up sampling and keeps the workers with the fewest in-flight requests across the fleet.
//
// # Concurrency
//
// Pickers read only per-worker atomics but for the deck, which a short lock guards (two cards
// dealt, or a reshuffle every n/2 picks); any number of picks run at once.
//
// # Ownership
//
// The Picker keeps the Group's worker slice and a deck of its indexes. Pick allocates
// nothing: pairs live on the stack and the least_requests scratch slice is pooled.
package poweroftwo
